#include "base/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdlib>

namespace carapace {
namespace {

constexpr std::array<std::string_view, kFaultPointCount> kPoints = {"provider.before_request",
                                                                    "provider.after_response",
                                                                    "tool.before_exec",
                                                                    "tool.after_exec",
                                                                    "log.before_append",
                                                                    "log.after_append",
                                                                    "commit.before",
                                                                    "commit.after",
                                                                    "hook",
                                                                    "session.actor",
                                                                    "schedule.fired"};
constexpr std::array<std::string_view, 6> kActions = {"none",  "crash", "error",
                                                      "delay", "hang",  "malformed_stream"};

}  // namespace

std::string_view fault_point_name(FaultPoint point) { return kPoints[static_cast<size_t>(point)]; }

std::optional<FaultPoint> fault_point_from_name(std::string_view name) {
  for (size_t i = 0; i < kPoints.size(); ++i) {
    if (kPoints[i] == name) return static_cast<FaultPoint>(i);
  }
  return std::nullopt;
}

std::string_view fault_action_name(FaultAction action) { return kActions[static_cast<size_t>(action)]; }

std::optional<FaultAction> fault_action_from_name(std::string_view name) {
  for (size_t i = 1; i < kActions.size(); ++i) {
    if (kActions[i] == name) return static_cast<FaultAction>(i);
  }
  return std::nullopt;
}

std::string Fault::describe() const {
  if (!recorded.empty()) return recorded;
  std::string s(fault_action_name(action));
  if (action == FaultAction::kError) {
    if (http_status) s += " HTTP " + std::to_string(http_status);
    if (has_retry_after) s += ", Retry-After " + std::to_string(retry_after_ms) + " ms";
    if (!message.empty()) s += ": " + message;
  }
  if (action == FaultAction::kDelay) s += " " + std::to_string(delay_ms) + " ms";
  if (!rule.empty()) s += " (" + rule + ")";
  return s;
}

Fault check_fault(FaultInjector* injector, const FaultSite& site) {
  if (injector == nullptr) return Fault{};
  Fault f = injector->check(site);
  if (f.action == FaultAction::kCrash) crash_now();
  return f;
}

void crash_now() {
  ::kill(::getpid(), SIGKILL);
  std::_Exit(137);  // not reached
}

}  // namespace carapace
