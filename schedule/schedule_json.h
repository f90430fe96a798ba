// A schedule as the API, `carapace schedule show --json` and the page show
// it: its definition, state, next fire (UTC and local), open and recent runs.
#pragma once

#include <nlohmann/json.hpp>

#include "schedule/cron.h"
#include "schedule/schedule_state.h"

namespace carapace::schedule {

nlohmann::json run_json(const ScheduleRun& run);

// `full`: every recent run kept (20), else the last 5.
nlohmann::json schedule_json(const ScheduleState& state, const CronExpression& cron, const TimeZone& zone,
                             int64_t now_us, bool full);

}  // namespace carapace::schedule
