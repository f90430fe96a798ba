// Reopening a session whose process stopped: what `carapace resume` (and a
// replay re-enacting a recorded resume) does once the session is recovered
// (replay/recovery.h). The interrupted turn is settled as the mode says —
// step: its recorded steps are adopted and the loop goes on after them;
// turn: it is rolled back and runs again — and, unless the session had
// finished, session.resumed is recorded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "replay/recovery.h"
#include "storage/session_journal.h"

namespace carapace {

struct ResumeRecord {
  bool step = true;  // else turn mode
  int64_t pid = 0;   // of the process resuming, recorded
  std::string host;
  uint64_t verified_seq = 0;  // records 1..verified_seq were checked (0: not noted)
  uint64_t max_turns = 0;     // a new turn budget, recorded in session.resumed (0: unchanged)
};

// Whether `r` had completed or failed with no turn left open and nothing
// waiting to start the next run (a queued message, a follow-up).
bool recovered_finished(const RecoveredSession& r);

Status reopen_journal(EventLog* log, const std::string& id, RecoveredSession r, const ResumeRecord& how,
                      const JournalOptions& options, std::shared_ptr<SessionJournal>* out);

}  // namespace carapace
