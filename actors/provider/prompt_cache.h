// PromptCache: where a request asks the provider to cache its prefix
// (provider.cache in the config, docs/config.md).
//
// Anthropic caches up to each `cache_control` breakpoint a request carries:
// on the tool definitions (the last tool), the system prompt, and the last
// content block of each of the last `last_messages` messages, at most 4 in
// all (the API's limit), with a lifetime of 5 minutes or, with ttl "1h", an
// hour. OpenAI caches every prompt's prefix by itself; `prompt_cache_key`
// is sent with each request so that requests sharing a prefix reach the
// same cache.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace carapace {

struct PromptCache {
  bool tools = false;
  bool system = false;
  uint32_t last_messages = 0;
  std::string ttl;               // "", "5m" or "1h"
  std::string prompt_cache_key;  // openai

  static constexpr uint32_t kMaxBreakpoints = 4;  // anthropic's per request

  bool any() const { return tools || system || last_messages > 0 || !ttl.empty() || !prompt_cache_key.empty(); }
  uint32_t breakpoints() const { return (tools ? 1 : 0) + (system ? 1 : 0) + last_messages; }
};

// Whether `cache` fits `provider` (anthropic, openai; the others ignore
// it): an error naming the key and what to do otherwise. `where` prefixes
// the key ("c.json: provider.cache").
Status check_prompt_cache(const PromptCache& cache, const std::string& provider, const std::string& where);

}  // namespace carapace
