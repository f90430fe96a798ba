// Verify: check that a session's log is whole and agrees with itself.
//
// For each session it checks every record's checksum and decoding, that seqs
// run 1, 2, 3... without a gap, that the fold accepts every event and that each
// checkpoint's stored state hash equals a fresh fold's; then that the
// checkpoint index, the snapshots and the session index agree with the
// events. It reports each problem with its session, seq and reason. After the
// first record that fails, later records are still checksummed (to show the
// extent of the damage) but no longer folded. Reads only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/event_log.h"

namespace carapace {

struct VerifyIssue {
  std::string session;
  uint64_t seq = 0;  // 0 when the problem is not one record's
  std::string kind;  // checksum, decode, gap, fold, hash, checkpoint_index, snapshot, session_index
  std::string detail;
};

struct SessionVerdict {
  std::string session;
  uint64_t events = 0;
  uint64_t checkpoints_verified = 0;
  uint64_t snapshots_checked = 0;
  uint64_t unknown_skipped = 0;
  bool ok = true;
};

struct VerifyReport {
  std::vector<SessionVerdict> sessions;
  std::vector<VerifyIssue> issues;
  bool ok() const { return issues.empty(); }
};

// Verifies one session. A Status error means verification itself could not
// run (the database failed); problems found in the log go into *report.
Status verify_session(const EventLog& log, std::string_view session, VerifyReport* report);

// Verifies every session in the log and in the session index; not the
// streams of schedules ("schedule:NAME", schedule/schedule_store.h).
Status verify_all(const EventLog& log, VerifyReport* report);
inline constexpr std::string_view kScheduleStreamPrefix = "schedule:";

}  // namespace carapace
