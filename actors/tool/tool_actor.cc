#include "actors/tool/tool_actor.h"

#include "base/lib_log.h"

#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <unordered_map>

#include "base/bounded_json.h"

namespace carapace {
namespace {

ToolOutcome error_outcome(const std::string& call_id, std::string message) {
  return ToolOutcome{.call_id = call_id, .output = std::move(message), .is_error = true};
}

// Answers with `outcome`, unless it is an injected hang: then never.
caf::typed_response_promise<ToolOutcome> answer(caf::typed_response_promise<ToolOutcome> promise,
                                                ToolOutcome outcome) {
  if (!outcome.hang) promise.deliver(std::move(outcome));
  return promise;
}

// Runs one blocking call on its own thread, then quits.
ToolActor::behavior_type tool_call(ToolActor::pointer self, std::shared_ptr<const ToolDefinition> tool,
                                   std::shared_ptr<FaultInjector> faults, std::shared_ptr<CallTracker> tracker) {
  return {[=](const ToolInvocation& invocation) -> caf::typed_response_promise<ToolOutcome> {
    auto promise = self->make_response_promise<ToolOutcome>();
    ToolOutcome outcome = run_tool(*tool, invocation, faults.get(), tracker.get());
    self->quit();
    return answer(promise, std::move(outcome));
  }};
}

ToolActor::behavior_type tool_worker(ToolActor::pointer self, std::shared_ptr<ToolRegistry> tools,
                                     std::string name, std::shared_ptr<FaultInjector> faults,
                                     std::shared_ptr<CallTracker> tracker) {
  return {[=](const ToolInvocation& invocation) -> caf::result<ToolOutcome> {
    auto tool = tools->find(name);
    if (!tool) {
      return error_outcome(invocation.call.id, "tool " + name + " is no longer registered");
    }
    if (!tool->blocking) {
      return answer(self->make_response_promise<ToolOutcome>(),
                    run_tool(*tool, invocation, faults.get(), tracker.get()));
    }
    auto helper = self->spawn<caf::detached>(tool_call, tool, faults, tracker);
    return self->delegate(helper, invocation);
  }};
}

struct ToolSupervisorState {
  ToolSupervisorState() = default;
  std::shared_ptr<ToolRegistry> tools;
  std::shared_ptr<FaultInjector> faults;
  std::shared_ptr<CallTracker> tracker;
  std::unordered_map<std::string, ToolActor> workers;  // by tool name
  // Every worker, shared with the functor that stops them when the supervisor
  // ends (workers are monitored, not linked, so nothing else would).
  std::shared_ptr<std::vector<ToolActor>> all = std::make_shared<std::vector<ToolActor>>();
  std::unordered_map<caf::actor_addr, std::string> names;  // worker -> tool
  uint64_t next_id = 0;
  struct InFlight {
    std::string worker_tool;
    std::string call_id;
    caf::typed_response_promise<ToolOutcome> promise;
    std::string session;
    uint64_t timeout_ms = 0;
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    bool blocking = true;
    ToolActor worker;
    bool expired = false;  // its time-out passed: its stop token is tripped
  };
  std::unordered_map<uint64_t, InFlight> in_flight;
  // When the ticks that expire calls are due, earliest first. A call does
  // not get a timer of its own: one would stay in the clock for the whole
  // time-out (15 minutes by default) after the call answered, thousands at
  // once in a busy runtime. A tick is set only for a deadline earlier than
  // every tick already set; when one fires, it expires what is due and sets
  // one for the earliest deadline left, if none is set before it.
  std::multiset<std::chrono::steady_clock::time_point> ticks;

