// StreamDecoder: assembles one streamed model response from its SSE events,
// in one wire format (OpenAI chat completions, Anthropic messages): text,
// tool calls accumulated by index, finish reason, token usage. Forwards
// text and tool-call fragments as deltas as they arrive.
//
// Not thread-safe: one decoder per attempt.
#pragma once

#include <string>

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

  // The terminator's name, for the failure when the stream ends without it.
  virtual std::string terminator() const = 0;

  // The assembled response (call once, after the stream ended).
  virtual ProviderResponse finish() = 0;
};

}  // namespace carapace
