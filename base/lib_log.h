// lib_log(): the logger the library's code writes to (base/log_sink.h says
// where it goes). Include from .cc files only: it brings in spdlog.
#pragma once

#include <spdlog/logger.h>

#include <memory>

#include "base/log_sink.h"

namespace carapace {

class Redactor;

spdlog::logger& lib_log();

// A sink writing lines to stderr redacted (base/redactor.h) and with their
// terminal controls shown, never obeyed: what a server, a model or a tool
// wrote can be in a log line. The library's default logger uses one (with
// the default redactor), as does the command line's.
std::shared_ptr<spdlog::sinks::sink> make_safe_stderr_sink(std::shared_ptr<const Redactor> redactor);

}  // namespace carapace
