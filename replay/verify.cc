#include "replay/verify.h"

#include <algorithm>
#include <map>
#include <set>

#include "events/fold.h"
#include "events/record.h"

namespace carapace {
namespace {

// Stop listing damaged records of one session after this many.
constexpr size_t kMaxRecordIssues = 20;

struct SessionCheck {
  const EventLog& log;
  std::string session;
  VerifyReport* report;
  SessionVerdict verdict;
  size_t record_issues = 0;

  void issue(uint64_t seq, std::string kind, std::string detail) {
    verdict.ok = false;
    report->issues.push_back(VerifyIssue{session, seq, std::move(kind), std::move(detail)});
  }

  // Seq -> (turn, hash) of every turn.committed that folded.
  std::map<uint64_t, TurnCommitted> commits;
  // The last seq the fold accepted; index entries and snapshots past it cannot
  // be judged once the fold has stopped.
  uint64_t folded_until = 0;

  Status check_records(SessionState* final_state, bool* folded_all) {
    Folder folder;
    bool folding = true;
    uint64_t expected = 1;
    auto cursor = log.cursor(session, 1);
    for (; cursor->valid(); cursor->next()) {
      const uint64_t seq = cursor->seq();
      ++verdict.events;
      if (seq != expected && record_issues < kMaxRecordIssues) {
        ++record_issues;
        issue(seq, "gap",
              seq > expected
                  ? "seq " + std::to_string(expected) + " to " + std::to_string(seq - 1) + " are missing"
                  : "seq goes backwards");
        folding = false;
      }
      expected = seq + 1;
      Event e;
      // Decoded here rather than by the cursor: the issue carries the session and seq itself.
      Status s = decode_record(cursor->key(), cursor->value(), seq, &e);
      if (!s.ok()) {
        if (record_issues < kMaxRecordIssues) {
          ++record_issues;
          issue(
              seq,
              s.detail() == Status::Detail::kChecksumMismatch ? "checksum" : "decode",
              s.message());
        }
        folding = false;
        continue;
      }
      if (!folding) continue;
      const auto* commit = get_if<TurnCommitted>(e);
      TurnCommitted commit_copy = commit ? *commit : TurnCommitted{};
      s = folder.add(std::move(e));
      if (!s.ok()) {
        bool hash = s.detail() == Status::Detail::kStateHashMismatch;
        issue(seq, hash ? "hash" : "fold", s.message());
        folding = false;
        continue;
      }
      if (commit) commits[seq] = commit_copy;
      folded_until = seq;
    }
    CARAPACE_RETURN_IF_ERROR(cursor->status());
    verdict.checkpoints_verified = folder.checkpoints_verified();
    verdict.unknown_skipped = folder.unknown_skipped();
    *folded_all = folding;
    if (folding) return folder.state_with_uncommitted(final_state);
    return Status();
  }

  Status check_checkpoint_index() {
    std::vector<CheckpointEntry> entries;
    CARAPACE_RETURN_IF_ERROR(log.checkpoints(session, &entries));
    std::set<uint64_t> indexed;
    for (const auto& c : entries) {
      indexed.insert(c.seq);
      if (c.seq > folded_until) continue;
      auto it = commits.find(c.seq);
      if (it == commits.end()) {
        issue(c.seq, "checkpoint_index",
              "the checkpoint index has an entry for seq " + std::to_string(c.seq) +
                  ", which is not a verified turn.committed");
      } else if (it->second.turn != c.turn || it->second.state_hash != c.state_hash) {
        issue(c.seq, "checkpoint_index",
              "the checkpoint index says turn " + std::to_string(c.turn) + " hash " + c.state_hash.hex() +
                  ", the log says turn " + std::to_string(it->second.turn) + " hash " +
                  it->second.state_hash.hex());
      }
    }
    for (const auto& [seq, commit] : commits) {
      if (!indexed.count(seq)) {
        issue(seq, "checkpoint_index",
              "turn.committed of turn " + std::to_string(commit.turn) +
                  " is missing from the checkpoint index");
      }
    }
    return Status();
  }

