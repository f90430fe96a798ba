#include "actors/hook/hook_actor.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

namespace carapace {
namespace {

using Matches = std::vector<std::shared_ptr<const HookRegistry::Entry>>;

// Runs hooks on its own thread, answers, then quits.
HookActor::behavior_type hook_call(HookActor::pointer self, Matches matches, std::shared_ptr<FaultInjector> faults,
                                   std::shared_ptr<CallTracker> tracker) {
  return {[=](const HookInput& input) -> HookVerdict {
    HookVerdict verdict;
    {
      CallTracker::Running running(tracker.get());
      verdict = run_hooks(matches, input, faults.get());
    }
    self->quit();
    return verdict;
  }};
}

// What a hook that gave no answer in time stands for.
HookVerdict timed_out(const HookRegistry::Entry& hook, const HookInput& input) {
  const HookDefinition& d = hook.definition;
  std::string error = "hook " + d.name + " gave no answer within " + std::to_string(d.timeout_ms) +
                      " ms; it was abandoned";
  lib_log().warn("{} (session {}, {})", error, input.session_id, d.fail_closed ? "fail-closed: denied" : "skipped");
  HookVerdict v;
  v.failures.push_back(HookFailure{.hook_name = d.name, .error = error});
  if (auto deny = fail_closed_decision(d, input.event, error)) v.decisions.push_back(std::move(*deny));
  return v;
}

// Every matching hook at once, each on a thread of its own with its own
// time-out; the answers combine in registration order.
void run_concurrently(HookActor::pointer self, Matches matches, const HookInput& input,
                      caf::typed_response_promise<HookVerdict> promise, std::shared_ptr<FaultInjector> faults,
                      std::shared_ptr<CallTracker> tracker) {
  struct Gather {
    std::vector<HookVerdict> parts;
    size_t left = 0;
    caf::typed_response_promise<HookVerdict> promise;
  };
  auto gather = std::make_shared<Gather>();
  gather->promise = std::move(promise);
  gather->parts.resize(matches.size());
  gather->left = matches.size();
  auto done = [gather, event = input.event](size_t i, HookVerdict part) {
    gather->parts[i] = std::move(part);
    if (--gather->left > 0) return;
    std::vector<HookDecision> decisions;
    std::vector<HookFailure> failures;
    std::vector<FaultNote> fired;
    for (auto& p : gather->parts) {
      for (auto& d : p.decisions) decisions.push_back(std::move(d));
      for (auto& f : p.failures) failures.push_back(std::move(f));
      for (auto& f : p.faults) fired.push_back(std::move(f));
    }
    HookVerdict v = resolve_decisions(event, std::move(decisions));
    v.failures = std::move(failures);
    v.faults = std::move(fired);
    gather->promise.deliver(std::move(v));
  };
  for (size_t i = 0; i < matches.size(); ++i) {
    auto hook = matches[i];
    auto helper = self->spawn<caf::detached>(hook_call, Matches{hook}, faults, tracker);
    // A command kills its own child at its time-out; the margin lets it say so.
    const uint64_t margin = hook->definition.command.empty() ? 0 : 2000;
    self->request(helper, std::chrono::milliseconds(hook->definition.timeout_ms + margin), input)
        .then([=](HookVerdict answer) { done(i, std::move(answer)); },
              [=](caf::error&) { done(i, timed_out(*hook, input)); });
  }
}

HookActor::behavior_type hook_actor(HookActor::pointer self, std::shared_ptr<HookRegistry> hooks,
                                    std::shared_ptr<FaultInjector> faults, std::shared_ptr<CallTracker> tracker,
                                    bool inline_cpp_hooks) {
  return {[=](const HookInput& input) -> caf::result<HookVerdict> {
    Matches matches = hooks->matching(input.event, input.tool_name);
    if (matches.empty()) return run_hooks(matches, input, faults.get());
    bool any_command = std::any_of(matches.begin(), matches.end(),
                                   [](const auto& h) { return !h->definition.command.empty(); });
    if (inline_cpp_hooks && !any_command) return run_hooks(matches, input, faults.get());
    auto promise = self->make_response_promise<HookVerdict>();
    run_concurrently(self, std::move(matches), input, promise, faults, tracker);
    return promise;
  }};
}

}  // namespace

HookActor spawn_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                           std::shared_ptr<FaultInjector> faults, std::shared_ptr<CallTracker> tracker,
                           bool inline_cpp_hooks) {
  if (!tracker) tracker = std::make_shared<CallTracker>();
  return system.spawn(hook_actor, std::move(hooks), std::move(faults), std::move(tracker), inline_cpp_hooks);
}

}  // namespace carapace
