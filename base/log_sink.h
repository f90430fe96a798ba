// Where Carapace's own log lines go (installed as <carapace/logging.h>).
//
// The library logs through a logger of its own, named "carapace", never
// through spdlog's default logger: by default it writes warnings and errors
// to stderr and nothing to stdout. A program takes the lines over with a
// sink callback, or hands the library an spdlog logger of its own. What is
// logged: sessions resumed and stopped, retries and recoveries (info); tool
// calls and hooks abandoned after their time-outs, hooks that failed, tool
// actors restarted, persistence failures (warn, error).
//
// Thread safety: both functions may be called at any time from any thread;
// lines logged meanwhile go to the old or the new destination.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

namespace spdlog {
class logger;
}

namespace carapace {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Called for each line, on the thread that logs (an actor's or a tool's):
// keep it quick, and safe to call from several threads at once. Lines come
// redacted (known secret shapes masked) with terminal controls written out.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Sends every line at `min_level` or above to `sink`; a null sink puts the
// default back (warnings and errors on stderr).
void set_log_sink(LogSink sink, LogLevel min_level = LogLevel::kWarn);

// Logs through `logger` (its sinks and level); null puts the default back.
void set_logger(std::shared_ptr<spdlog::logger> logger);

}  // namespace carapace