  Status check_snapshots() {
    std::vector<std::pair<SnapshotEntry, Status>> snaps;
    CARAPACE_RETURN_IF_ERROR(log.snapshots(session, &snaps));
    for (const auto& [snap, frame] : snaps) {
      ++verdict.snapshots_checked;
      if (!frame.ok()) {
        issue(snap.seq, "snapshot", frame.message());
        continue;
      }
      SessionState state;
      Status s = decode_state(snap.state, &state);
      if (!s.ok()) {
        issue(snap.seq, "snapshot", s.message());
        continue;
      }
      if (snap.seq > folded_until) continue;
      auto it = commits.find(snap.seq);
      if (it == commits.end()) {
        issue(snap.seq, "snapshot",
              "snapshot at seq " + std::to_string(snap.seq) + " has no verified checkpoint at that seq");
      } else if (Digest128 h = state_hash(state, it->second.hash_version); h != it->second.state_hash) {
        issue(snap.seq, "snapshot",
              "snapshot hashes to " + h.hex() + " but its checkpoint recorded " + it->second.state_hash.hex());
      }
    }
    return Status();
  }

  Status check_session_index(const SessionState& state) {
    SessionMeta meta;
    Status s = log.get_meta(session, &meta);
    if (s.is_not_found()) {
      issue(0, "session_index", "the session has events but no session index entry");
      return Status();
    }
    if (s.is_corruption()) {
      issue(0, "session_index", s.message());
      return Status();
    }
    CARAPACE_RETURN_IF_ERROR(s);
    if (meta.committed_seq != state.committed_seq || meta.committed_turn != state.committed_turn) {
      issue(meta.committed_seq, "session_index",
            "the session index says turn " + std::to_string(meta.committed_turn) + " at seq " +
                std::to_string(meta.committed_seq) + ", the log's last checkpoint is turn " +
                std::to_string(state.committed_turn) + " at seq " + std::to_string(state.committed_seq));
    }
    if (meta.configured_seq > 0) {
      std::vector<Event> at;
      Status read = log.read(session, meta.configured_seq, meta.configured_seq, &at);
      if (!read.ok() || at.empty() || !std::holds_alternative<SessionConfigured>(at.front().body)) {
        issue(meta.configured_seq, "session_index",
              "the session index says the session's configuration is at seq " +
                  std::to_string(meta.configured_seq) + ", which is not a session.configured");
      }
    }
    return Status();
  }
};

}  // namespace

Status verify_session(const EventLog& log, std::string_view session, VerifyReport* report) {
  SessionCheck check{log, std::string(session), report, SessionVerdict{.session = std::string(session)}};
  SessionState state;
  bool folded_all = false;
  CARAPACE_RETURN_IF_ERROR(check.check_records(&state, &folded_all));
  if (check.verdict.events == 0) {
    SessionMeta meta;
    Status indexed = log.get_meta(session, &meta);
    if (indexed.ok()) {
      check.issue(0, "session_index", "the session index lists the session but it has no events");
    } else if (indexed.is_corruption()) {
      check.issue(0, "session_index", indexed.message() + ", and the session has no events");
    } else {
      return Status::not_found("no session '" + std::string(session) + "' in " + log.path());
    }
  }
  CARAPACE_RETURN_IF_ERROR(check.check_checkpoint_index());
  CARAPACE_RETURN_IF_ERROR(check.check_snapshots());
  if (folded_all && check.verdict.events > 0) CARAPACE_RETURN_IF_ERROR(check.check_session_index(state));
  report->sessions.push_back(check.verdict);
  return Status();
}

Status verify_all(const EventLog& log, VerifyReport* report) {
  std::vector<std::string> logged;
  CARAPACE_RETURN_IF_ERROR(log.list_logged_sessions(&logged));
  std::vector<SessionMeta> indexed;
  std::vector<std::string> unreadable;
  CARAPACE_RETURN_IF_ERROR(log.list_sessions(&indexed, &unreadable));
  for (const auto& entry : unreadable) {
    report->sessions.push_back(SessionVerdict{.session = "(session index)", .ok = false});
    report->issues.push_back(VerifyIssue{.session = "(session index)", .kind = "session_index", .detail = entry});
  }
  std::set<std::string> ids;
  for (const auto& id : logged) {
    // A schedule's stream is no session (docs/schedules.md): `carapace verify` checks those.
    if (!id.starts_with(kScheduleStreamPrefix)) ids.insert(id);
  }
  for (const auto& m : indexed) ids.insert(m.id);
  for (const auto& id : ids) CARAPACE_RETURN_IF_ERROR(verify_session(log, id, report));
  // The time index against the session index as it is (a session index
  // entry changed behind the log's back shows here too).
  std::vector<std::string> time_index;
  CARAPACE_RETURN_IF_ERROR(log.check_time_index(&time_index));
  if (!time_index.empty()) report->sessions.push_back(SessionVerdict{.session = "(time index)", .ok = false});
  for (const auto& problem : time_index) {
    report->issues.push_back(VerifyIssue{.session = "(time index)", .kind = "time_index", .detail = problem});
  }
  return Status();
}

}  // namespace carapace
