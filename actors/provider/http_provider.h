// HttpProvider: what the HTTP providers (openai, anthropic) share: one
// attempt is one POST through the runtime's HttpClient, its streamed body
// parsed by SseParser and assembled by the wire format's StreamDecoder (or a
// whole JSON body when streaming is off), its outcome classified into a
// ProviderReply: an HTTP status with the server's message and what to check
// (a 401 names the environment variable that holds the key, never the key),
// Retry-After / retry-after-ms / x-should-retry, transport failures
// (refused, reset, timeouts, a stream that ends without its terminator) as
// transient.
//
// Bounded (docs/config.md, "Limits"): a response longer than
// max_response_bytes, an SSE line or event longer than max_line_bytes, or a
// reply with more than max_tool_calls tool calls ends the attempt at once
// with a permanent failure naming the key (a server that sends that much is
// broken or hostile; asking again would cost as much again); an attempt
// still receiving after max_stream_ms ends with a transient one, as the
// other timeouts do. While an attempt runs it holds at most the body
// store's max_body_bytes of raw bytes once the stream has shown an event or
// a comment (a body that may be a whole, non-streamed one: up to
// max_response_bytes), the longest line, and what the decoder assembled.
//
// Verbatim capture: the response bytes exactly as received (raw SSE, or the
// error body) are stored durably in the BodyStore (by its writer thread,
// which batches the syncs) before the reply is handed on, and the reply
// carries their body_ref; past the store's max_body_bytes they are stored
// cut, with their whole size. The API key goes into a request header
// only; it is never in a body, a reply, an error or a log line (a server
// that echoes it has it replaced by "[redacted]").
//
// Thread safety: start(), cancel(), call() and render_request() may be
// called from any thread at once; per-attempt state lives in the attempt.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/provider/http_client.h"
#include "actors/provider/prompt_cache.h"
#include "actors/provider/provider.h"
#include "actors/provider/stream_decoder.h"

namespace carapace {

class BodyStore;

struct HttpProviderOptions {
  std::string base_url;
  std::string api_key;      // may be empty (a local server); never logged
  std::string api_key_env;  // named in messages about the key
  uint64_t max_tokens = 0;  // 0: the wire format's default
  bool has_temperature = false;
  double temperature = 0;
  bool stream = true;
  uint64_t connect_timeout_ms = 10'000;
  uint64_t first_byte_timeout_ms = 120'000;
  uint64_t idle_timeout_ms = 60'000;
  uint64_t max_stream_ms = 300'000;           // the whole attempt
  uint64_t max_line_bytes = 16ull << 20;      // one SSE line, or one event's data
  uint64_t max_response_bytes = 64ull << 20;  // the whole response, streamed or not
  uint64_t max_tool_calls = 256;              // in one reply
  std::vector<std::string> extra_headers;  // "Name: value"
  PromptCache cache;                       // checked for this provider (prompt_cache.h)
};

class HttpProvider : public Provider {
 public:
  // `client` and `bodies` (null: no capture) are shared with other providers.
  HttpProvider(HttpProviderOptions options, std::shared_ptr<HttpClient> client, std::shared_ptr<BodyStore> bodies);

  bool blocking() const override { return true; }
  bool asynchronous() const override { return true; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override;
  uint64_t start(const ProviderRequest& request, DeltaSink on_delta, ReplySink done) override;
  void cancel(uint64_t id) override;

  const HttpProviderOptions& options() const { return shared_->options; }

 protected:
  virtual std::string url() const = 0;
  virtual std::vector<std::string> auth_headers() const = 0;
  // A decoder for one attempt; `request_body` seeds ids a server left out.
  virtual std::unique_ptr<StreamDecoder> decoder(const std::string& request_body) const = 0;

 private:
  // What an attempt's callbacks need, shared with them: they run on the
  // client's thread and may outlive this object.
  struct Shared {
    HttpProviderOptions options;
    std::shared_ptr<BodyStore> bodies;
  };
  std::shared_ptr<const Shared> shared_;
  std::shared_ptr<HttpClient> client_;
};

// Helpers the wire formats share.

// A tool-call id for a server that sent none: from the request body's digest
// and the call's index, so the same request gives the same id.
std::string generated_call_id(const std::string& request_body, size_t index);

// The server's error message from a JSON error body ({"error":{"message"}}, or
// {"error":"..."}, or {"message"}), else the body itself, cut to 500 bytes.
std::string error_text(std::string_view body);

// Whether `url`'s host is a loopback address (a local server needs no key).
bool is_loopback_url(std::string_view url);

}  // namespace carapace
