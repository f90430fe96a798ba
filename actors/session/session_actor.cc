#include "actors/session/session_actor.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <functional>

#include "actors/session/context_trim.h"
#include "events/wire.h"

namespace carapace {
namespace {

using namespace std::chrono_literals;

// Records the faults a fault plan injected into a reply (a crash leaves none).
std::vector<EventBody> fault_events(const std::vector<FaultNote>& notes, uint64_t turn) {
  std::vector<EventBody> events;
  for (const auto& n : notes) {
    events.emplace_back(
        FaultInjected{.point = n.point, .action = n.action, .detail = n.detail, .turn = turn});
  }
  return events;
}

std::vector<EventBody> decided_events(const HookInput& in, const HookVerdict& verdict) {
  std::vector<EventBody> events = fault_events(verdict.faults, in.turn);
  for (const auto& d : verdict.decisions) {
    events.emplace_back(HookDecided{.hook_event = std::string(hook_event_name(in.event)),
                                    .hook_name = d.hook_name,
                                    .decision = std::string(decision_name(d.decision)),
                                    .reason = d.reason,
                                    .modified_args = d.modified_args,
                                    .tool_call_id = in.tool_call_id,
                                    .message = d.message});
  }
  return events;
}

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

class SessionLoop {
 public:
  using Self = SessionActor::stateful_pointer<SessionLoop>;

  SessionLoop() = default;

  void init(Self self, std::shared_ptr<SessionContext> context) {
    self_ = self;
    ctx_ = std::move(context);
  }

  // ---- entry points --------------------------------------------------------

