#include "actors/provider/prompt_cache.h"

namespace carapace {

Status check_prompt_cache(const PromptCache& cache, const std::string& provider, const std::string& where) {
  if (!cache.ttl.empty() && cache.ttl != "5m" && cache.ttl != "1h") {
    return Status::invalid_argument(where + ".ttl: must be \"5m\" or \"1h\" (the lifetimes Anthropic offers), got \"" +
                                    cache.ttl + "\"");
  }
  if (cache.breakpoints() > PromptCache::kMaxBreakpoints) {
    return Status::invalid_argument(
        where + ": asks for " + std::to_string(cache.breakpoints()) + " cache breakpoints (" +
        (cache.tools ? "tools, " : "") + (cache.system ? "system, " : "") + std::to_string(cache.last_messages) +
        " last messages); Anthropic allows at most " + std::to_string(PromptCache::kMaxBreakpoints) +
        " in a request: lower last_messages");
  }
  if (cache.prompt_cache_key.size() > 1024 ||
      cache.prompt_cache_key.find_first_of(std::string("\r\n\t\0", 4)) != std::string::npos) {
    return Status::invalid_argument(where +
                                    ".prompt_cache_key: must be at most 1024 bytes, without control characters");
  }
  if (provider == "openai" && (cache.breakpoints() > 0 || !cache.ttl.empty())) {
    return Status::invalid_argument(
        where + ": tools, system, last_messages and ttl are Anthropic's cache breakpoints; OpenAI caches every "
                "prompt's prefix by itself (set provider.cache.prompt_cache_key to route requests that share one)");
  }
  if (provider == "anthropic" && !cache.prompt_cache_key.empty()) {
    return Status::invalid_argument(where + ".prompt_cache_key: is OpenAI's; Anthropic caches at breakpoints: set "
                                    "provider.cache.tools, .system or .last_messages");
  }
  return Status();
}

}  // namespace carapace
