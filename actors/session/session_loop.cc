#include "actors/session/session_loop.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "actors/session/loop_events.h"
#include "actors/session/session_outcome.h"

namespace carapace {

void SessionLoop::init(Self self, std::shared_ptr<SessionContext> context) {
  self_ = self;
  ctx_ = std::move(context);
}

// ---- entry points ----------------------------------------------------------------

void SessionLoop::start() {
  if (running_ || broken_) return;
  const SessionState& s = state();
  if ((s.status == SessionStatus::kCompleted || s.status == SessionStatus::kFailed) && !s.turn_open) {
    settle();  // takes any message queued before the crash
    return;
  }
  running_ = true;
  if (settings().mutation == LoopMutation::kIgnoreRecordedStop) ignore_recorded_stop_ = s.stop_requested;
  if (s.turn_open) return continue_turn();
  if (s.turn == 0) {
    if (s.agent_start_decided) {
      if (stop_recorded()) return finish(true, "hook_stop", "");
      return begin_turn();
    }
    HookInput in{.event = HookEvent::kAgentStart, .session_id = ctx_->id, .text = first_user_text()};
    fire_hooks(in, [this, in](HookVerdict v) {
      if (!append(decided_events(in, v))) return;
      if (v.resolved == Decision::kStop) return finish(true, "hook_stop", "");
      begin_turn();
    });
    return;
  }
  begin_turn();
}

caf::result<InputAck> SessionLoop::user_input(std::string text) {
  if (broken_) {
    return InputAck{.error = "session " + ctx_->id + " stopped writing after: " + storage_error_ +
                             "; resume it to go on"};
  }
  if (text.empty()) return InputAck{.error = "the message is empty"};
  auto ack = self_->make_response_promise<InputAck>();
  if (running_) {
    // It joins the conversation when the next turn starts.
    write_durable({UserMessage{.text = std::move(text), .queued = true}}, /*checkpoint=*/false, nullptr, ack);
    return ack;
  }
  running_ = true;
  write_durable({UserMessage{.text = std::move(text)}}, /*checkpoint=*/true, [this] { begin_turn(); }, ack);
  return ack;
}

caf::result<SessionOutcome> SessionLoop::wait() {
  if (!running_) return outcome();
  auto promise = self_->make_response_promise<SessionOutcome>();
  waiters_.push_back(promise);
  return promise;
}

void SessionLoop::subscribe(SubscriberActor subscriber) { subscribers_.push_back(std::move(subscriber)); }

void SessionLoop::delta(const StreamDelta& d) {
  for (const auto& s : subscribers_) self_->send(s, d);
}

void SessionLoop::retry(uint64_t turn, uint32_t attempt) {
  if (running_ && !broken_ && state().turn == turn && state().turn_open) call_model(attempt);
}

void SessionLoop::durable(uint64_t token, bool ok, const std::string& error) {
  auto it = in_flight_.find(token);
  if (it == in_flight_.end()) return;
  DurableWrite w = std::move(it->second);
  in_flight_.erase(it);
  if (!ok) {
    if (w.ack) w.ack->deliver(InputAck{.error = error});
    if (w.on_fail) w.on_fail(error);
    return fail_hard(error);
  }
  publish(w.events);
  publish(w.held);
  if (w.ack) w.ack->deliver(InputAck{.ok = true});
  if (w.then && !broken_) w.then();
}

caf::result<ApprovalReply> SessionLoop::decide(ApprovalAnswer answer) {
  if (broken_) {
    return ApprovalReply{.code = "storage", .error = "session " + ctx_->id + " stopped writing after: " +
                                                         storage_error_ + "; resume it to go on"};
  }
  const PendingApproval* p = find_approval(state(), answer.call_id);
  if (p == nullptr) {
    std::string waiting;
    for (const auto& a : state().approvals) {
      if (!a.decided) waiting += (waiting.empty() ? "" : ", ") + a.request.call_id;
    }
    return ApprovalReply{.code = "not_found",
                         .error = "session " + ctx_->id + " has no approval request for call '" + answer.call_id +
                                  "'" + (waiting.empty() ? "; nothing waits" : "; waiting: " + waiting)};
  }
  const ApprovalRequested& r = p->request;
  if (p->decided) {
    const ApprovalDecided& d = p->decision;
    return ApprovalReply{.code = "already_decided",
                         .error = "call " + r.call_id + " of session " + ctx_->id + " was already " + d.decision +
                                  " by " + d.by + (d.who.empty() ? "" : " (" + d.who + ")") +
                                  (d.expired ? " when it expired" : "") + " at seq " +
                                  std::to_string(p->decided_seq) + (d.reason.empty() ? "" : ": " + d.reason) +
                                  "; the first decision stands",
                         .decided = d};
  }
  if (!answer.args_digest.empty() && answer.args_digest != r.args_digest.hex()) {
    return ApprovalReply{.code = "mismatch",
                         .error = "the answer is for arguments with digest " + answer.args_digest + ", but call " +
                                  r.call_id + " waits with arguments " + r.args_digest.hex() +
                                  " (`carapace approvals " + ctx_->id + "` shows them); nothing was recorded"};
  }
  const bool question = r.kind == "question";
  using K = ApprovalAnswer::Kind;
  if (question && answer.kind == K::kApprove) {
    return ApprovalReply{.code = "invalid",
                         .error = "call " + r.call_id + " is a question (ask_user): answer it with text "
                                  "(`carapace answer " + ctx_->id + " " + r.call_id + " TEXT`), or deny it"};
  }
  if (!question && answer.kind == K::kAnswer) {
    return ApprovalReply{.code = "invalid",
                         .error = "call " + r.call_id + " asks for approval of " + r.tool +
                                  ", not for an answer: approve or deny it"};
  }
  if (answer.kind == K::kAnswer && answer.text.empty()) {
    return ApprovalReply{.code = "invalid", .error = "the answer is empty"};
  }
  ApprovalDecided d{.call_id = r.call_id,
                    .decision = answer.kind == K::kApprove  ? "approved"
                                : answer.kind == K::kAnswer ? "answered"
                                                            : "denied",
                    .args_digest = r.args_digest,
                    .reason = std::move(answer.reason),
                    .answer = std::move(answer.text),
                    .by = std::move(answer.by),
                    .who = std::move(answer.who),
                    .expired = answer.expiry};
  auto promise = self_->make_response_promise<ApprovalReply>();
  ApprovalReply ok{.ok = true, .decided = d};
  write_durable(
      {std::move(d)}, /*checkpoint=*/false,
      [this, promise, ok]() mutable {
        promise.deliver(ok);
        // Parked: the loop goes on from the decision. Running (the request
        // itself is still being made durable): it finds the decision there.
        if (!running_) {
          running_ = true;
          continue_turn();
        }
      },
      std::nullopt,
      [promise](const std::string& error) mutable {
        promise.deliver(ApprovalReply{.code = "storage", .error = "the decision may not be durable: " + error});
      });
  return promise;
}

// ---- writing ---------------------------------------------------------------------

void SessionLoop::inject_actor_fault(const std::vector<EventBody>& step) {
  if (!ctx_->faults || step.empty()) return;
  Fault f = check_fault(ctx_->faults.get(), FaultSite{.point = FaultPoint::kSessionActor,
                                                      .session = ctx_->id,
                                                      .event_type = std::string(wire_name(event_type_number(step.front()))),
                                                      .turn = state().turn});
  if (f.action == FaultAction::kError)
    throw std::runtime_error("injected fault at session.actor: " + f.describe());
}

bool SessionLoop::append(std::vector<EventBody> step) {
  if (step.empty()) return true;
  inject_actor_fault(step);
  std::vector<Event> before;  // written only if the step is refused
  Status s = journal().stage_append(std::move(step), &before);
  if (!s.ok()) {
    written(std::move(before), held_behind());
    fail_hard(s.to_string());
    return false;
  }
  return true;
}

bool SessionLoop::flush_appends() {
  if (broken_ || !journal().has_staged()) return !broken_;
  std::vector<Event> events;
  Status s = journal().flush(&events);
  if (!s.ok()) {
    fail_hard(s.to_string());
    return false;
  }
  written(std::move(events), held_behind());
  return true;
}

std::vector<Event>* SessionLoop::held_behind() {
  return in_flight_.empty() ? nullptr : &in_flight_.rbegin()->second.held;
}

void SessionLoop::written(std::vector<Event> events, std::vector<Event>* hold) {
  if (events.empty()) return;
  tell_written(events);
  if (hold == nullptr) {
    publish(events);
  } else {
    hold->insert(hold->end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  }
}

void SessionLoop::write_durable(std::vector<EventBody> step, bool checkpoint, std::function<void()> then,
                                std::optional<caf::typed_response_promise<InputAck>> ack,
                                std::function<void(const std::string&)> on_fail) {
  inject_actor_fault(step);
  // The steps appended since the last write go in the same batch, ahead of
  // it; they are told and published as buffered ones are, once written.
  std::vector<Event>* hold = held_behind();
  uint64_t token = ++next_token_;
  DurableWrite& w = in_flight_[token];
  w.then = std::move(then);
  w.ack = std::move(ack);
  w.on_fail = std::move(on_fail);
  SessionActor handle = caf::actor_cast<SessionActor>(self_);
  auto done = [handle, token](Status s) {
    caf::anon_send(handle, durable_atom::value, token, s.ok(), s.ok() ? std::string() : s.to_string());
  };
  std::vector<Event> earlier;
  if (checkpoint) {
    journal().commit_async(std::move(step), std::move(done), &w.events, &earlier);
  } else {
    journal().append_durable_async(std::move(step), std::move(done), &w.events, &earlier);
  }
  written(std::move(earlier), hold);
  tell_written(w.events);
}

void SessionLoop::checkpoint_and_go_on(std::vector<EventBody> step, std::function<void()> then) {
  // Completions come in token order: the newest earlier write is the last to complete.
  const std::optional<uint64_t> earlier =
      in_flight_.empty() ? std::nullopt : std::optional<uint64_t>(in_flight_.rbegin()->first);
  write_durable(std::move(step), /*checkpoint=*/true, nullptr);
  if (broken_) return;
  if (!earlier) return then();
  DurableWrite& w = in_flight_.at(*earlier);
  w.then = [this, before = std::move(w.then), then = std::move(then)] {
    if (before) before();
    if (!broken_) then();
  };
}

void SessionLoop::tell_written(const std::vector<Event>& events) {
  if (ctx_->on_written) {
    for (const auto& e : events) ctx_->on_written(ctx_->id, e);
  }
}

void SessionLoop::publish(const std::vector<Event>& events) {
  if (ctx_->on_durable) {
    for (const auto& e : events) ctx_->on_durable(ctx_->id, e);
  }
  if (subscribers_.empty()) return;
  for (const auto& e : events) {
    for (const auto& s : subscribers_) self_->send(s, EventNotice{ctx_->id, e});
  }
}

// ---- hooks -------------------------------------------------------------------------

void SessionLoop::fire_hooks(HookInput in, std::function<void(HookVerdict)> then) {
  if (ctx_->hooks->matching(in.event, in.tool_name).empty()) {
    then(resolve_decisions(in.event, {}));
    return;
  }
  HookEvent event = in.event;
  // A hook is told of the session's steps: they are written first.
  if (!flush_appends()) return;
  self_->request(ctx_->hook_host, caf::infinite, std::move(in))
      .then(
          [this, then](HookVerdict v) {
            then(std::move(v));
            flush_appends();
          },
          [this, then, event](caf::error& e) {
            lib_log().warn("session {}: {} hooks did not answer ({}); going on without them", ctx_->id,
                           hook_event_name(event), caf::to_string(e));
            then(resolve_decisions(event, {}));
            flush_appends();
          });
}

// ---- the end of a turn and of a run ---------------------------------------------------

void SessionLoop::end_turn(bool final_answer) {
  HookInput in{
      .event = HookEvent::kTurnEnd, .session_id = ctx_->id, .turn = state().turn, .text = assistant_text_};
  fire_hooks(in, [this, in, final_answer](HookVerdict v) {
    std::vector<EventBody> step = decided_events(in, v);
    bool stop = v.resolved == Decision::kStop || stop_recorded();
    // A hook that adds context or a system message to a final answer asks the agent to go on.
    bool go_on = v.resolved == Decision::kSystemMessage || v.resolved == Decision::kAppendContext;
    if (stop) return finish(true, "hook_stop", assistant_text_, std::move(step));
    if (final_answer && !go_on) return finish(true, "final_answer", assistant_text_, std::move(step));
    checkpoint_and_go_on(std::move(step), [this] { begin_turn(); });
  });
}

void SessionLoop::finish(bool completed, std::string reason, std::string text, std::vector<EventBody> pending) {
  HookInput in{.event = HookEvent::kAgentStop, .session_id = ctx_->id, .turn = state().turn, .text = text};
  fire_hooks(in, [this, in, completed, reason, text, pending = std::move(pending)](HookVerdict v) mutable {
    std::vector<EventBody> step = std::move(pending);
    for (auto& e : decided_events(in, v)) step.push_back(std::move(e));
    if (completed) {
      step.emplace_back(SessionCompleted{.final_answer = text, .stop_reason = reason});
    } else {
      step.emplace_back(SessionFailed{.error = text, .stop_reason = reason});
    }
    write_durable(std::move(step), /*checkpoint=*/true, [this] { settle(); });
  });
}

uint64_t SessionLoop::turn_budget() {
  return state().max_turns != 0 ? state().max_turns : settings().max_turns;
}

void SessionLoop::stop_at_budget() {
  HookInput in{.event = HookEvent::kAgentStop, .session_id = ctx_->id, .turn = state().turn};
  fire_hooks(in, [this, in](HookVerdict v) {
    std::vector<EventBody> step = decided_events(in, v);
    step.emplace_back(SessionStopped{.reason = "max_turns"});
    // Its last event, as a stop from outside writes it (no checkpoint after).
    write_durable(std::move(step), /*checkpoint=*/false, [this] { settle(); });
  });
}

void SessionLoop::settle() {
  flush_appends();
  running_ = false;
  // Messages that came while the run went on start the next one; then the
  // follow-ups, one run each, in order.
  // A parked session's turn stays open until its decision: what was sent
  // meanwhile waits for the turn after it.
  const bool budget = !broken_ && state().committed_turn < turn_budget() && waiting_approval(state()) == nullptr;
  const bool queued = budget && !state().queued_inputs.empty();
  const bool follow_up = budget && !queued && !state().follow_ups.empty();
  SessionOutcome o = outcome();
  o.continues = queued || follow_up;
  for (auto& w : waiters_) w.deliver(o);
  waiters_.clear();
  if (queued) {
    running_ = true;
    begin_turn();
    return;
  }
  if (follow_up) {
    running_ = true;
    write_durable({UserMessage{.text = state().follow_ups.front(), .from_follow_ups = true}},
                  /*checkpoint=*/true, [this] { begin_turn(); });
    return;
  }
  if (ctx_->on_settled) {
    ctx_->on_settled(o);
    // Behind anything already in the mailbox: a message sent meanwhile wins.
    self_->send(caf::actor_cast<SessionActor>(self_), close_atom::value);
  }
}

void SessionLoop::close() {
  flush_appends();
  if (running_ || !in_flight_.empty() || !waiters_.empty()) return;
  // The subscribers first handle everything sent to them (so that whoever
  // learns the session closed has seen every event), then quit with it.
  auto pending = std::make_shared<size_t>(subscribers_.size() + 1);
  auto one_done = [this, pending] {
    if (--*pending > 0) return;
    if (running_ || !in_flight_.empty() || !waiters_.empty()) return;  // a message came meanwhile
    for (const auto& s : subscribers_) self_->send(s, close_atom::value);
    subscribers_.clear();
    self_->quit();
  };
  for (const auto& s : subscribers_) {
    self_->request(s, caf::infinite, flush_atom::value)
        .then([one_done](bool) { one_done(); }, [one_done](caf::error&) { one_done(); });
  }
  one_done();
}

void SessionLoop::fail_hard(const std::string& error) {
  lib_log().error("session {}: {}; the session stops writing (resume it to go on)", ctx_->id, error);
  broken_ = true;
  running_ = false;
  storage_error_ = error;
  for (auto& [token, w] : in_flight_) {
    if (w.ack) w.ack->deliver(InputAck{.error = "the message may not be durable: " + error});
    if (w.on_fail) w.on_fail(error);
  }
  in_flight_.clear();
  SessionOutcome o = outcome();
  for (auto& w : waiters_) w.deliver(o);
  waiters_.clear();
}

SessionOutcome SessionLoop::outcome() {
  SessionOutcome o = outcome_of(ctx_->id, state(), turn_budget());
  if (broken_) {
    o.status = SessionStatus::kFailed;
    o.error = storage_error_;
    o.stop_reason = "storage_error";
  }
  return o;
}

const Message* SessionLoop::last_assistant() {
  const auto& messages = state().messages;
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->role == Role::kAssistant) return &*it;
  }
  return nullptr;
}

std::string SessionLoop::last_assistant_text() {
  const Message* m = last_assistant();
  return m ? m->text : "";
}

std::string SessionLoop::first_user_text() {
  for (const auto& m : state().messages) {
    if (m.role == Role::kUser) return m.text;
  }
  return "";
}

}  // namespace carapace
