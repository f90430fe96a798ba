// The tool step of a turn: each tool call the model asked for, in order,
// between PreToolUse and PostToolUse(Failure) hooks.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

#include "actors/session/loop_events.h"
#include "actors/session/session_loop.h"
#include "actors/tool/ask_user_tool.h"
#include "base/bounded_json.h"

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
  // Asked before (a resume, or the decision just arrived): its hooks decided
  // then; the person's decision, or the wait for it, is what follows.
  if (const PendingApproval* a = find_approval(state(), calls_[call_index_].id)) {
    return after_approval(*a, pending_call(calls_[call_index_].id)->call);
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
    const bool modified = std::any_of(v.decisions.begin(), v.decisions.end(),
                                      [](const HookDecision& d) { return d.decision == Decision::kModifyArgs; });
    if (modified) call.args = v.modified_args;
    auto tool = ctx_->tools->find(call.name);
    if (!tool) {
      std::string names;
      for (const auto& n : ctx_->tools->names()) names += (names.empty() ? "" : ", ") + n;
      return refuse_call(std::move(step), call, "There is no tool named " + call.name + ". The tools are: " + names);
    }
    // A person decides first: a hook asked, the policy matches, or the model asks a question.
    std::optional<ApprovalRequested> ask;
    if (call.name == kAskUserTool) {
      ask = question_request(call);
      if (!ask) return refuse_call(std::move(step), call,
                                   "ask_user needs {\"question\": \"...\"}: a non-empty question for the user");
    } else if (v.resolved == Decision::kAsk) {
      std::string asked_by;
      for (const auto& d : v.decisions) {
        if (d.decision == Decision::kAsk) asked_by = d.hook_name;
        if (!asked_by.empty()) break;
      }
      ask = approval_request(call, v.reason, asked_by);
    } else if (std::string why = policy_reason(settings().approvals, call.name, tool->spec.idempotent);
               !why.empty()) {
      ask = approval_request(call, std::move(why), "approvals policy");
    }
    if (ask) {
      // Durable before anyone is told: the request survives a crash or a
      // power loss, and a resume parks on it again without asking the hooks.
      step.emplace_back(std::move(*ask));
      return write_durable(std::move(step), /*checkpoint=*/false, [this] { next_tool(); });
    }
    request_and_run(std::move(step), std::move(call), tool->spec.idempotent);
  });
}

void SessionLoop::request_and_run(std::vector<EventBody> step, ToolCall call, bool idempotent) {
  // Where it runs is decided, and recorded with the intent, before it is sent.
  std::string node;
  if (ctx_->nodes) {
    if (Status s = ctx_->nodes->pick(call.name, call.id, "", &node); !s.ok()) {
      return refuse_call(std::move(step), call, "The call was not run: " + s.message());
    }
  }
  step.emplace_back(ToolRequested{.call_id = call.id, .tool = call.name, .args = call.args, .node = node});
  // The intent of a call with side effects is durable before the call
  // starts: after a crash or a power loss, the log says it may have run.
  if (!idempotent && settings().mutation != LoopMutation::kBufferedToolIntent) {
    return write_durable(std::move(step), /*checkpoint=*/false,
                         [this, call, node] { run_tool(call, "", "", node); });
  }
  if (!append(std::move(step))) return;
  run_tool(std::move(call), "", "", std::move(node));
}

ApprovalRequested SessionLoop::approval_request(const ToolCall& call, std::string reason, std::string asked_by) {
  const auto& policy = settings().approvals;
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const uint64_t after = policy.expires_after_ms;
  return ApprovalRequested{.call_id = call.id,
                           .tool = call.name,
                           .args = call.args,
                           .args_digest = args_digest(call.args),
                           .reason = std::move(reason),
                           .asked_by = std::move(asked_by),
                           .kind = "approval",
                           .requested_at_us = now,
                           .expires_after_ms = after,
                           .expires_at_us = after ? now + static_cast<int64_t>(after) * 1000 : 0,
                           .on_expiry = after ? policy.on_expiry : ""};
}

std::optional<ApprovalRequested> SessionLoop::question_request(const ToolCall& call) {
  nlohmann::json args = parse_stored_json(call.args.text.empty() ? "{}" : call.args.text);
  if (!args.is_object() || !args.contains("question") || !args["question"].is_string() ||
      args["question"].get<std::string>().empty()) {
    return std::nullopt;
  }
  ApprovalRequested r = approval_request(call, "the model asks the user", "ask_user");
  r.kind = "question";
  r.question = args["question"].get<std::string>();
  if (r.expires_at_us != 0) r.on_expiry = "deny";  // an unanswered question has no answer to invent
  return r;
}

void SessionLoop::after_approval(PendingApproval a, ToolCall call) {
  if (!a.decided) return park(a);
  const ApprovalDecided& d = a.decision;
  auto tool = ctx_->tools->find(call.name);
  if (d.decision == "denied") {
    std::string why = a.request.kind == "question" ? "The user did not answer the question" : "The call was not approved";
    why += d.expired ? " before the request expired (its on_expiry denied it)" : " (denied by " + d.by + ")";
    if (!d.reason.empty()) why += ": " + d.reason;
    return refuse_call({}, call, std::move(why));
  }
  // Bound to the exact arguments: the fold decides a request only with a
  // decision naming its digest; this is the last look before it runs.
  if (args_digest(call.args) != d.args_digest) {
    return refuse_call({}, call,
                       "The call was not run: its approval was for other arguments (digest " + d.args_digest.hex() +
                           ", the call's are " + args_digest(call.args).hex() + ")");
  }
  if (d.decision == "answered") {
    if (!append({ToolRequested{call.id, call.name, call.args}})) return;
    return tool_done(call, ToolOutcome{.call_id = call.id, .output = d.answer});
  }
  if (!tool) {
    return refuse_call({}, call, "The call was approved, but there is no tool named " + call.name + " any more");
  }
  request_and_run({}, call, tool->spec.idempotent);
}

