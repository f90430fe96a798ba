// The model step of a turn: turn.started and TurnStart hooks, the prompt,
// the provider call through the retry policy, and the model's answer.
#include <spdlog/spdlog.h>

#include "actors/session/context_trim.h"
#include "actors/session/loop_events.h"
#include "actors/session/session_loop.h"
#include "events/wire.h"

namespace carapace {
namespace {

// Gives every tool call an id distinct within its response: a missing or
// repeated id becomes call_<turn>_<n>, with the first n no earlier call has.
void make_call_ids_distinct(std::vector<ToolCall>& calls, uint64_t turn) {
  auto taken = [&calls](size_t before, const std::string& id) {
    for (size_t j = 0; j < before; ++j) {
      if (calls[j].id == id) return true;
    }
    return false;
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!calls[i].id.empty() && !taken(i, calls[i].id)) continue;
    for (size_t n = i + 1;; ++n) {
      std::string id = "call_" + std::to_string(turn) + "_" + std::to_string(n);
      if (!taken(i, id)) {
        calls[i].id = std::move(id);
        break;
      }
    }
  }
}

// A request's identity: the prompt's digest and the conversation's.
Digest128 request_digest(const Digest128& prompt, const Digest128& messages) {
  std::string bytes;
  wire::put_fixed64_be(bytes, prompt.hi);
  wire::put_fixed64_be(bytes, prompt.lo);
  wire::put_fixed64_be(bytes, messages.hi);
  wire::put_fixed64_be(bytes, messages.lo);
  return digest128(bytes);
}

}  // namespace

// Goes on with a turn that a crash interrupted (the session was resumed in
// step mode): what is recorded is not done again, and what the crash-free
// run would have done next is done.
void SessionLoop::continue_turn() {
  const SessionState& s = state();
  if (!s.turn_responded) {
    if (stop_recorded())  // a TurnStart hook said stop
      return finish(true, "hook_stop", last_assistant_text());
    if (!s.turn_prompted) {
      if (!s.turn_start_decided) return turn_start_hooks(s.turn);
      return prepare_request();
    }
    if (s.turn_gave_up) return give_up();
    if (!reassemble_prompt()) return;
    // The request whose answer the crash lost, or the retry it interrupted:
    // a lost request does not count against the retry budget.
    uint32_t next = s.turn_failures + 1;
    if (s.turn_retry_delay_ms > 0) {
      if (!flush_appends()) return;
      self_->delayed_send(self_, std::chrono::milliseconds(s.turn_retry_delay_ms), retry_atom::value, s.turn,
                          next);
      return;
    }
    return call_model(next);
  }
  // The model's answer is recorded: its tool calls, and where they stopped.
  const Message* answer = last_assistant();
  assistant_text_ = answer ? answer->text : "";
  calls_ = answer ? answer->tool_calls : std::vector<ToolCall>{};
  call_index_ = 0;
  if (!s.turn_last_call.id.empty() && !s.turn_last_call_hooked) {
    // The last call's result is recorded and its PostToolUse hooks are not.
    const Message& result = s.messages.back();
    bool is_error = result.role == Role::kTool && result.is_error;
    return post_tool_hooks(s.turn_last_call, result.role == Role::kTool ? result.text : "", is_error);
  }
  next_tool();
}

void SessionLoop::begin_turn() {
  if (state().committed_turn >= turn_budget()) return stop_at_budget();
  uint64_t turn = state().turn + 1;
  if (!append({TurnStarted{turn}})) return;
  ignore_recorded_stop_ = false;
  turn_start_hooks(turn);
}

void SessionLoop::turn_start_hooks(uint64_t turn) {
  HookInput in{.event = HookEvent::kTurnStart, .session_id = ctx_->id, .turn = turn};
  fire_hooks(in, [this, in](HookVerdict v) {
    if (!append(decided_events(in, v))) return;
    if (v.resolved == Decision::kStop) return finish(true, "hook_stop", last_assistant_text());
    prepare_request();
  });
}

void SessionLoop::prepare_request() {
  uint64_t turn = state().turn;
  std::vector<ToolSpec> specs = ctx_->tools->specs();
  AssembledPrompt prompt = assemble_prompt(PromptInputs{.config = &settings().prompt,
                                                        .tools = specs,
                                                        .session_instructions = settings().instructions,
                                                        .hook_messages = state().hook_system_messages});
  std::vector<EventBody> step;
  step.emplace_back(PromptAssembled{
      .turn = turn, .segments = prompt.segments, .digest = prompt.digest, .total_chars = prompt.text.size()});
  if (auto trim = plan_trim(state().messages, settings().context_max_chars, context_size_.of(state()))) {
    step.emplace_back(*trim);
  }
  if (!append(std::move(step))) return;
  system_prompt_ = std::move(prompt.text);
  tool_specs_ = std::move(specs);
  request_digest_ = request_digest(prompt.digest, state().messages_digest);
  call_model(state().turn_failures + 1);
}

