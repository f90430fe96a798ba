// Bundles: one recorded session in one self-contained file, to replay or
// import on another machine (docs/bundle-format.md).
//
// A bundle holds the session's events byte for byte (their encoded
// payloads), which include what it was run with (session.configured: the
// configuration, the scenario, the tool specs) and, for a fork, the history
// copied from its parent. Credentials are never in a session's events, so
// never in a bundle.
//
// A bundle is written by someone else: it is data, never instructions. It
// is read in one pass with a cap on each line and on the whole file, every
// line through parse_bounded_json; one that is truncated, edited, of a newer
// version, or that `carapace verify` would reject once imported, is refused,
// naming what is wrong, and nothing is written. What an imported session's
// stored configuration may do is decided elsewhere (runtime/session_setup.h,
// bundle_configuration): it is kept as a record only.
//
// Thread-safety: plain functions; a Bundle is a plain value.
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

// Reading limits (docs/bundle-format.md, docs/config.md "Limits"). A line
// holds one event or one body in hex, so twice its bytes: the largest
// legitimate event is a session.configured carrying a 64 MiB scenario
// (limits::kScenarioFileBytes).
inline constexpr uint64_t kBundleMaxLineBytes = 256ull << 20;
inline constexpr uint64_t kBundleMaxBytes = 1ull << 30;

struct BundleBody {
  std::string ref;    // its key in the body store (the digest of its bytes)
  std::string bytes;  // verbatim
};

struct Bundle {
  std::string session;
  std::vector<Event> events;       // seq 1 on, contiguous
  std::vector<BundleBody> bodies;  // each checked against its ref on read
  uint64_t bodies_skipped = 0;     // checked against their refs, not kept (ReadBundleOptions)
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

// Writes `bundle` as a bundle file at `path` (atomically, as above), line
// by line: its events and bodies as they are, with the counts and digest
// computed here.
Status write_bundle_file(const Bundle& bundle, const std::string& path, BundleWritten* written = nullptr);

struct ReadBundleOptions {
  // false: each body is checked against its key and counted in
  // Bundle::bodies_skipped but not kept (a replay needs none).
  bool keep_bodies = true;
};

// Reads and checks a bundle file: a regular file of at most kBundleMaxBytes,
// lines of at most kBundleMaxLineBytes, a header whose fields have their
// types, an id keys::validate_session_id accepts, events with seqs 1, 2, 3...
// that decode, as many events and bodies as the header and the end line say,
// a digest that matches, and nothing after the end line. Peak memory: the
// decoded events and kept bodies plus the longest line. Errors name the file
// and what is wrong; corruption for damage, invalid_argument for a newer
// version or a file over a limit.
Status read_bundle(const std::string& path, Bundle* out, const ReadBundleOptions& options = {});

// Checks that the bundle's session, written to a log under `id`, is one
// `carapace verify` accepts (checksums, seq contiguity, every checkpoint's
// state hash recomputed by a fresh fold, the indexes), in a scratch log of
// its own that is removed afterwards, and that it has a checkpoint at all
// (else nothing in it is verified). Its errors quote verify's.
Status check_bundle(const Bundle& bundle, const std::string& id);

// Adds the bundle's session to `log` under `as_id` ("": its own id), with
// its indexes, as if it had been written there, marked as imported
// (SessionMeta::imported_seq); its bodies go into `bodies` first (durably,
// so no imported event references a body that a crash could lose). Refuses,
// writing nothing, an id that exists or is not valid, a session that
// check_bundle() refuses (`checked`: the caller ran it already), and a
// bundle with bodies but no store.
Status import_bundle(EventLog* log, const Bundle& bundle, const std::string& as_id = "",
                     BodyStore* bodies = nullptr, bool checked = false);

// For a log that is itself a scratch one, thrown away afterwards (a replay
// of a bundle file): the bundle's session written into it and verified
// there, with check_bundle()'s refusals, without a second scratch log.
Status import_bundle_to_scratch(EventLog* scratch, const Bundle& bundle);

}  // namespace carapace
