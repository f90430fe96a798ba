// write_synthetic_session: writes a SyntheticSession (events/synthetic.h)
// through a SessionJournal, step by step as the runtime would: buffered
// steps, and a synced checkpoint at the end of each turn. A testing and
// benchmarking aid behind `carapace log synth`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "events/synthetic.h"
#include "storage/event_log.h"
#include "storage/session_journal.h"

namespace carapace {

struct SyntheticWriteStats {
  uint64_t events = 0;
  uint64_t steps = 0;
  uint64_t checkpoints = 0;
  uint64_t turns = 0;
};

// `progress`, if set, is called after each checkpoint with the stats so far.
Status write_synthetic_session(EventLog* log, const std::string& id, const SyntheticOptions& options,
                               const JournalOptions& journal_options, SyntheticWriteStats* stats,
                               const std::function<void(const SyntheticWriteStats&)>& progress = {});

}  // namespace carapace