  void finish(uint64_t id, ToolOutcome outcome) {
    auto it = in_flight.find(id);
    if (it == in_flight.end()) return;
    if (it->second.expired && !outcome.timed_out) {
      // It returned within the grace after its stop token was tripped.
      outcome.timed_out = true;
      outcome.is_error = true;
    }
    it->second.promise.deliver(std::move(outcome));
    tracker->remove(it->second.session, it->second.call_id);
    in_flight.erase(it);
  }
};

using ToolSupervisorPtr = ToolSupervisorActor::stateful_pointer<ToolSupervisorState>;

// An expire message is either a deadline tick (not final; its id is this)
// or the end of one call's grace (final, the call's id; ids start at 1).
constexpr uint64_t kDeadlineTick = 0;

// Sets a tick for `deadline` unless one is set for that time or sooner.
void tick_at(ToolSupervisorPtr self, std::chrono::steady_clock::time_point deadline) {
  auto& ticks = self->state.ticks;
  if (deadline == std::chrono::steady_clock::time_point::max()) return;
  if (!ticks.empty() && *ticks.begin() <= deadline) return;
  ticks.insert(deadline);
  const auto wait = std::max(deadline - self->clock().now(), std::chrono::steady_clock::duration::zero());
  self->delayed_send(self, std::chrono::ceil<std::chrono::milliseconds>(wait), expire_atom::value,
                     kDeadlineTick, false);
}

// First expiry of a call: its stop token is tripped, and what it returns
// within the grace is still recorded; past the grace it is abandoned.
void expire(ToolSupervisorPtr self, uint64_t id, ToolSupervisorState::InFlight& f) {
  f.expired = true;
  self->state.tracker->stop(f.session, f.call_id);
  self->delayed_send(self, std::chrono::milliseconds(kToolGraceMs), expire_atom::value, id, true);
}

// A tick fired (the earliest one set): expires every call whose deadline
// has passed, then sets a tick for the earliest deadline left.
void on_tick(ToolSupervisorPtr self) {
  auto& st = self->state;
  if (!st.ticks.empty()) st.ticks.erase(st.ticks.begin());
  const auto now = self->clock().now();
  auto next = std::chrono::steady_clock::time_point::max();
  for (auto& [id, f] : st.in_flight) {
    if (f.expired) continue;
    if (f.deadline <= now) {
      expire(self, id, f);
    } else {
      next = std::min(next, f.deadline);
    }
  }
  tick_at(self, next);
}

ToolActor worker_for(ToolSupervisorPtr self, const std::string& name) {
  auto it = self->state.workers.find(name);
  if (it != self->state.workers.end()) return it->second;
  ToolActor worker = self->spawn(tool_worker, self->state.tools, name, self->state.faults, self->state.tracker);
  self->monitor(worker);
  self->state.all->push_back(worker);
  self->state.workers.emplace(name, worker);
  self->state.names.emplace(worker.address(), name);
  return worker;
}

ToolSupervisorActor::behavior_type tool_supervisor(ToolSupervisorPtr self,
                                                   std::shared_ptr<ToolRegistry> tools,
                                                   std::shared_ptr<FaultInjector> faults,
                                                   std::shared_ptr<CallTracker> tracker) {
  self->state.tools = std::move(tools);
  self->state.faults = std::move(faults);
  self->state.tracker = std::move(tracker);
  self->attach_functor([all = self->state.all, tracker = self->state.tracker](const caf::error&) {
    tracker->stop_all();
    for (const auto& w : *all) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler([=](const caf::down_msg& down) {
    auto n = self->state.names.find(down.source);
    if (n == self->state.names.end()) return;
    std::string name = n->second;
    std::string why = caf::to_string(down.reason);
    self->state.names.erase(n);
    self->state.workers.erase(name);
    lib_log().warn("tool actor for {} stopped: {}; restarting it", name, why);
    std::vector<uint64_t> lost;
    for (const auto& [id, f] : self->state.in_flight) {
      if (f.worker_tool == name) lost.push_back(id);
    }
    for (uint64_t id : lost) {
      std::string call_id = self->state.in_flight[id].call_id;
      self->state.finish(id,
                         error_outcome(call_id, "the tool actor for " + name + " stopped (" + why +
                                                    ") before this call finished; it was restarted, and the "
                                                    "call's outcome is unknown"));
    }
    worker_for(self, name);
  });
  return {
      [=](ToolInvocation& invocation) -> caf::typed_response_promise<ToolOutcome> {
        auto promise = self->make_response_promise<ToolOutcome>();
        std::string name = invocation.call.name;
        auto def = self->state.tools->find(name);
        if (!def) {
          promise.deliver(error_outcome(invocation.call.id, "unknown tool " + name));
          return promise;
        }
        uint64_t id = ++self->state.next_id;
        ToolActor worker = worker_for(self, name);
        // On the actor system's clock (virtual time under a test scheduler);
        // the call's context shows the same deadline on the steady clock.
        const auto timeout = std::chrono::milliseconds(invocation.timeout_ms);
        const auto never = std::chrono::steady_clock::time_point::max();
        const auto deadline = invocation.timeout_ms > 0 ? self->clock().now() + timeout : never;
        self->state.in_flight.emplace(id, ToolSupervisorState::InFlight{.worker_tool = name,
                                                                        .call_id = invocation.call.id,
                                                                        .promise = promise,
                                                                        .session = invocation.session_id,
                                                                        .timeout_ms = invocation.timeout_ms,
                                                                        .deadline = deadline,
                                                                        .blocking = def->blocking,
                                                                        .worker = worker});
        self->state.tracker->add(
            invocation.session_id, invocation.call.id,
            invocation.timeout_ms > 0 ? std::chrono::steady_clock::now() + timeout : never);
        tick_at(self, deadline);
        std::string call_id = invocation.call.id;
        self->request(worker, caf::infinite, std::move(invocation))
            .then([=](ToolOutcome outcome) { self->state.finish(id, std::move(outcome)); },
                  [=](caf::error& e) {
                    self->state.finish(id, error_outcome(call_id, "the tool actor for " + name +
                                                                      " failed: " + caf::to_string(e)));
                  });
        return promise;
      },
      [=](worker_atom, const std::string& name) -> ToolActor { return worker_for(self, name); },
      [=](cancel_atom, const std::string& session) { self->state.tracker->stop_session(session); },
      [=](expire_atom, uint64_t id, bool final) {
        if (!final) return on_tick(self);
        auto it = self->state.in_flight.find(id);
        if (it == self->state.in_flight.end()) return;
        ToolSupervisorState::InFlight& f = it->second;
        std::string name = f.worker_tool;
        if (!f.blocking) {
          // It holds its worker: later calls of the tool get a new one.
          auto w = self->state.workers.find(name);
          if (w != self->state.workers.end() && w->second == f.worker) {
            self->demonitor(f.worker.address());
            self->state.names.erase(f.worker.address());
            self->state.workers.erase(w);
            caf::anon_send_exit(f.worker, caf::exit_reason::user_shutdown);
          }
        }
        lib_log().warn("tool {} (session {}, call {}) gave no result within {} ms nor {} ms after it was asked to "
                     "stop; it is abandoned",
                     name, f.session, f.call_id, f.timeout_ms, kToolGraceMs);
        ToolOutcome out = error_outcome(
            f.call_id, "The tool gave no result within " + std::to_string(f.timeout_ms) +
                           " ms, nor within " + std::to_string(kToolGraceMs) +
                           " ms after it was asked to stop; it was abandoned, and whether it took effect is unknown");
        out.timed_out = true;
        out.duration_ms = f.timeout_ms + kToolGraceMs;
        self->state.finish(id, std::move(out));
      },
  };
}

}  // namespace

std::string injected_tool_failure(const std::string& tool, const Fault& fault, bool after_running) {
  return "tool " + tool + (after_running ? " failed after running: " : " failed: ") +
         (fault.message.empty() ? "injected fault" : fault.message);
}

ToolOutcome run_tool(const ToolDefinition& tool, const ToolInvocation& invocation, FaultInjector* faults,
                     CallTracker* tracker) {
  auto start = std::chrono::steady_clock::now();
  ToolOutcome outcome{.call_id = invocation.call.id};
  FaultSite site{
      .point = FaultPoint::kToolBeforeExec, .session = invocation.session_id, .name = tool.spec.name};
  Fault before = check_fault(faults, site);
  if (before) {
    outcome.faults.push_back(fault_note(FaultPoint::kToolBeforeExec, before));
    if (before.action == FaultAction::kHang) {
      outcome.hang = true;
      return outcome;
    }
    if (before.action == FaultAction::kError) {
      outcome.output = injected_tool_failure(tool.spec.name, before, false);
      outcome.is_error = true;
      return outcome;
    }
    if (before.action == FaultAction::kDelay)
      std::this_thread::sleep_for(std::chrono::milliseconds(before.delay_ms));
  }
  const std::string& text = invocation.call.args.text.empty() ? "{}" : invocation.call.args.text;
  nlohmann::json args;
  if (json_depth_exceeds(text)) {
    outcome.output = "the arguments of " + tool.spec.name + " are JSON nested deeper than " +
                     std::to_string(limits::kJsonDepth) + " levels (the limit on JSON depth); it was not run";
    outcome.is_error = true;
  } else if (!parse_bounded_json(text, "", &args).ok() || !args.is_object()) {
    // Quoted in part: the whole text may be large, and it is in the log already.
    outcome.output = "the arguments of " + tool.spec.name + " are not a JSON object: " + text.substr(0, 2000);
    outcome.is_error = true;
  } else {
    try {
      ToolContext context{invocation.workspace, invocation.session_id, invocation.call.id};
      if (tracker != nullptr) {
        context.stop = tracker->token(invocation.session_id, invocation.call.id);
        context.deadline = tracker->deadline(invocation.session_id, invocation.call.id);
      }
      if (context.deadline == std::chrono::steady_clock::time_point::max() && invocation.timeout_ms > 0)
        context.deadline = start + std::chrono::milliseconds(invocation.timeout_ms);
      CallTracker::Running running(tracker);
      // A call a crash or a stop interrupted: the tool says what became of it.
      ToolRecovery recovery{.verdict = ToolRecovery::Verdict::kRunAgain};
      if (!invocation.recovering.empty())
        recovery = tool.recover ? tool.recover(args, context) : ToolRecovery{};
      if (recovery.verdict == ToolRecovery::Verdict::kUnknown) {
        outcome.output = invocation.recovering;
        outcome.is_error = true;
        outcome.interrupted = true;
      } else {
        ToolResult r = recovery.verdict == ToolRecovery::Verdict::kDone ? std::move(recovery.result)
                                                                        : tool.run(args, context);
        outcome.output = std::move(r.output);
        outcome.is_error = r.is_error;
        outcome.timed_out = r.timed_out;
        outcome.truncated = r.truncated;
        outcome.original_bytes = r.original_bytes;
      }
    } catch (const std::exception& e) {
      outcome.output = "tool " + tool.spec.name + " failed: " + e.what();
      outcome.is_error = true;
    } catch (...) {
      outcome.output = "tool " + tool.spec.name + " failed with a non-standard exception";
      outcome.is_error = true;
    }
  }
  site.point = FaultPoint::kToolAfterExec;
  Fault after = check_fault(faults, site);  // a crash here: the tool ran, its result is lost
  if (after) {
    outcome.faults.push_back(fault_note(FaultPoint::kToolAfterExec, after));
    if (after.action == FaultAction::kError) {
      outcome.output = injected_tool_failure(tool.spec.name, after, true);
      outcome.is_error = true;
    }
    if (after.action == FaultAction::kDelay)
      std::this_thread::sleep_for(std::chrono::milliseconds(after.delay_ms));
  }
  outcome.duration_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
          .count());
  return outcome;
}

ToolSupervisorActor spawn_tool_supervisor(caf::actor_system& system, std::shared_ptr<ToolRegistry> tools,
                                          std::shared_ptr<FaultInjector> faults, std::shared_ptr<CallTracker> tracker) {
  if (!tracker) tracker = std::make_shared<CallTracker>();
  return system.spawn(tool_supervisor, std::move(tools), std::move(faults), std::move(tracker));
}

}  // namespace carapace
