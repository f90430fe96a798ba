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

Status resolve_http_options(const ProviderConfig& config, HttpProviderOptions* out);

std::shared_ptr<Provider> make_http_provider(const std::string& name, HttpProviderOptions options,
                                             std::shared_ptr<HttpClient> client, std::shared_ptr<BodyStore> bodies);

}  // namespace carapace
