// SessionLoop: the state and steps of one session actor's agent loop
// (actors/session/session_actor.h). Internal to actors/session/.
//
// A turn is a chain of asynchronous steps, each recorded before the next
// begins; the class is implemented in one file per step:
//   session_loop.cc  entry points, writing (buffered, durable, checkpoints),
//                    hooks, the end of a turn and of a run
//   model_step.cc    the start of a turn, the prompt, the provider call and
//                    its retries
//   tool_step.cc     the tool calls, each between PreToolUse and PostToolUse
//                    hooks
//
// Resuming (step mode) goes on from the folded state, which records how far
// the open turn got: whether its TurnStart hooks decided, whether its prompt
// was assembled, whether the model answered or the last attempt is waiting
// for a retry or gave up, which tool calls have results, whether the last
// call's PostToolUse hooks decided, and any stop decision. Each case does
// what the run without a crash would have done from there.
//
// Used only from the actor's own thread.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/session/context_trim.h"
#include "actors/session/session_actor.h"

namespace carapace {

class SessionLoop {
 public:
  using Self = SessionActor::stateful_pointer<SessionLoop>;

  SessionLoop() = default;
  void init(Self self, std::shared_ptr<SessionContext> context);

  // ---- entry points (session_loop.cc) ----
  void start();
  caf::result<InputAck> user_input(std::string text);
  caf::result<SessionOutcome> wait();
  void subscribe(SubscriberActor subscriber);
  void delta(const StreamDelta& d);
  void retry(uint64_t turn, uint32_t attempt);
  void durable(uint64_t token, bool ok, const std::string& error);
  // A decision for one of this turn's approval requests (docs/approvals.md):
  // recorded durably unless the request is unknown, already decided, bound
  // to other arguments, or of another kind; then the loop goes on if it
  // was parked.
  caf::result<ApprovalReply> decide(ApprovalAnswer answer);
  // Quits the actor if no run, write or waiter is pending (a message that
  // arrived since the run ended has started another); subscribers are told.
  void close();

  // Writes the steps appended since the last write (one batch, buffered),
  // then tells and publishes them; false if the journal broke. The loop
  // calls it before it sends a request or tells anyone anything, and the
  // actor after every message it handles, so no step waits in memory while
  // the session waits.
  bool flush_appends();

 private:
  SessionJournal& journal() { return *ctx_->journal; }
  const SessionState& state() { return ctx_->journal->state(); }
  const SessionSettings& settings() const { return ctx_->settings; }
  // A stop decision is recorded in this turn (and is not being ignored by
  // the kIgnoreRecordedStop mutation).
  bool stop_recorded() { return state().stop_requested && !ignore_recorded_stop_; }

  // ---- writing (session_loop.cc) ----
  // Asks the fault plan at session.actor before a step is written: an
  // injected error makes the actor fail (it throws), as a bug would.
  void inject_actor_fault(const std::vector<EventBody>& step);
  // Appends a step: applied to the state at once, written with the next
  // write (flush_appends(), or a durable write, which carries it); false if
  // the journal broke (the loop stops).
  bool append(std::vector<EventBody> step);
  // Tells and publishes `events`, just written ahead of any durable write
  // made from here on; held behind `hold` (an earlier durable write still in
  // flight) if given.
  void written(std::vector<Event> events, std::vector<Event>* hold);
  // Where events written now wait to be published: behind the newest durable
  // write in flight; null if none is.
  std::vector<Event>* held_behind();
  // Writes `step` durably, with a checkpoint or without, and runs `then` once
  // it is durable. `ack`, if given, is answered either way.
  // `on_fail`, if given, hears a write that did not become durable.
  void write_durable(std::vector<EventBody> step, bool checkpoint, std::function<void()> then,
                     std::optional<caf::typed_response_promise<InputAck>> ack = std::nullopt,
                     std::function<void(const std::string&)> on_fail = nullptr);
  // Checkpoints `step` (durably) and runs `then`, the next turn, as soon as
  // every *earlier* durable write is durable: at once if none is in flight.
  // So a turn's work overlaps the sync of the checkpoint before it, and the
  // session never runs more than one checkpoint ahead of what is durable.
  // What the next turn writes lands in the log behind the checkpoint (so a
  // power loss keeps a prefix), and its subscribers hear it only after.
  void checkpoint_and_go_on(std::vector<EventBody> step, std::function<void()> then);
  void publish(const std::vector<Event>& events);
  // Hands `events`, just staged or written, to ctx_->on_written.
  void tell_written(const std::vector<Event>& events);

