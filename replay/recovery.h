// Recovery: rebuild a session's state from its log after a crash or restart.
//
// recover() loads the latest snapshot whose checkpoint re-checks (falling back
// to older ones, then to seq 1), folds the events after it, re-checks the
// state hash of every checkpoint on the way, and returns the state at the last
// checkpoint plus the events after it (an interrupted turn). A record that
// fails its checksum or breaks the fold's rules stops recovery with an error
// naming the session and seq; nothing past it is folded.
//
// Pure reads: recover() never writes. Settling an interrupted turn (rolling it
// back, or adopting its completed steps) is the SessionJournal's job.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "events/events.h"
#include "events/session_state.h"
#include "storage/event_log.h"

namespace carapace {

struct RecoverOptions {
  bool use_snapshots = true;
  bool verify_hashes = true;
};

struct RecoveredSession {
  std::string id;
  SessionState committed;          // the state at the last checkpoint
  std::vector<Event> uncommitted;  // events after it that no checkpoint or rollback covers
  uint64_t last_seq = 0;
  uint64_t snapshot_seq = 0;   // the checkpoint recovery started from; 0 = seq 1
  uint64_t events_folded = 0;  // records read after the snapshot
  uint64_t checkpoints_verified = 0;
  uint64_t unknown_skipped = 0;
  uint64_t snapshots_rejected = 0;  // corrupt, or disagreeing with their checkpoint
};

Status recover(const EventLog& log, std::string_view session, const RecoverOptions& options,
               RecoveredSession* out);

// Checks the records of `session` from `from_seq` on for their checksums and
// the seqs for gaps, without decoding or folding (a resume's guard: recovery
// from a snapshot does not read the records before it). The first problem
// names the seq. *last_checked, if given, gets the last seq checked.
Status check_records(const EventLog& log, std::string_view session, uint64_t from_seq = 1,
                     uint64_t* last_checked = nullptr);

}  // namespace carapace