  void start() {
    if (running_ || broken_) return;
    if (state().status == SessionStatus::kCompleted || state().status == SessionStatus::kFailed) {
      settle();
      return;
    }
    running_ = true;
    if (state().turn_open) return continue_turn();
    if (state().turn == 0) {
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

  void user_input(std::string text) {
    if (broken_) return;
    if (running_) {
      inputs_.push_back(std::move(text));
      return;
    }
    running_ = true;
    commit({UserMessage{std::move(text)}}, [this] { begin_turn(); });
  }

  caf::result<SessionOutcome> wait() {
    if (!running_) return outcome();
    auto promise = self_->make_response_promise<SessionOutcome>();
    waiters_.push_back(promise);
    return promise;
  }

  void subscribe(SubscriberActor subscriber) { subscribers_.push_back(std::move(subscriber)); }

  void delta(const StreamDelta& d) {
    for (const auto& s : subscribers_) self_->send(s, d);
  }

  void retry(uint64_t turn, uint32_t attempt) {
    if (running_ && !broken_ && state().turn == turn && state().turn_open) call_model(attempt);
  }

  void committed(uint64_t token, bool ok, const std::string& error) {
    if (token != commit_token_) return;
    if (!ok) return fail_hard(error);
    publish(committing_);
    committing_.clear();
    auto then = std::move(after_commit_);
    after_commit_ = nullptr;
    if (then) then();
  }

 private:
  SessionJournal& journal() { return *ctx_->journal; }
  const SessionState& state() { return ctx_->journal->state(); }
  const SessionSettings& settings() const { return ctx_->settings; }

  std::string first_user_text() {
    for (const auto& m : state().messages) {
      if (m.role == Role::kUser) return m.text;
    }
    return "";
  }

  // ---- writing ---------------------------------------------------------------

  bool append(std::vector<EventBody> step) {
    if (step.empty()) return true;
    std::vector<Event> written;
    Status s = journal().append(std::move(step), &written);
    if (!s.ok()) {
      fail_hard(s.to_string());
      return false;
    }
    publish(written);
    return true;
  }

  void commit(std::vector<EventBody> step, std::function<void()> then) {
    uint64_t token = ++commit_token_;
    after_commit_ = std::move(then);
    SessionActor handle = caf::actor_cast<SessionActor>(self_);
    journal().commit_async(
        std::move(step),
        [handle, token](Status s) {
          caf::anon_send(handle, committed_atom::value, token, s.ok(), s.to_string());
        },
        &committing_);
  }

  void publish(const std::vector<Event>& events) {
    if (subscribers_.empty()) return;
    for (const auto& e : events) {
      for (const auto& s : subscribers_) self_->send(s, EventNotice{ctx_->id, e});
    }
  }

  // ---- hooks -------------------------------------------------------------------

  void fire_hooks(HookInput in, std::function<void(HookVerdict)> then) {
    if (ctx_->hooks->matching(in.event, in.tool_name).empty()) {
      then(resolve_decisions(in.event, {}));
      return;
    }
    HookEvent event = in.event;
    self_->request(ctx_->hook_host, caf::infinite, std::move(in))
        .then([then](HookVerdict v) { then(std::move(v)); },
              [this, then, event](caf::error& e) {
                spdlog::warn("session {}: {} hooks did not answer ({}); going on without them", ctx_->id,
                             hook_event_name(event), caf::to_string(e));
                then(resolve_decisions(event, {}));
              });
  }

  // ---- the turn ------------------------------------------------------------------

  // Goes on with a turn that a crash interrupted (the session was resumed in
  // step mode): completed steps are not done again.
  void continue_turn() {
    const SessionState& s = state();
    if (!s.turn_responded) return prepare_request();
    // The model's answer is recorded: its tool calls, and where they stopped.
    const Message* answer = last_assistant();
    assistant_text_ = answer ? answer->text : "";
    calls_ = answer ? answer->tool_calls : std::vector<ToolCall>{};
    call_index_ = 0;
    if (s.pending.empty()) return end_turn(calls_.empty());
    next_tool();
  }

  const PendingToolCall* pending_call(const std::string& id) {
    for (const auto& p : state().pending) {
      if (p.call.id == id) return &p;
    }
    return nullptr;
  }

  void begin_turn() {
    if (state().committed_turn >= settings().max_turns)
      return finish(true, "max_turns", last_assistant_text());
    uint64_t turn = state().turn + 1;
    if (!append({TurnStarted{turn}})) return;
    HookInput in{.event = HookEvent::kTurnStart, .session_id = ctx_->id, .turn = turn};
    fire_hooks(in, [this, in](HookVerdict v) {
      if (!append(decided_events(in, v))) return;
      if (v.resolved == Decision::kStop) return finish(true, "hook_stop", last_assistant_text());
      prepare_request();
    });
  }

  void prepare_request() {
    uint64_t turn = state().turn;
    std::vector<ToolSpec> specs = ctx_->tools->specs();
    AssembledPrompt prompt = assemble_prompt(PromptInputs{.config = &settings().prompt,
                                                          .tools = specs,
                                                          .session_instructions = settings().instructions,
                                                          .hook_messages = state().hook_system_messages});
    std::vector<EventBody> step;
    step.emplace_back(PromptAssembled{.turn = turn,
                                      .segments = prompt.segments,
                                      .digest = prompt.digest,
                                      .total_chars = prompt.text.size()});
    if (auto trim = plan_trim(state().messages, settings().context_max_chars)) step.emplace_back(*trim);
    if (!append(std::move(step))) return;
    system_prompt_ = std::move(prompt.text);
    tool_specs_ = std::move(specs);
    request_digest_ = request_digest(prompt.digest, state().messages_digest);
    call_model(state().turn_attempts + 1);
  }

  // One attempt. The request is built anew each time (retries see the same
  // prompt and messages: only llm.failed events come between attempts) and
  // moved into the message, so the conversation is copied once per attempt.
  void call_model(uint32_t attempt) {
    uint64_t turn = state().turn;
    const std::string& model = state().model;
    if (!append({LlmRequested{.turn = turn,
                              .attempt = attempt,
                              .model = model,
                              .request_digest = request_digest_,
                              .message_count = state().messages.size()}})) {
      return;
    }
    ProviderRequest request{.session_id = ctx_->id,
                            .turn = turn,
                            .attempt = attempt,
                            // Answers recorded: a request lost to a crash, a
                            // timeout or an injected fault is asked again.
                            .attempt_index = state().provider_answers,
                            .model = model,
                            .system_prompt = system_prompt_,
                            .messages = state().messages,
                            .tools = tool_specs_};
    DeltaSinkActor sink = caf::actor_cast<DeltaSinkActor>(self_);
    self_
        ->request(ctx_->provider, std::chrono::milliseconds(settings().provider_timeout_ms),
                  std::move(request), sink)
        .then([this, turn, attempt](ProviderReply reply) { model_replied(turn, attempt, std::move(reply)); },
              [this, turn, attempt](caf::error& e) {
                ProviderReply reply;
                reply.failure = ProviderFailure{.error = "no reply from the provider: " + caf::to_string(e),
                                                .transport = true};
                model_replied(turn, attempt, std::move(reply));
              });
  }

  void model_replied(uint64_t turn, uint32_t attempt, ProviderReply reply) {
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
                       .provider_answered = reply.answered};
      if (!append({failed})) return;
      if (d.retry) {
        self_->delayed_send(self_, std::chrono::milliseconds(d.delay_ms), retry_atom::value, turn,
                            attempt + 1);
        return;
      }
      std::string why = f.http_status ? "HTTP " + std::to_string(f.http_status) + ": " + f.error : f.error;
      if (d.category == ErrorCategory::kTransient)
        why += " (gave up after " + std::to_string(attempt) + " attempts)";
      return finish(false, "provider_error", why);
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
                           .latency_ms = reply.latency_ms};
    if (!append({std::move(responded)})) return;
    assistant_text_ = std::move(r.text);
    calls_ = std::move(r.tool_calls);
    call_index_ = 0;
    if (calls_.empty()) return end_turn(true);
    next_tool();
  }