  // ---- hooks (session_loop.cc) ----
  void fire_hooks(HookInput in, std::function<void(HookVerdict)> then);

  // ---- the model step (model_step.cc) ----
  void continue_turn();
  void begin_turn();
  void turn_start_hooks(uint64_t turn);
  void prepare_request();
  // Rebuilds the prompt of a turn whose prompt.assembled is recorded; records
  // a new one only if the prompt differs (the configuration changed).
  bool reassemble_prompt();
  void call_model(uint32_t attempt);
  void model_replied(uint64_t turn, uint32_t attempt, ProviderReply reply);
  void give_up();

  // ---- the tool step (tool_step.cc) ----
  void next_tool();
  void refuse_call(std::vector<EventBody> step, const ToolCall& call, std::string why);
  // tool.requested after `step` (durably first for a call with side effects), then the call.
  void request_and_run(std::vector<EventBody> step, ToolCall call, bool idempotent);
  ApprovalRequested approval_request(const ToolCall& call, std::string reason, std::string asked_by);
  // ask_user's request, or nullopt if its arguments hold no question.
  std::optional<ApprovalRequested> question_request(const ToolCall& call);
  // The call was asked about: park until decided, then run, refuse or answer it.
  void after_approval(PendingApproval a, ToolCall call);
  void park(PendingApproval a);
  void stop_remaining_calls();
  void resume_interrupted_call(ToolCall call);
  // `recovering`: a call a crash or a stop interrupted, for the tool's
  // recover function (the text to give when it cannot tell); `stop_reason`:
  // that stop's, for the result if it stays unknown.
  // `node`: the tools node the call was recorded as sent to ("": this
  // process), `attempt` its attempt there (docs/scale-out.md).
  void run_tool(ToolCall call, std::string recovering = "", std::string stop_reason = "", std::string node = "",
                uint32_t attempt = 1);
  // The node running `call` was lost: another attempt elsewhere for an
  // idempotent tool, else an unknown outcome, as after a crash.
  void node_lost(const ToolCall& call, ToolOutcome lost, uint32_t attempt, std::string stop_reason);
  // `stop_reason`: an interrupted call's, when a stop ended its run.
  void tool_done(const ToolCall& call, ToolOutcome outcome, std::string stop_reason = "");
  void post_tool_hooks(const ToolCall& call, std::string result, bool is_error);
  const PendingToolCall* pending_call(const std::string& id);

  // ---- the end (session_loop.cc) ----
  void end_turn(bool final_answer);
  void finish(bool completed, std::string reason, std::string text, std::vector<EventBody> pending = {});
  // The turn budget is used: the AgentStop hooks hear it, then
  // session.stopped "max_turns" (no final answer is invented; a resume with
  // a larger budget goes on).
  void stop_at_budget();
  // The session's turn budget: from its log (session.started, raised by a
  // session.resumed), else the settings'.
  uint64_t turn_budget();
  void settle();
  void fail_hard(const std::string& error);
  SessionOutcome outcome();
  const Message* last_assistant();
  std::string last_assistant_text();
  std::string first_user_text();

  Self self_ = nullptr;
  std::shared_ptr<SessionContext> ctx_;
  bool running_ = false;
  bool broken_ = false;
  bool ignore_recorded_stop_ = false;  // the kIgnoreRecordedStop mutation is at work
  std::string storage_error_;
  std::vector<caf::typed_response_promise<SessionOutcome>> waiters_;
  std::vector<SubscriberActor> subscribers_;

  // This turn's, for its attempts.
  std::string system_prompt_;
  std::vector<ToolSpec> tool_specs_;
  Digest128 request_digest_;
  ContextSize context_size_;  // the conversation's size, counted as it grows
  // The model's answer being worked through.
  std::string assistant_text_;
  std::vector<ToolCall> calls_;
  size_t call_index_ = 0;

  // Durable writes in flight, by token (they complete in order). Events
  // appended after one are held back until it completes, so subscribers
  // hear every event in seq order.
  struct DurableWrite {
    std::vector<Event> events;
    std::vector<Event> held;  // buffered appends made while this one was in flight
    std::function<void()> then;
    std::optional<caf::typed_response_promise<InputAck>> ack;
    std::function<void(const std::string&)> on_fail;
  };
  uint64_t next_token_ = 0;
  std::map<uint64_t, DurableWrite> in_flight_;
};

}  // namespace carapace
