// OpenAiProvider: OpenAI's Chat Completions API and the servers that speak
// it (vLLM, llama.cpp server, Ollama, LiteLLM): POST {base_url}/chat/completions
// with "Authorization: Bearer <key>", streamed (stream_options.include_usage)
// or whole. Messages map to system / user / assistant (text, tool_calls) /
// tool (tool_call_id); tools to {"type":"function","function":{...}}.
//
// Streamed tool calls are accumulated by index (id and name from their first
// fragment, arguments concatenated over any number). Compatible servers'
// quirks are absorbed: a tool call without an id gets generated_call_id()
// (recorded in llm.responded like any model output), a missing usage chunk
// leaves usage at zero, and a missing finish_reason or "stop" with tool calls
// becomes "tool_calls". Usage: input counts uncached prompt tokens,
// cache_read the cached ones (prompt_tokens_details.cached_tokens).
//
// Thread safety: as HttpProvider.
#pragma once

#include "actors/provider/http_provider.h"

namespace carapace {

class OpenAiProvider : public HttpProvider {
 public:
  using HttpProvider::HttpProvider;

  std::string name() const override { return "openai"; }
  std::string render_request(const ProviderRequest& request) const override;

 protected:
  std::string url() const override;
  std::vector<std::string> auth_headers() const override;
  std::unique_ptr<StreamDecoder> decoder(const std::string& request_body) const override;
};

}  // namespace carapace
