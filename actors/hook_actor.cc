#include "actors/hook_actor.h"

namespace carapace {
namespace {

using Matches = std::vector<std::shared_ptr<const HookRegistry::Entry>>;

// Runs one input's hooks on its own thread, then quits.
HookActor::behavior_type hook_call(HookActor::pointer self, Matches matches) {
  return {[=](const HookInput& input) -> HookVerdict {
    HookVerdict verdict = run_hooks(matches, input);
    self->quit();
    return verdict;
  }};
}

HookActor::behavior_type hook_actor(HookActor::pointer self, std::shared_ptr<HookRegistry> hooks) {
  return {[=](const HookInput& input) -> caf::result<HookVerdict> {
    Matches matches = hooks->matching(input.event, input.tool_name);
    bool any_command = std::any_of(matches.begin(), matches.end(),
                                   [](const auto& h) { return !h->definition.command.empty(); });
    if (!any_command) return run_hooks(matches, input);
    auto helper = self->spawn<caf::detached>(hook_call, std::move(matches));
    return self->delegate(helper, input);
  }};
}

}  // namespace

HookActor spawn_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks) {
  return system.spawn(hook_actor, std::move(hooks));
}

}  // namespace carapace
