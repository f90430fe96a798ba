#include "actors/hook/replay_hook_actor.h"

namespace carapace {

std::string no_recorded_decision(const std::string& hook_name) {
  return "hook " + hook_name + " has no recorded decision; a replay runs no command";
}

HookVerdict replay_hooks(const HookRegistry& hooks, const ReplayTape& tape, const HookInput& input) {
  std::vector<HookDecision> decisions;
  std::vector<HookFailure> failures;
  std::vector<FaultNote> faults;
  for (const auto& h : hooks.matching(input.event, input.tool_name)) {
    const std::string& name = h->definition.name;
    if (!h->definition.command.empty()) {
      // A command is never run by a replay: what it decided is read from
      // the recording, and a decision the recording lacks is a divergence.
      if (auto record = tape.hook_record(input.event, name, input.tool_call_id)) {
        faults.insert(faults.end(), record->faults.begin(), record->faults.end());
        if (record->decision) {
          decisions.push_back(std::move(*record->decision));
        } else {
          failures.push_back(std::move(*record->failure));
        }
      } else {
        failures.push_back(HookFailure{.hook_name = name, .error = no_recorded_decision(name)});
      }
      continue;
    }
    HookDecision d;
    Status s = run_hook(*h, input, &d);
    if (s.ok()) {
      decisions.push_back(std::move(d));
    } else {
      failures.push_back(HookFailure{.hook_name = name, .error = s.message()});
    }
  }
  HookVerdict v = resolve_decisions(input.event, std::move(decisions));
  v.failures = std::move(failures);
  v.faults = std::move(faults);
  return v;
}

namespace {

HookActor::behavior_type replay_hook_actor(HookActor::pointer, std::shared_ptr<HookRegistry> hooks,
                                           std::shared_ptr<const ReplayTape> tape) {
  return {[=](const HookInput& input) { return replay_hooks(*hooks, *tape, input); }};
}

}  // namespace

HookActor spawn_replay_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                                  std::shared_ptr<const ReplayTape> tape) {
  return system.spawn(replay_hook_actor, std::move(hooks), std::move(tape));
}

}  // namespace carapace
