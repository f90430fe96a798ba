#include "runtime/provider_factory.h"

#include <algorithm>
#include <cstdlib>

#include "actors/provider/anthropic_provider.h"
#include "actors/provider/openai_provider.h"

namespace carapace {

bool is_http_provider(const std::string& name) { return name == "openai" || name == "anthropic"; }

Status resolve_http_options(const ProviderConfig& c, HttpProviderOptions* out, bool key_on_node) {
  if (!is_http_provider(c.name)) return Status::invalid_argument("\"" + c.name + "\" is not an HTTP provider");
  HttpProviderOptions o;
  const char* url_env = c.name == "openai" ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL";
  const char* env_url = c.base_url_is_explicit ? nullptr : std::getenv(url_env);
  o.base_url = env_url && *env_url ? env_url : (!c.base_url.empty() ? c.base_url : default_base_url(c.name));
  if (o.base_url.rfind("http://", 0) != 0 && o.base_url.rfind("https://", 0) != 0) {
    return Status::invalid_argument(std::string(env_url && *env_url ? url_env : "provider.base_url") +
                                    ": must start with http:// or https://, got \"" + o.base_url + "\"");
  }
  o.api_key_env = c.api_key_env.empty() ? default_api_key_env(c.name) : c.api_key_env;
  const char* key = std::getenv(o.api_key_env.c_str());
  o.api_key = key ? key : "";
  if (key_on_node) {
    o.api_key.clear();  // never this host's: the nodes send theirs
  } else if (o.api_key.empty() && !is_loopback_url(o.base_url)) {
    return Status::invalid_argument("the " + c.name + " provider needs an API key: set the environment variable " +
                                    o.api_key_env + " (or name another one in provider.api_key_env); only a " +
                                    "base URL on loopback (a local server) may go without");
  }
  o.max_tokens = c.max_tokens;
  o.has_temperature = c.has_temperature;
  o.temperature = c.temperature;
  o.stream = c.stream;
  o.connect_timeout_ms = c.connect_timeout_ms;
  o.first_byte_timeout_ms = c.first_byte_timeout_ms;
  o.idle_timeout_ms = c.idle_timeout_ms;
  o.max_stream_ms = c.max_stream_ms;
  o.max_line_bytes = c.max_line_bytes;
  o.max_response_bytes = c.max_response_bytes;
  o.max_tool_calls = c.max_tool_calls;
  for (const auto& [name, value] : c.headers) o.extra_headers.push_back(name + ": " + value);
  CARAPACE_RETURN_IF_ERROR(check_prompt_cache(c.cache, c.name, "provider.cache"));
  o.cache = c.cache;
  *out = std::move(o);
  return Status();
}

uint64_t provider_attempt_deadline_ms(const ProviderConfig& c) {
  return std::max(c.max_stream_ms, c.first_byte_timeout_ms) + c.connect_timeout_ms + 10'000;
}

std::shared_ptr<Provider> make_http_provider(const std::string& name, HttpProviderOptions options,
                                             std::shared_ptr<HttpClient> client, std::shared_ptr<BodyStore> bodies) {
  if (name == "anthropic") return std::make_shared<AnthropicProvider>(std::move(options), client, bodies);
  return std::make_shared<OpenAiProvider>(std::move(options), client, bodies);
}

}  // namespace carapace
