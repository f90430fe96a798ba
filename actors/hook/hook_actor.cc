#include "actors/hook/hook_actor.h"

namespace carapace {
namespace {

using Matches = std::vector<std::shared_ptr<const HookRegistry::Entry>>;

// Runs one input's hooks on its own thread, then quits.
HookActor::behavior_type hook_call(HookActor::pointer self, Matches matches,
                                   std::shared_ptr<FaultInjector> faults) {
  return {[=](const HookInput& input) -> HookVerdict {
    HookVerdict verdict = run_hooks(matches, input, faults.get());
    self->quit();
    return verdict;
  }};
}

HookActor::behavior_type hook_actor(HookActor::pointer self, std::shared_ptr<HookRegistry> hooks,
                                    std::shared_ptr<FaultInjector> faults) {
  return {[=](const HookInput& input) -> caf::result<HookVerdict> {
    Matches matches = hooks->matching(input.event, input.tool_name);
    bool any_command = std::any_of(matches.begin(), matches.end(),
                                   [](const auto& h) { return !h->definition.command.empty(); });
    // C++ hooks run inline: they are quick (an injected delay or hang of one
    // sleeps here, which a fault plan accepts); commands need a thread.
    if (!any_command) return run_hooks(matches, input, faults.get());
    auto helper = self->spawn<caf::detached>(hook_call, std::move(matches), faults);
    return self->delegate(helper, input);
  }};
}

}  // namespace

HookActor spawn_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                           std::shared_ptr<FaultInjector> faults) {
  return system.spawn(hook_actor, std::move(hooks), std::move(faults));
}

}  // namespace carapace
