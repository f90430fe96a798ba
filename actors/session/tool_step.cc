// The tool step of a turn: each tool call the model asked for, in order,
// between PreToolUse and PostToolUse(Failure) hooks.
#include "actors/session/loop_events.h"
#include "actors/session/session_loop.h"

namespace carapace {

const PendingToolCall* SessionLoop::pending_call(const std::string& id) {
  for (const auto& p : state().pending) {
    if (p.call.id == id) return &p;
  }
  return nullptr;
}

void SessionLoop::next_tool() {
  // Calls with a recorded result (before a crash) are done.
  while (call_index_ < calls_.size() && pending_call(calls_[call_index_].id) == nullptr) ++call_index_;
  if (call_index_ == calls_.size()) return end_turn(calls_.empty());
  // A PostToolUse hook said stop: the turn runs none of its remaining calls.
  if (stop_recorded()) return stop_remaining_calls();
  if (const PendingToolCall* p = pending_call(calls_[call_index_].id); p != nullptr && p->requested) {
    return resume_interrupted_call(p->call);
  }
  ToolCall call = calls_[call_index_];
  HookInput in{.event = HookEvent::kPreToolUse,
               .session_id = ctx_->id,
               .turn = state().turn,
               .tool_name = call.name,
               .tool_call_id = call.id,
               .args = call.args};
  fire_hooks(in, [this, in, call](HookVerdict v) mutable {
    std::vector<EventBody> step = decided_events(in, v);
    if (v.resolved == Decision::kDeny) return refuse_call(std::move(step), call, "The call was denied: " + v.reason);
    if (v.resolved == Decision::kModifyArgs) call.args = v.modified_args;
    auto tool = ctx_->tools->find(call.name);
    if (!tool) {
      std::string names;
      for (const auto& n : ctx_->tools->names()) names += (names.empty() ? "" : ", ") + n;
      return refuse_call(std::move(step), call, "There is no tool named " + call.name + ". The tools are: " + names);
    }
    step.emplace_back(ToolRequested{call.id, call.name, call.args});
    // The intent of a call with side effects is durable before the call
    // starts: after a crash or a power loss, the log says it may have run.
    if (!tool->spec.idempotent && settings().mutation != LoopMutation::kBufferedToolIntent) {
      return write_durable(std::move(step), /*checkpoint=*/false, [this, call] { run_tool(call); });
    }
    if (!append(std::move(step))) return;
    run_tool(std::move(call));
  });
}

// Records `call` as failed without running it, after `step` (the hooks' decisions).
void SessionLoop::refuse_call(std::vector<EventBody> step, const ToolCall& call, std::string why) {
  step.emplace_back(
      ToolCompleted{.call_id = call.id, .tool = call.name, .output = std::move(why), .is_error = true});
  if (!append(std::move(step))) return;
  ++call_index_;
  next_tool();
}

void SessionLoop::stop_remaining_calls() {
  std::vector<EventBody> step;
  for (size_t i = call_index_; i < calls_.size(); ++i) {
    if (pending_call(calls_[i].id) == nullptr) continue;
    step.emplace_back(ToolCompleted{.call_id = calls_[i].id,
                                    .tool = calls_[i].name,
                                    .output = "This call was not run: a hook stopped the turn.",
                                    .is_error = true});
  }
  if (!append(std::move(step))) return;
  call_index_ = calls_.size();
  end_turn(false);
}

// A call requested before a crash, with no result recorded: it may or may
// not have taken effect. An idempotent tool runs again; a tool that can
// check what became of it says (write_file: the file holds the bytes, or it
// is written again), and its answer is recorded; for any other the model is
// told the outcome is unknown (at most once for side effects).
void SessionLoop::resume_interrupted_call(ToolCall call) {
  auto tool = ctx_->tools->find(call.name);
  if (tool && tool->spec.idempotent) return run_tool(std::move(call));
  const std::string stop_reason = journal().stop_reason_of_call(call.id);
  std::string why = stop_reason.empty() ? "the process running it stopped before its result was recorded"
                                        : "the session was stopped (" + stop_reason +
                                              ") while it ran, and what it started was killed";
  std::string unknown = "This call was interrupted: " + why +
                        ", so whether it took effect is unknown. Check before repeating it.";
  if (tool && tool->recover) return run_tool(std::move(call), std::move(unknown), stop_reason);
  tool_done(
      call,
      ToolOutcome{.call_id = call.id, .output = std::move(unknown), .is_error = true, .interrupted = true},
      stop_reason);
}

void SessionLoop::run_tool(ToolCall call, std::string recovering, std::string stop_reason) {
  auto tool = ctx_->tools->find(call.name);
  const uint64_t timeout_ms =
      tool && tool->timeout.count() > 0 ? static_cast<uint64_t>(tool->timeout.count()) : settings().tool_timeout_ms;
  ToolInvocation invocation{.session_id = ctx_->id,
                            .call = call,
                            .workspace = settings().workspace,
                            .recovering = std::move(recovering),
                            .timeout_ms = timeout_ms};
  // The tool host answers a call that overruns (after its grace); this is
  // the backstop should the host itself not answer.
  const auto backstop = std::chrono::milliseconds(timeout_ms + kToolGraceMs + 5000);
  self_
      ->request(ctx_->tool_host, backstop, std::move(invocation))
      .then(
          [this, call, stop_reason](ToolOutcome outcome) {
            const bool interrupted = outcome.interrupted;
            tool_done(call, std::move(outcome), interrupted ? stop_reason : "");
          },
          [this, call, backstop](caf::error& e) {
            bool timeout = e == caf::sec::request_timeout;
            tool_done(call,
                      ToolOutcome{.call_id = call.id,
                                  .output = timeout ? "The tool host gave no answer within " +
                                                          std::to_string(backstop.count()) + " ms"
                                                    : "The tool failed: " + caf::to_string(e),
                                  .is_error = true,
                                  .timed_out = timeout});
          });
}

void SessionLoop::tool_done(const ToolCall& call, ToolOutcome o, std::string stop_reason) {
  if (!running_ || broken_) return;
  if (!append(fault_events(o.faults, state().turn))) return;
  ToolCompleted done{.call_id = call.id,
                     .tool = call.name,
                     .output = o.output,
                     .is_error = o.is_error,
                     .duration_ms = o.duration_ms,
                     .timed_out = o.timed_out,
                     .truncated = o.truncated,
                     .original_bytes = o.original_bytes ? o.original_bytes : o.output.size(),
                     .kept_bytes = o.output.size(),
                     .interrupted = o.interrupted,
                     .stop_reason = std::move(stop_reason)};
  if (!append({std::move(done)})) return;
  post_tool_hooks(call, std::move(o.output), o.is_error);
}

void SessionLoop::post_tool_hooks(const ToolCall& call, std::string result, bool is_error) {
  HookInput in{.event = is_error ? HookEvent::kPostToolUseFailure : HookEvent::kPostToolUse,
               .session_id = ctx_->id,
               .turn = state().turn,
               .tool_name = call.name,
               .tool_call_id = call.id,
               .args = call.args,
               .result = std::move(result),
               .is_error = is_error};
  fire_hooks(in, [this, in](HookVerdict v) {
    if (!append(decided_events(in, v))) return;  // a stop lands in the state (stop_requested)
    if (v.resolved == Decision::kStop) ignore_recorded_stop_ = false;
    ++call_index_;
    next_tool();
  });
}

}  // namespace carapace
