// StreamDecoder: assembles one model response in one wire format (OpenAI
// chat completions, Anthropic messages) from its SSE events — text, tool
// calls accumulated by index, finish reason, token usage, forwarding text and
// tool-call fragments as deltas as they arrive — or from a whole JSON body
// when streaming is off.
//
// Not thread-safe: one decoder per attempt.
#pragma once

#include <string>
#include <string_view>

#include "actors/messages.h"
#include "actors/provider/provider.h"
#include "actors/provider/sse_parser.h"

namespace carapace {

class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;

  // Takes one event. False (with *failure set) ends the attempt: an
  // in-stream error, or an event whose data is not valid JSON (the raw
  // event is quoted in the failure, never a crash).
  virtual bool on_event(const SseEvent& event, const DeltaSink& on_delta, ProviderFailure* failure) = 0;

  // Whether the stream's terminator ([DONE], message_stop) arrived.
  virtual bool complete() const = 0;

  // The tool calls begun so far (each index the stream named counts).
  virtual size_t tool_call_count() const = 0;

  // The terminator's name, for the failure when the stream ends without it.
  virtual std::string terminator() const = 0;

  // The assembled response (call once, after the stream ended).
  virtual ProviderResponse finish() = 0;

  // A whole (non-streamed) response body; false with *error if it is not one.
  virtual bool parse_whole(std::string_view body, ProviderResponse* out, std::string* error) = 0;
};

}  // namespace carapace
