// EventType: the numeric type of every event and its wire name.
//
// The numbers are stored in every record and never change meaning; new types
// take new numbers. Names are the ones SPEC §2 uses ("llm.responded").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace carapace {

enum class EventType : uint16_t {
  kSessionStarted = 1,
  kUserMessage = 2,
  kTurnStarted = 3,
  kPromptAssembled = 4,
  kLlmRequested = 5,
  kLlmFailed = 6,
  kLlmResponded = 7,
  kHookDecided = 8,
  kToolRequested = 9,
  kToolCompleted = 10,
  kContextTrimmed = 11,
  kTurnCommitted = 12,
  kTurnRolledBack = 13,
  kSessionResumed = 14,
  kSessionCompleted = 15,
  kSessionFailed = 16,
  kFaultInjected = 17,
  kSessionConfigured = 18,
  kSessionStopped = 19,
  kApprovalRequested = 20,
  kApprovalDecided = 21,
  // A schedule's own stream "schedule:NAME" (schedule/schedule_state.h), never a session's.
  kScheduleDefined = 22,
  kScheduleRemoved = 23,
  kSchedulePaused = 24,
  kScheduleResumed = 25,
  kScheduleFired = 26,
  kScheduleSkipped = 27,
  kScheduleRunEnded = 28,
};

// The highest type number this build knows; records above it are preserved
// and skipped as unknown.
constexpr uint16_t kMaxKnownEventType = 28;

// "llm.responded" for kLlmResponded; "unknown" for a number this build does not know.
std::string_view wire_name(uint16_t type);
inline std::string_view wire_name(EventType type) { return wire_name(static_cast<uint16_t>(type)); }

std::optional<EventType> event_type_from_name(std::string_view name);

}  // namespace carapace