bool SessionLoop::reassemble_prompt() {
  std::vector<ToolSpec> specs = ctx_->tools->specs();
  AssembledPrompt prompt = assemble_prompt(PromptInputs{.config = &settings().prompt,
                                                        .tools = specs,
                                                        .session_instructions = settings().instructions,
                                                        .hook_messages = state().turn_system_messages});
  if (prompt.digest != state().last_prompt_digest) {
    if (!append({PromptAssembled{.turn = state().turn,
                                 .segments = prompt.segments,
                                 .digest = prompt.digest,
                                 .total_chars = prompt.text.size()}})) {
      return false;
    }
  }
  system_prompt_ = std::move(prompt.text);
  tool_specs_ = std::move(specs);
  request_digest_ = request_digest(prompt.digest, state().messages_digest);
  return true;
}

// One attempt. The request is built anew each time (retries see the same
// prompt and messages: only llm.failed events come between attempts) and
// moved into the message, so the conversation is copied once per attempt,
// and not at all for a provider that does not read it (a replay's, the
// scripted one's).
void SessionLoop::call_model(uint32_t attempt) {
  uint64_t turn = state().turn;
  const std::string& model = state().model;
  const bool send_messages = ctx_->provider_reads_messages || ctx_->capture_request;
  ProviderRequest request{.session_id = ctx_->id,
                          .turn = turn,
                          .attempt = attempt,
                          // Answers recorded: a request lost to a crash, a
                          // timeout or an injected fault is asked again.
                          .attempt_index = state().provider_answers,
                          .model = model,
                          .system_prompt = system_prompt_,
                          .messages = send_messages ? state().messages : std::vector<Message>{},
                          .tools = tool_specs_,
                          .message_chars = context_size_.of(state())};
  // The request body as the provider will send it, durable before the
  // event that references it.
  std::string body_ref = ctx_->capture_request ? ctx_->capture_request(request) : std::string();
  if (!append({LlmRequested{.turn = turn,
                            .attempt = attempt,
                            .model = model,
                            .request_digest = request_digest_,
                            .body_ref = body_ref,
                            .message_count = state().messages.size()}})) {
    return;
  }
  // Written before the request leaves: the log holds the intent first.
  if (!flush_appends()) return;
  DeltaSinkActor sink = caf::actor_cast<DeltaSinkActor>(self_);
  self_
      ->request(ctx_->provider, std::chrono::milliseconds(settings().provider_timeout_ms), std::move(request),
                sink)
      .then(
          [this, turn, attempt](ProviderReply reply) {
            model_replied(turn, attempt, std::move(reply));
            flush_appends();
          },
          [this, turn, attempt](caf::error& e) {
            ProviderReply reply;
            reply.failure = ProviderFailure{.error = "no reply from the provider: " + caf::to_string(e),
                                            .transport = true};
            model_replied(turn, attempt, std::move(reply));
            flush_appends();
          });
}

void SessionLoop::model_replied(uint64_t turn, uint32_t attempt, ProviderReply reply) {
  if (!running_ || broken_ || state().turn != turn) return;
  if (!append(fault_events(reply.faults, turn))) return;
  if (!reply.ok) {
    const ProviderFailure& f = reply.failure;
    RetryDecision d = decide_retry(settings().retry, f, attempt, state().rng_seed, turn);
    LlmFailed failed{.turn = turn,
                     .attempt = attempt,
                     .http_status = f.http_status,
                     .error = f.error,
                     .category = d.category,
                     .will_retry = d.retry,
                     .retry_delay_ms = d.delay_ms,
                     .retry_after_ms = f.has_retry_after ? f.retry_after_ms : 0,
                     .latency_ms = reply.latency_ms,
                     .body_ref = reply.body_ref,
                     .provider_answered = reply.answered};
    if (!append({failed})) return;
    if (d.retry) {
      if (!flush_appends()) return;
      self_->delayed_send(self_, std::chrono::milliseconds(d.delay_ms), retry_atom::value, turn, attempt + 1);
      return;
    }
    return give_up();
  }
  ProviderResponse& r = reply.response;
  make_call_ids_distinct(r.tool_calls, turn);
  LlmResponded responded{.turn = turn,
                         .attempt = attempt,
                         .text = r.text,
                         .tool_calls = r.tool_calls,
                         .finish_reason = r.finish_reason,
                         .usage = r.usage,
                         .cost_usd = cost_usd(settings().prices, state().model, r.usage),
                         .latency_ms = reply.latency_ms,
                         .body_ref = reply.body_ref};
  if (!append({std::move(responded)})) return;
  assistant_text_ = std::move(r.text);
  calls_ = std::move(r.tool_calls);
  call_index_ = 0;
  if (calls_.empty()) return end_turn(true);
  next_tool();
}

// The last attempt failed for good (its llm.failed is recorded): the run ends
// with the failure; the session stays usable.
void SessionLoop::give_up() {
  const SessionState& s = state();
  std::string why = s.last_http_status ? "HTTP " + std::to_string(s.last_http_status) + ": " + s.last_error
                                       : s.last_error;
  if (s.last_failure_transient) why += " (gave up after " + std::to_string(s.turn_failures) + " attempts)";
  finish(false, "provider_error", why);
}

}  // namespace carapace
