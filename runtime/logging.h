// Carapace's own logs: human lines on stderr at a chosen level, and JSON
// lines in a directory (the CLI uses $CARAPACE_HOME/logs) with a file per
// day, a new file past a size, and files older than the retention removed.
// Everything written passes through the redactor (base/redactor.h).
//
// What is logged (spdlog's default logger, named "carapace"): sessions
// opened, resumed, forked and ended, each turn committed, retries, context
// trims, injected faults (info); failed attempts that are not retried,
// persistence failures, recoveries (warn, error); every other event (debug).
// A failure to write a log is reported once on stderr and never fails a turn.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "events/events.h"

namespace carapace {

class Redactor;

struct LogOptions {
  std::string dir;                    // JSON lines go here ("": no file)
  std::string stderr_level = "warn";  // trace, debug, info, warn, error, off
  std::string file_level = "info";
  uint64_t max_file_bytes = 16ull << 20;  // then carapace-DAY.1.jsonl, .2, ...
  uint32_t retention_days = 14;           // 0: keep every file
  std::shared_ptr<const Redactor> redactor;  // null: the default redactor
};

// Installs the default logger with these sinks (replacing the previous
// one). Creates `dir` owner-only if needed; fails if it cannot, naming it.
Status configure_logging(const LogOptions& options);

// Whether `level` names a level (for --log-level).
bool valid_log_level(const std::string& level);

// Logs a durable event of session `id` at the level its kind deserves.
void log_session_event(const std::string& id, const Event& e);

}  // namespace carapace
