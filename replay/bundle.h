// Bundles: one recorded session in one self-contained file, to replay or
// import on another machine (docs/bundle-format.md).
//
// A bundle holds the session's events byte for byte (their encoded
// payloads), which include what it was run with (session.configured: the
// configuration, the scenario, the tool specs) and, for a fork, the history
// copied from its parent. Credentials are never in a session's events, so
// never in a bundle. A bundle that is truncated, edited, or of a newer
// version is refused, naming what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "events/events.h"
#include "storage/event_log.h"

namespace carapace {

inline constexpr uint32_t kBundleVersion = 1;

struct Bundle {
  std::string session;
  std::vector<Event> events;  // seq 1 on, contiguous
};

// Writes session `id` of `log` to `path` (atomically: a temporary file,
// synced, then renamed).
Status write_bundle(const EventLog& log, const std::string& id, const std::string& path);

Status read_bundle(const std::string& path, Bundle* out);

// Adds the bundle's session to `log` under `as_id` ("": its own id), with
// its indexes, as if it had been written there. Refuses an id that exists
// and a history that does not fold (every checkpoint re-checked).
Status import_bundle(EventLog* log, const Bundle& bundle, const std::string& as_id = "");

}  // namespace carapace
