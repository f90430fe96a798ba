// Provider: one LLM backend, as the agent loop sees it.
//
// The scripted provider (a scenario file), the replay provider (a recorded
// log) and the HTTP providers (OpenAI-compatible, Anthropic) implement it.
// A provider answers one attempt at a time with the whole response (text,
// tool calls, finish reason, token usage with cache reads and writes) or a
// failure (HTTP status, error, Retry-After), streaming pieces of the response
// to a sink as they arrive. Retrying is not its business: the session's
// retry policy decides from the failure.
//
// Thread safety: call() may run for several sessions at once.
#pragma once

#include <functional>
#include <string>

#include "actors/messages.h"

namespace carapace {

using DeltaSink = std::function<void(const StreamDelta&)>;

class Provider {
 public:
  virtual ~Provider() = default;

  virtual std::string name() const = 0;

  // Whether call() may block (network I/O). A blocking provider runs on a
  // thread of its own; a non-blocking one answers at once and sets
  // reply.latency_ms to how long its answer is held back (simulated latency,
  // delivered by a delayed message, so tests can run it in virtual time).
  virtual bool blocking() const = 0;

  virtual ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) = 0;
};

}  // namespace carapace
