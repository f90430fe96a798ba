#include "actors/collector/log_watch.h"

#include <algorithm>

#include "events/session_state.h"
#include "storage/db_lock.h"
#include "storage/event_log.h"

namespace carapace {
namespace {

// The writer of a session seeded from an earlier run, until a poll sees who holds the log.
constexpr pid_t kUnknownWriter = -1;

}  // namespace

LogWatch::LogWatch(EventLog* log, std::string log_dir) : log_(log), log_dir_(std::move(log_dir)) {}
LogWatch::~LogWatch() = default;

void LogWatch::seed(const std::string& session, uint64_t folded_seq, uint64_t crashed_after) {
  sessions_[session] = Session{.seen_seq = folded_seq, .crashed_after = crashed_after, .writer = kUnknownWriter};
}

bool ends_stopped(const EventLog& log, const std::string& session, uint64_t last) {
  std::vector<Event> tail;
  return log.read(session, last, last, &tail).ok() && !tail.empty() &&
         std::holds_alternative<SessionStopped>(tail.back().body);
}

bool waits_for_decision(const EventLog& log, const std::string& session) {
  SessionMeta meta;
  if (!log.get_meta(session, &meta).ok() || meta.status != SessionStatus::kRunning) return false;
  std::vector<Event> events;
  if (!log.read(session, meta.committed_seq + 1, UINT64_MAX, &events).ok()) return false;
  std::vector<PendingApproval> approvals;
  for (const auto& e : events) note_approval(approvals, e);
  return std::any_of(approvals.begin(), approvals.end(), [](const PendingApproval& a) { return !a.decided; });
}

const SpanBuilder* LogWatch::builder(const std::string& session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? nullptr : it->second.builder.get();
}

Status LogWatch::poll(std::vector<WatchChange>* changes) {
  // Who holds the log, asked before catching up: a writer writes its last
  // events (session.stopped, session.completed) before it lets the lock go,
  // so when it was gone already the catch-up has all of them. Asked after, a
  // writer that closed in between would leave its last events unread and
  // its session taken for crashed.
  const pid_t holder = lock_holder(log_dir_);
  CARAPACE_RETURN_IF_ERROR(log_->refresh());
  std::vector<SessionMeta> metas;
  std::vector<std::string> unreadable;
  CARAPACE_RETURN_IF_ERROR(log_->list_sessions(&metas, &unreadable));
  for (auto& meta : metas) {
    uint64_t last = 0;
    if (!log_->last_seq(meta.id, &last).ok() || last == 0) continue;
    Session& s = sessions_[meta.id];
    WatchChange change{.session = meta.id, .seen_seq = s.seen_seq, .folded_seq = s.seen_seq};
    bool changed = false;
    if (last > s.seen_seq) {
      // Grown: fold the new events (all of them, for a builder this process has not got).
      if (!s.builder) s.builder = std::make_unique<SpanBuilder>(meta.id);
      Status read = log_->read(meta.id, s.builder->last_seq() + 1, last, &change.events);
      for (const auto& e : change.events) s.builder->add(e);
      if (!read.ok() && change.events.empty()) continue;  // a damaged record: try again next poll
      s.writer = holder;
      s.crashed_after = 0;
      changed = true;
    }
    // Seeded and not grown since: whoever holds the log now may be writing
    // it; with nobody holding it, nobody is.
    if (s.writer == kUnknownWriter) s.writer = holder;
    // Open (never completed or failed), and the process that wrote it holds the log no more.
    const bool open = s.builder ? !s.builder->spans().empty() && s.builder->spans()[0].open()
                                : meta.status != SessionStatus::kCompleted && meta.status != SessionStatus::kFailed;
    const bool writer_gone = holder == 0 || holder != s.writer;
    // Not folded here, and its last event is session.stopped: stopped on purpose, not crashed.
    if (open && writer_gone && !s.builder && s.crashed_after == 0 && s.stopped_seq != last &&
        ends_stopped(*log_, meta.id, last)) {
      s.stopped_seq = last;
    }
    const bool stopped = !s.builder && s.stopped_seq == last;
    // Parked on a person: its writer left on purpose.
    if (open && writer_gone && s.crashed_after == 0 && s.parked_seq != last && waits_for_decision(*log_, meta.id)) {
      s.parked_seq = last;
    }
    const bool parked = s.parked_seq == last;
    if (open && !stopped && !parked && s.crashed_after == 0 && writer_gone) {
      s.crashed_after = s.builder ? s.builder->last_seq() : last;
      change.newly_crashed = true;
      changed = true;
    }
    if (!changed) continue;
    if (s.builder) {
      change.changed = s.builder->take_changed();
      if (!s.builder->spans().empty()) change.root = s.builder->spans()[0];
      s.seen_seq = s.builder->last_seq();
    }
    change.folded_seq = s.seen_seq;
    change.crashed_after = s.crashed_after;
    change.meta = std::move(meta);
    changes->push_back(std::move(change));
    // A finished session's builder goes; it is read again if the session grows.
    if (s.builder && !open) s.builder.reset();
  }
  return Status();
}

}  // namespace carapace
