#include "actors/session/session_actor.h"

#include "actors/session/session_loop.h"

namespace carapace {

std::string_view loop_mutation_name(LoopMutation m) {
  switch (m) {
    case LoopMutation::kNone:
      return "none";
    case LoopMutation::kIgnoreRecordedStop:
      return "ignore_recorded_stop";
    case LoopMutation::kBufferedToolIntent:
      return "buffered_tool_intent";
  }
  return "none";
}

std::optional<LoopMutation> loop_mutation_from_name(std::string_view name) {
  for (auto m : {LoopMutation::kNone, LoopMutation::kIgnoreRecordedStop, LoopMutation::kBufferedToolIntent}) {
    if (loop_mutation_name(m) == name) return m;
  }
  return std::nullopt;
}

namespace {

SessionActor::behavior_type session_actor(SessionActor::stateful_pointer<SessionLoop> self,
                                          std::shared_ptr<SessionContext> context) {
  self->state.init(self, std::move(context));
  // A failure escaping a handler ends the actor with an error (the runtime's
  // keeper then recovers the session from its log); say what it was.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& failure) -> caf::error {
    std::string what = "an unknown exception";
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    return caf::make_error(caf::sec::runtime_error, what);
  });
  // Each handler ends with the steps it appended written (flush_appends()):
  // none waits in memory while the session waits for its next message.
  return {
      [=](start_atom) {
        self->state.start();
        self->state.flush_appends();
      },
      [=](UserInput& input) -> caf::result<InputAck> {
        auto r = self->state.user_input(std::move(input.text));
        self->state.flush_appends();
        return r;
      },
      [=](wait_atom) -> caf::result<SessionOutcome> { return self->state.wait(); },
      [=](ApprovalAnswer& answer) -> caf::result<ApprovalReply> {
        auto r = self->state.decide(std::move(answer));
        self->state.flush_appends();
        return r;
      },
      [=](subscribe_atom, SubscriberActor& subscriber) { self->state.subscribe(std::move(subscriber)); },
      [=](const StreamDelta& delta) { self->state.delta(delta); },
      [=](retry_atom, uint64_t turn, uint32_t attempt) {
        self->state.retry(turn, attempt);
        self->state.flush_appends();
      },
      [=](durable_atom, uint64_t token, bool ok, const std::string& error) {
        self->state.durable(token, ok, error);
        self->state.flush_appends();
      },
      [=](close_atom) { self->state.close(); },
  };
}

}  // namespace

SessionActor spawn_session(caf::actor_system& system, std::shared_ptr<SessionContext> context) {
  return system.spawn(session_actor, std::move(context));
}

}  // namespace carapace
