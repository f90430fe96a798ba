// HookRegistry: the hooks registered in a runtime, and running them
// (actors/hook/hooks.h has what a hook is and how decisions combine).
// Apart from hooks.h so that the embedding API does not see how matchers
// are compiled.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/hook/hooks.h"
#include "base/fault_injection.h"
#include "base/pattern.h"
#include "base/status.h"

namespace carapace {

// The hooks registered in a runtime. Thread-safe; hooks can be added and
// removed while sessions run (the next firing sees the change).
class HookRegistry {
 public:
  struct Entry {
    HookDefinition definition;
    Pattern matcher;  // RE2, searched for in the tool name
  };

  // invalid_argument naming the hook if it has no name, a bad matcher, or
  // neither or both of a function and a command.
  Status add(HookDefinition hook);
  bool remove(const std::string& name);

  // The hooks for `event` (and, for tool events, matching `tool_name`), in
  // registration order.
  std::vector<std::shared_ptr<const Entry>> matching(HookEvent event, const std::string& tool_name) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const Entry>> hooks_;
};

// Runs one hook on `input`: a C++ function in this thread, a command as a
// child process (blocking: call it off the actor scheduler). On failure
// returns an error naming the hook and the reason.
Status run_hook(const HookRegistry::Entry& hook, const HookInput& input, HookDecision* out);

// The deny a fail_closed PreToolUse hook stands for when it failed with
// `error`; nothing for any other hook.
std::optional<HookDecision> fail_closed_decision(const HookDefinition& hook, HookEvent event,
                                                 const std::string& error);

// Runs every hook in `hooks` and resolves; failures are logged and skipped
// (a fail_closed PreToolUse hook's failure denies).
// `faults` (may be null) is asked at the hook point before each hook.
HookVerdict run_hooks(const std::vector<std::shared_ptr<const HookRegistry::Entry>>& hooks,
                      const HookInput& input, FaultInjector* faults = nullptr);

}  // namespace carapace
