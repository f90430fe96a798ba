// Fault injection: named points where a fault plan (replay/fault_plan.h) or a
// test makes Carapace fail on purpose, to prove that sessions survive.
//
//   provider.before_request   provider.after_response
//   tool.before_exec          tool.after_exec
//   log.before_append         log.after_append
//   commit.before             commit.after
//   hook                      session.actor
//   schedule.fired
//
// At each point the code asks its FaultInjector what to do, and does it:
// crash (the process dies at once, as SIGKILL would: no destructors, no
// flush), error (an HTTP status with an optional Retry-After, a tool error, a
// storage I/O error, a hook failure), delay, hang (no answer: the caller's
// timeout decides), or malformed_stream (providers). Which actions a point
// supports is in docs/fault-plans.md. Injectors are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace carapace {

enum class FaultPoint : uint8_t {
  kProviderBeforeRequest = 0,
  kProviderAfterResponse,
  kToolBeforeExec,
  kToolAfterExec,
  kLogBeforeAppend,
  kLogAfterAppend,
  kCommitBefore,
  kCommitAfter,
  kHook,
  kSessionActor,  // before each step the session actor writes; error: the actor fails
  kScheduleFired,  // carapace serve: a schedule's fire is durable, its session not yet started
};
constexpr int kFaultPointCount = 11;
std::string_view fault_point_name(FaultPoint point);
std::optional<FaultPoint> fault_point_from_name(std::string_view name);

enum class FaultAction : uint8_t { kNone = 0, kCrash, kError, kDelay, kHang, kMalformedStream };
std::string_view fault_action_name(FaultAction action);
std::optional<FaultAction> fault_action_from_name(std::string_view name);

// Where a point is reached.
struct FaultSite {
  FaultPoint point = FaultPoint::kProviderBeforeRequest;
  std::string session;
  std::string name;        // the tool (tool points) or the hook (hook point)
  std::string event_type;  // log and commit points: the first event written
  uint64_t turn = 0;
};

struct Fault {
  FaultAction action = FaultAction::kNone;
  uint32_t http_status = 0;  // provider error
  bool has_retry_after = false;
  uint64_t retry_after_ms = 0;
  uint64_t delay_ms = 0;  // delay
  std::string message;    // error text
  std::string rule;       // which rule fired, for the log
  // A replay's fault: what the recording says was done, said again by
  // describe(); the replay waits for nothing.
  std::string recorded;

  explicit operator bool() const { return action != FaultAction::kNone; }
  // "error HTTP 503 (rule 2)", "delay 200 ms (rule 1)".
  std::string describe() const;
};

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // What to do at `site`; a Fault with kNone when nothing fires.
  virtual Fault check(const FaultSite& site) = 0;
};

// Asks `injector` (which may be null) at `site`, and crashes the process at
// once if the answer is crash. Returns any other fault for the caller to carry out.
Fault check_fault(FaultInjector* injector, const FaultSite& site);

// Ends the process as SIGKILL would: no destructors, no atexit, no flush.
[[noreturn]] void crash_now();

}  // namespace carapace
