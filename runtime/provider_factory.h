// Provider factory: the HTTP provider a configuration names (openai,
// anthropic), with its settings resolved from the config and the
// environment: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL override
// provider.base_url (unless it came from the command line); the key is read
// from the variable provider.api_key_env names (default OPENAI_API_KEY /
// ANTHROPIC_API_KEY). A missing key is an error naming the variable, before
// any request, unless the base URL is on loopback (local servers need none).
// The key's value appears in no message.
//
// Pure functions of their arguments and the environment; thread-safe.
#pragma once

#include <memory>

#include "actors/provider/http_provider.h"
#include "base/status.h"
#include "runtime/config.h"

namespace carapace {

class BodyStore;

bool is_http_provider(const std::string& name);

// `key_on_node`: the key is held by provider nodes (docs/scale-out.md); a
// missing one is no error here.
Status resolve_http_options(const ProviderConfig& config, HttpProviderOptions* out, bool key_on_node = false);

// How long a host waits for a provider node's answer to one attempt: the
// provider's own bound on an attempt (which the node enforces), its
// connection time-out, and 10 s for the trip.
uint64_t provider_attempt_deadline_ms(const ProviderConfig& config);

std::shared_ptr<Provider> make_http_provider(const std::string& name, HttpProviderOptions options,
                                             std::shared_ptr<HttpClient> client, std::shared_ptr<BodyStore> bodies);

}  // namespace carapace