  void next_tool() {
    // Calls with a recorded result (before a crash) are done.
    while (call_index_ < calls_.size() && pending_call(calls_[call_index_].id) == nullptr) ++call_index_;
    if (call_index_ == calls_.size()) return end_turn(false);
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
      if (v.resolved == Decision::kDeny)
        return refuse_call(std::move(step), call, "The call was denied: " + v.reason);
      if (v.resolved == Decision::kModifyArgs) call.args = v.modified_args;
      if (!ctx_->tools->find(call.name)) {
        std::string names;
        for (const auto& n : ctx_->tools->names()) names += (names.empty() ? "" : ", ") + n;
        return refuse_call(std::move(step), call,
                           "There is no tool named " + call.name + ". The tools are: " + names);
      }
      step.emplace_back(ToolRequested{call.id, call.name, call.args});
      if (!append(std::move(step))) return;
      run_tool(std::move(call));
    });
  }

  // Records `call` as failed without running it, after `step` (the hooks' decisions).
  void refuse_call(std::vector<EventBody> step, const ToolCall& call, std::string why) {
    step.emplace_back(
        ToolCompleted{.call_id = call.id, .tool = call.name, .output = std::move(why), .is_error = true});
    if (!append(std::move(step))) return;
    ++call_index_;
    next_tool();
  }

  // A call requested before a crash, with no result recorded: it may or may
  // not have taken effect. An idempotent tool runs again; for any other the
  // model is told the outcome is unknown (at most once for side effects).
  void resume_interrupted_call(ToolCall call) {
    auto tool = ctx_->tools->find(call.name);
    if (tool && tool->spec.idempotent) return run_tool(std::move(call));
    tool_done(call,
              ToolOutcome{
                  .call_id = call.id,
                  .output = "This call was interrupted: the process running it stopped before its result "
                            "was recorded, so whether it took effect is unknown. Check before repeating it.",
                  .is_error = true,
                  .interrupted = true});
  }

  void run_tool(ToolCall call) {
    ToolInvocation invocation{.session_id = ctx_->id, .call = call, .workspace = settings().workspace};
    self_
        ->request(ctx_->tool_host, std::chrono::milliseconds(settings().tool_timeout_ms),
                  std::move(invocation))
        .then([this, call](ToolOutcome outcome) { tool_done(call, std::move(outcome)); },
              [this, call](caf::error& e) {
                bool timeout = e == caf::sec::request_timeout;
                tool_done(call, ToolOutcome{
                                    .call_id = call.id,
                                    .output = timeout ? "The tool gave no result within " +
                                                            std::to_string(settings().tool_timeout_ms) + " ms"
                                                      : "The tool failed: " + caf::to_string(e),
                                    .is_error = true,
                                    .timed_out = timeout});
              });
  }