void SessionLoop::park(PendingApproval a) {
  // The run ends here: no thread, no timer. decide() (an answer, or the
  // runtime's expiry) records the decision and starts the loop again.
  if (!flush_appends()) return;
  if (ctx_->on_parked) ctx_->on_parked(ctx_->id, a);
  settle();
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
  const PendingToolCall* pending = pending_call(call.id);
  const std::string sent_to = pending ? pending->node : "";
  const uint32_t attempt = pending ? std::max<uint32_t>(pending->attempt, 1) : 1;
  if (tool && tool->spec.idempotent) {
    std::string node;
    if (ctx_->nodes) {
      if (Status s = ctx_->nodes->pick(call.name, call.id, "", &node); !s.ok()) {
        return tool_done(call, ToolOutcome{.call_id = call.id,
                                           .output = "The call was interrupted and could not run again: " + s.message(),
                                           .is_error = true});
      }
    }
    return run_tool(std::move(call), "", "", std::move(node), attempt);
  }
  const std::string stop_reason = journal().stop_reason_of_call(call.id);
  std::string why = stop_reason.empty() ? "the process running it stopped before its result was recorded"
                                        : "the session was stopped (" + stop_reason +
                                              ") while it ran, and what it started was killed";
  std::string unknown = "This call was interrupted: " + why +
                        ", so whether it took effect is unknown. Check before repeating it.";
  // Sent to a node: that node's ledger knows whether it ran, and its result;
  // without a route to it any more, nothing here can tell.
  if (!sent_to.empty()) {
    if (ctx_->nodes) return run_tool(std::move(call), std::move(unknown), stop_reason, sent_to, attempt);
    return tool_done(call,
                     ToolOutcome{.call_id = call.id, .output = std::move(unknown), .is_error = true,
                                 .interrupted = true, .node = sent_to},
                     stop_reason);
  }
  if (tool && tool->recover) return run_tool(std::move(call), std::move(unknown), stop_reason);
  tool_done(
      call,
      ToolOutcome{.call_id = call.id, .output = std::move(unknown), .is_error = true, .interrupted = true},
      stop_reason);
}

void SessionLoop::run_tool(ToolCall call, std::string recovering, std::string stop_reason, std::string node,
                           uint32_t attempt) {
  auto tool = ctx_->tools->find(call.name);
  const uint64_t timeout_ms =
      tool && tool->timeout.count() > 0 ? static_cast<uint64_t>(tool->timeout.count()) : settings().tool_timeout_ms;
  ToolInvocation invocation{.session_id = ctx_->id,
                            .call = call,
                            .workspace = settings().workspace,
                            .recovering = std::move(recovering),
                            .timeout_ms = timeout_ms,
                            .node = std::move(node),
                            .attempt = attempt};
  // The tool host answers a call that overruns (after its grace), and the
  // router a call whose node it loses or that overruns its deadline; this
  // is the backstop should neither answer. A node's deadline has a margin
  // for the trip: the backstop has one more.
  const uint64_t margin = invocation.node.empty() ? 5000 : 10'000;
  const auto backstop = std::chrono::milliseconds(timeout_ms + kToolGraceMs + margin);
  // Written before the call leaves: the log holds its tool.requested first.
  if (!flush_appends()) return;
  self_->request(ctx_->tool_host, backstop, std::move(invocation))
      .then(
          [this, call, stop_reason, attempt](ToolOutcome outcome) {
            if (outcome.node_lost) {
              node_lost(call, std::move(outcome), attempt, stop_reason);
            } else {
              const bool interrupted = outcome.interrupted;
              tool_done(call, std::move(outcome), interrupted ? stop_reason : "");
            }
            flush_appends();
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
            flush_appends();
          });
}

// At most this many attempts of one call on nodes (each after a loss).
constexpr uint32_t kMaxNodeAttempts = 3;

void SessionLoop::node_lost(const ToolCall& call, ToolOutcome lost, uint32_t attempt, std::string stop_reason) {
  if (!running_ || broken_) return;
  auto tool = ctx_->tools->find(call.name);
  if (tool && tool->spec.idempotent) {
    // Safe to run again: elsewhere, recorded as the next attempt.
    std::string next;
    Status s = attempt >= kMaxNodeAttempts
                   ? Status::aborted("it was tried on " + std::to_string(attempt) + " nodes")
                   : (ctx_->nodes ? ctx_->nodes->pick(call.name, call.id, lost.node, &next) : Status());
    if (s.ok()) {
      ToolRequested again{.call_id = call.id,
                          .tool = call.name,
                          .args = call.args,
                          .node = next,
                          .attempt = attempt + 1,
                          .retry_reason = lost.output};
      if (!append({std::move(again)})) return;
      return run_tool(call, "", "", std::move(next), attempt + 1);
    }
    return tool_done(call, ToolOutcome{.call_id = call.id,
                                       .output = "The call did not complete: " + lost.output +
                                                 "; it was not run again: " + s.message(),
                                       .is_error = true,
                                       .node = lost.node});
  }
  // It may have taken effect there: never run again blindly.
  tool_done(call,
            ToolOutcome{.call_id = call.id,
                        .output = "This call was interrupted: " + lost.output +
                                  ", so whether it took effect is unknown. Check before repeating it.",
                        .is_error = true,
                        .interrupted = true,
                        .node = lost.node},
            std::move(stop_reason));
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
                     .stop_reason = std::move(stop_reason),
                     .node = o.node};
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
