// AnthropicProvider: Anthropic's Messages API: POST {base_url}/v1/messages
// with "x-api-key" and "anthropic-version: 2023-06-01"; max_tokens always
// sent (provider.max_tokens, default 4096); the system prompt top-level;
// content blocks text / tool_use / tool_result, consecutive tool results
// (and a user message after them) merged into ONE user message.
//
// Stream events: message_start (input and cache tokens), content_block_start
// / content_block_delta (text_delta, input_json_delta) / content_block_stop,
// message_delta (stop_reason, output tokens), message_stop (the terminator),
// ping, and an in-stream error: overloaded_error is recorded as HTTP 529 and
// api_error as 500 (transient), rate_limit_error as 429, others as 400.
// Usage: input counts uncached input tokens, cache_read / cache_write the
// cache's.
//
// Thread safety: as HttpProvider.
#pragma once

#include "actors/provider/http_provider.h"

namespace carapace {

class AnthropicProvider : public HttpProvider {
 public:
  using HttpProvider::HttpProvider;

  static constexpr uint64_t kDefaultMaxTokens = 4096;

  std::string name() const override { return "anthropic"; }
  std::string render_request(const ProviderRequest& request) const override;

 protected:
  std::string url() const override;
  std::vector<std::string> auth_headers() const override;
  std::unique_ptr<StreamDecoder> decoder(const std::string& request_body) const override;
};

}  // namespace carapace