  void tool_done(const ToolCall& call, ToolOutcome o) {
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
                       .interrupted = o.interrupted};
    if (!append({std::move(done)})) return;
    HookInput in{.event = o.is_error ? HookEvent::kPostToolUseFailure : HookEvent::kPostToolUse,
                 .session_id = ctx_->id,
                 .turn = state().turn,
                 .tool_name = call.name,
                 .tool_call_id = call.id,
                 .args = call.args,
                 .result = std::move(o.output),
                 .is_error = o.is_error};
    fire_hooks(in, [this, in](HookVerdict v) {
      if (!append(decided_events(in, v))) return;  // a stop lands in the state (stop_requested)
      ++call_index_;
      next_tool();
    });
  }

  void end_turn(bool final_answer) {
    HookInput in{
        .event = HookEvent::kTurnEnd, .session_id = ctx_->id, .turn = state().turn, .text = assistant_text_};
    fire_hooks(in, [this, in, final_answer](HookVerdict v) {
      std::vector<EventBody> step = decided_events(in, v);
      bool stop = v.resolved == Decision::kStop || state().stop_requested;
      // A hook that adds context or a system message to a final answer asks the agent to go on.
      bool go_on = v.resolved == Decision::kSystemMessage || v.resolved == Decision::kAppendContext;
      if (stop) return finish(true, "hook_stop", assistant_text_, std::move(step));
      if (final_answer && !go_on) return finish(true, "final_answer", assistant_text_, std::move(step));
      commit(std::move(step), [this] { begin_turn(); });
    });
  }

  const Message* last_assistant() {
    const auto& messages = state().messages;
    for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
      if (it->role == Role::kAssistant) return &*it;
    }
    return nullptr;
  }

  std::string last_assistant_text() {
    const Message* m = last_assistant();
    return m ? m->text : "";
  }

  // Ends the loop: AgentStop hooks, then the closing event and a checkpoint.
  void finish(bool completed, std::string reason, std::string text, std::vector<EventBody> pending = {}) {
    stop_reason_ = reason;
    HookInput in{.event = HookEvent::kAgentStop, .session_id = ctx_->id, .turn = state().turn, .text = text};
    fire_hooks(in, [this, in, completed, reason, text, pending = std::move(pending)](HookVerdict v) mutable {
      std::vector<EventBody> step = std::move(pending);
      for (auto& e : decided_events(in, v)) step.push_back(std::move(e));
      if (completed) {
        step.emplace_back(SessionCompleted{.final_answer = text, .stop_reason = reason});
      } else {
        step.emplace_back(SessionFailed{.error = text, .stop_reason = reason});
      }
      commit(std::move(step), [this] { settle(); });
    });
  }

  // The loop stopped: answer the waiters, then take the next queued input.
  void settle() {
    running_ = false;
    SessionOutcome o = outcome();
    for (auto& w : waiters_) w.deliver(o);
    waiters_.clear();
    if (!inputs_.empty() && !broken_) {
      std::string next = std::move(inputs_.front());
      inputs_.pop_front();
      user_input(std::move(next));
    }
  }

  void fail_hard(const std::string& error) {
    spdlog::error("session {}: {}; the session stops writing (resume it to go on)", ctx_->id, error);
    broken_ = true;
    running_ = false;
    storage_error_ = error;
    SessionOutcome o = outcome();
    for (auto& w : waiters_) w.deliver(o);
    waiters_.clear();
  }

  SessionOutcome outcome() {
    const SessionState& s = state();
    SessionOutcome o{.session_id = ctx_->id,
                     .status = s.status,
                     .final_answer = s.final_answer,
                     .stop_reason = stop_reason_,
                     .error = s.status == SessionStatus::kFailed ? s.last_error : "",
                     .turns = s.committed_turn,
                     .tokens = s.tokens,
                     .cost_usd = s.cost_usd,
                     .last_seq = s.last_seq};
    if (broken_) {
      o.status = SessionStatus::kFailed;
      o.error = storage_error_;
      o.stop_reason = "storage_error";
    }
    return o;
  }

  Self self_ = nullptr;
  std::shared_ptr<SessionContext> ctx_;
  bool running_ = false;
  bool broken_ = false;
  std::string storage_error_;
  std::string stop_reason_;
  std::deque<std::string> inputs_;
  std::vector<caf::typed_response_promise<SessionOutcome>> waiters_;
  std::vector<SubscriberActor> subscribers_;

  std::string system_prompt_;  // this turn's, for its attempts
  std::vector<ToolSpec> tool_specs_;
  Digest128 request_digest_;
  std::string assistant_text_;
  std::vector<ToolCall> calls_;
  size_t call_index_ = 0;

  uint64_t commit_token_ = 0;
  std::function<void()> after_commit_;
  std::vector<Event> committing_;
};

SessionActor::behavior_type session_actor(SessionActor::stateful_pointer<SessionLoop> self,
                                          std::shared_ptr<SessionContext> context) {
  self->state.init(self, std::move(context));
  return {
      [=](start_atom) { self->state.start(); },
      [=](UserInput& input) { self->state.user_input(std::move(input.text)); },
      [=](wait_atom) -> caf::result<SessionOutcome> { return self->state.wait(); },
      [=](subscribe_atom, SubscriberActor& subscriber) { self->state.subscribe(std::move(subscriber)); },
      [=](const StreamDelta& delta) { self->state.delta(delta); },
      [=](retry_atom, uint64_t turn, uint32_t attempt) { self->state.retry(turn, attempt); },
      [=](committed_atom, uint64_t token, bool ok, const std::string& error) {
        self->state.committed(token, ok, error);
      },
  };
}

}  // namespace

SessionActor spawn_session(caf::actor_system& system, std::shared_ptr<SessionContext> context) {
  return system.spawn(session_actor, std::move(context));
}

}  // namespace carapace
