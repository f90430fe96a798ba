#include "replay/recovery.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

#include "events/fold.h"
#include "events/record.h"

namespace carapace {
namespace {

// Folds the rest of the session's log from `cursor` into `folder`. The
// records are decoded without the fields the fold never reads
// (fold_unread_tags); take() reads the ones recovery hands on again.
Status fold_rest(std::string_view session, EventCursor* cursor, Folder* folder) {
  for (; cursor->valid(); cursor->next()) {
    // Decoded straight into the folder's slot: no event moved or freed.
    Status s =
        decode_record(cursor->key(), cursor->value(), cursor->seq(), &folder->staging(), fold_unread_tags);
    if (!s.ok())
      return s.with_context("session " + std::string(session) + " seq " + std::to_string(cursor->seq()));
    s = folder->add_staged();
    if (!s.ok()) return s.with_context("session " + std::string(session));
  }
  return cursor->status();
}

void warn_unknown(const RecoveredSession& r) {
  if (r.unknown_skipped > 0) {
    lib_log().warn(
        "session {}: skipped {} events of types this build does not know (written by a newer carapace)", r.id,
        r.unknown_skipped);
  }
}

// The folder's result into *out; the events after the last checkpoint are
// read again in full (the fold's copies lack the fields it does not read).
Status take(const EventLog& log, std::string_view session, Folder&& folder, uint64_t snapshot_seq,
            RecoveredSession* out) {
  out->uncommitted.clear();
  if (!folder.uncommitted().empty()) {
    auto cursor = log.cursor(session, folder.uncommitted().front().seq);
    for (const Event& folded : folder.uncommitted()) {
      if (!cursor->valid() || cursor->seq() != folded.seq) {
        CARAPACE_RETURN_IF_ERROR(cursor->status());
        return Status::corruption("session " + std::string(session) + ": seq " + std::to_string(folded.seq) +
                                  " went missing while recovery read it");
      }
      Event e;
      CARAPACE_RETURN_IF_ERROR(cursor->event(&e));
      out->uncommitted.push_back(std::move(e));
      cursor->next();
    }
  }
  out->last_seq = folder.last_seq();
  out->snapshot_seq = snapshot_seq;
  out->events_folded = folder.events_folded();
  out->checkpoints_verified = folder.checkpoints_verified();
  out->unknown_skipped = folder.unknown_skipped();
  out->committed = std::move(folder).take_committed();
  return Status();
}

// Recovers from `snap`. A failure that shows the snapshot wrong (it does not
// decode, or its checkpoint's hash disagrees with it) sets *snapshot_wrong; any
// other failure is the log's and is returned as is.
Status recover_from_snapshot(const EventLog& log, std::string_view session, const SnapshotEntry& snap,
                             Folder::Options options, RecoveredSession* out, bool* snapshot_wrong) {
  *snapshot_wrong = true;
  SessionState start;
  CARAPACE_RETURN_IF_ERROR(decode_state(snap.state, &start));
  if (start.last_seq + 1 != snap.seq) {
    return Status::corruption("it holds the state at seq " + std::to_string(start.last_seq));
  }
  auto cursor = log.cursor(session, snap.seq);
  if (!cursor->valid() || cursor->seq() != snap.seq) {
    *snapshot_wrong = false;
    CARAPACE_RETURN_IF_ERROR(cursor->status());
    return Status::corruption("session " + std::string(session) + ": seq " + std::to_string(snap.seq) +
                              ", a checkpoint with a snapshot, is missing from the log");
  }
  Event checkpoint;
  Status s = cursor->event(&checkpoint);
  if (!s.ok()) {
    *snapshot_wrong = false;
    return s;
  }
  if (!std::holds_alternative<TurnCommitted>(checkpoint.body)) {
    return Status::corruption("seq " + std::to_string(snap.seq) + " is a " +
                              std::string(checkpoint.type_name()) + ", not a checkpoint");
  }
  // The snapshot's own checkpoint comes first: its hash check proves the
  // snapshot right before anything is built on it.
  Folder folder(std::move(start), options);
  CARAPACE_RETURN_IF_ERROR(folder.add(std::move(checkpoint)));
  *snapshot_wrong = false;
  cursor->next();
  CARAPACE_RETURN_IF_ERROR(fold_rest(session, cursor.get(), &folder));
  return take(log, session, std::move(folder), snap.seq, out);
}

}  // namespace

Status recover(const EventLog& log, std::string_view session, const RecoverOptions& options,
               RecoveredSession* out) {
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log.last_seq(session, &last));
  if (last == 0) return Status::not_found("no session '" + std::string(session) + "' in " + log.path());

  Folder::Options fold_options{.verify_hashes = options.verify_hashes};
  RecoveredSession result;
  result.id = std::string(session);
  uint64_t max_seq = UINT64_MAX;
  while (options.use_snapshots) {
    SnapshotEntry snap;
    Status found = log.latest_snapshot(session, max_seq, &snap, &result.snapshots_rejected);
    if (found.is_not_found()) break;
    CARAPACE_RETURN_IF_ERROR(found);
    bool snapshot_wrong = false;
    Status s = recover_from_snapshot(log, session, snap, fold_options, &result, &snapshot_wrong);
    if (s.ok()) {
      warn_unknown(result);
      *out = std::move(result);
      return Status();
    }
    if (!snapshot_wrong) return s;
    lib_log().warn("session {}: snapshot at seq {} rejected ({}); trying an older one", session, snap.seq,
                 s.to_string());
    ++result.snapshots_rejected;
    if (snap.seq <= 1) break;
    max_seq = snap.seq - 1;
  }

  Folder folder(fold_options);
  auto cursor = log.cursor(session, 1);
  CARAPACE_RETURN_IF_ERROR(fold_rest(session, cursor.get(), &folder));
  CARAPACE_RETURN_IF_ERROR(take(log, session, std::move(folder), 0, &result));
  warn_unknown(result);
  *out = std::move(result);
  return Status();
}

Status check_records(const EventLog& log, std::string_view session, uint64_t from_seq, uint64_t* last_checked) {
  uint64_t expected = from_seq;
  auto cursor = log.cursor(session, from_seq);
  auto where = [&] { return "session " + std::string(session) + " seq " + std::to_string(cursor->seq()); };
  for (; cursor->valid(); cursor->next()) {
    if (cursor->seq() != expected) {
      return Status::corruption(where() + ": seq " + std::to_string(expected) + " is missing");
    }
    ++expected;
    RecordHeader header;
    std::string_view payload;
    Status s = parse_record(cursor->key(), cursor->value(), &header, &payload);
    if (!s.ok()) return s.with_context(where());
    if (last_checked != nullptr) *last_checked = cursor->seq();
  }
  return cursor->status();
}

}  // namespace carapace
