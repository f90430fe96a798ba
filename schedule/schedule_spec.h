// A schedule's definition as people write it — in config.json's "schedules",
// in the API's body, from `carapace schedule add`'s flags — checked into a
// schedule.defined event (docs/schedules.md):
//
//   {"cron": "*/5 * * * *", "task": "...", "tz": "Europe/Berlin",
//    "overlap": "skip" | "buffer_one" | "allow", "catchup": "1h", "jitter": "30s",
//    "pause_after_failures": 3, "paused": false,
//    "session": {"model": "...", "max_turns": 8, "workspace": "reports", "instructions": "..."}}
//
// Only "cron" and "task" are required. Durations are "90s", "30m", "24h",
// "7d" or milliseconds. Every error names the field it is about.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "base/status.h"
#include "events/events.h"
#include "schedule/cron.h"

namespace carapace::schedule {

inline constexpr uint64_t kDefaultCatchupMs = 3'600'000;  // an hour (Temporal's default: a year)
inline constexpr uint64_t kMaxTaskBytes = 60 * 1024;

// Reads `j` into *out (name, the fields; source and who are the caller's).
// `where` prefixes every error ("config.json: schedules.nightly").
Status definition_from_json(std::string_view name, const nlohmann::json& j, std::string_view where,
                            int64_t now_us, ScheduleDefined* out);

// The definition in the shape definition_from_json reads (durations as text: "1h").
nlohmann::json definition_to_json(const ScheduleDefined& d);

// Whether two definitions fire the same runs (source, who and paused aside).
bool same_definition(const ScheduleDefined& a, const ScheduleDefined& b);

// "1h 30m", "90s", "0" for the duration `ms`.
std::string duration_text(uint64_t ms);

}  // namespace carapace::schedule
