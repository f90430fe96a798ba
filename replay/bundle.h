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

class BodyStore;

// Version 1: events only. Version 2: events and verbatim bodies (written
// only when a bundle carries bodies, so that older readers still read the
// others).
inline constexpr uint32_t kBundleVersion = 2;

struct BundleBody {
  std::string ref;    // its key in the body store (the digest of its bytes)
  std::string bytes;  // verbatim
};

struct Bundle {
  std::string session;
  std::vector<Event> events;       // seq 1 on, contiguous
  std::vector<BundleBody> bodies;  // each checked against its ref on read
};

struct BundleWritten {
  uint64_t events = 0;
  uint64_t bodies = 0;           // bodies written into the bundle
  uint64_t missing_bodies = 0;   // referenced by an event but not in the body store
  uint64_t bytes = 0;            // the file's size
};

// Writes session `id` of `log` to `path` (atomically: a temporary file,
// synced, then renamed). `with_bodies`: also every body the session's
// events reference that `bodies` holds (those it lacks, all of them when
// `bodies` is null, are counted in `written->missing_bodies`).
Status write_bundle(const EventLog& log, const std::string& id, const std::string& path, bool with_bodies = false,
                    const BodyStore* bodies = nullptr, BundleWritten* written = nullptr);

Status read_bundle(const std::string& path, Bundle* out);

// Adds the bundle's session to `log` under `as_id` ("": its own id), with
// its indexes, as if it had been written there; its bodies go into
// `bodies` first (durably, so no imported event references a body that a
// crash could lose). Refuses an id that exists, a history that does not
// fold (every checkpoint re-checked), and a bundle with bodies but no store.
Status import_bundle(EventLog* log, const Bundle& bundle, const std::string& as_id = "",
                     BodyStore* bodies = nullptr);

}  // namespace carapace
