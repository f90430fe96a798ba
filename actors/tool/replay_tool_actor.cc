#include "actors/tool/replay_tool_actor.h"

namespace carapace {
namespace {

ToolActor::behavior_type replay_tool_actor(ToolActor::pointer, std::shared_ptr<const ReplayTape> tape) {
  return {[=](const ToolInvocation& invocation) { return tape->tool_outcome(invocation.call, invocation.attempt); }};
}

}  // namespace

ToolActor spawn_replay_tool_actor(caf::actor_system& system, std::shared_ptr<const ReplayTape> tape) {
  return system.spawn(replay_tool_actor, std::move(tape));
}

}  // namespace carapace
