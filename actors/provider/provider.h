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
// Two forms: call() answers synchronously (the scripted provider, and any
// provider behind a blocking adapter); an asynchronous provider (HTTP) also
// implements start(), which returns at once and hands the reply to `done`
// later, from its own I/O thread, so that no actor thread waits on the
// network. A provider that speaks a wire format renders each request's body
// with render_request() (pure: the same request gives the same bytes), so the
// session can store it before it records llm.requested.
//
// Thread safety: call(), start(), cancel() and render_request() may run for
// several sessions at once.
#pragma once

#include <functional>
#include <string>

#include "actors/messages.h"

namespace carapace {

using DeltaSink = std::function<void(const StreamDelta&)>;
using ReplySink = std::function<void(ProviderReply)>;

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

  // Whether the replies of call() say themselves whether the provider
  // answered (ProviderReply::answered): a replay does, as the recording says
  // (an attempt an injected fault stopped was never answered). Otherwise
  // every reply call() returns counts as the provider's own.
  virtual bool reports_answered() const { return false; }

  // Whether the provider reads ProviderRequest::messages. One that does not
  // (it needs at most the conversation's size, ProviderRequest::message_chars)
  // gets its requests without a copy of the conversation, which a session
  // would otherwise make for every model call.
  virtual bool reads_messages() const { return true; }

  // Whether start() is implemented (then the provider actor uses it).
  virtual bool asynchronous() const { return false; }

  // Starts one attempt; `on_delta` and `done` (exactly once) run on the
  // provider's own thread. Returns an id for cancel().
  virtual uint64_t start(const ProviderRequest& request, DeltaSink on_delta, ReplySink done) {
    done(call(request, on_delta));
    return 0;
  }

  // Ends the attempt `id` at once (its `done` reports it cancelled); no-op if it is over.
  virtual void cancel(uint64_t id) { (void)id; }

  // The request body as it is sent, or "" for a provider with no wire format.
  virtual std::string render_request(const ProviderRequest& request) const {
    (void)request;
    return "";
  }
};

}  // namespace carapace
