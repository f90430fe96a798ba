// lib_log(): the logger the library's code writes to (base/log_sink.h says
// where it goes). Include from .cc files only: it brings in spdlog.
#pragma once

#include <spdlog/logger.h>

#include "base/log_sink.h"

namespace carapace {

spdlog::logger& lib_log();

}  // namespace carapace
