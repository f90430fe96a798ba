// LogWatch: follows a home's event log from another process, folding the
// events of each session that grows into its spans and attributing crashes.
// The part shared by the out-of-process collector (LogFollower, which writes
// the trace store) and `carapace serve` (which pushes the changes to
// browsers).
//
// The log is a RocksDB secondary that catches up with the writer on each
// poll. A session is folded from its first event the first time it grows
// after seed(); a finished session's builder is dropped, to be rebuilt if it
// grows again.
//
// Crash attribution: it notes which process held the log's lock when a
// session's events last grew; when that process no longer holds it and the
// session never completed, failed or was stopped (session.stopped), the
// session is `crashed after seq N`,
// N being its last event. New events (a resume) clear the mark. For a
// session seeded and not grown since, the process holding the lock at the
// first poll (if any) is taken for its writer, so that a restarted watch does
// not call a running session crashed.
//
// Not thread-safe: one thread polls.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/collector/span_builder.h"
#include "base/status.h"
#include "storage/session_meta.h"

namespace carapace {

class EventLog;

// Whether `session`'s event `last` (its last) is a session.stopped: its
// runtime stopped it, and it did not crash.
bool ends_stopped(const EventLog& log, const std::string& session, uint64_t last);

// Whether the session is parked on an approval request with no decision
// (docs/approvals.md): it waits for a person, it did not crash.
bool waits_for_decision(const EventLog& log, const std::string& session);

// What one poll learnt about one session.
struct WatchChange {
  std::string session;
  SessionMeta meta;
  uint64_t seen_seq = 0;      // the last seq known before this poll
  uint64_t folded_seq = 0;    // the last seq folded now (== seen_seq if it did not grow)
  std::vector<Event> events;  // the events read by this poll (from seq 1 when the builder is new)
  std::vector<Span> changed;  // spans opened, changed or closed by them
  std::optional<Span> root;   // the session span as it stands, when it was folded
  uint64_t crashed_after = 0; // nonzero: its writer died after this seq
  bool newly_crashed = false; // this poll found the crash
};

class LogWatch {
 public:
  // `log` is a reader of the log in `log_dir`; it must outlive the watch.
  LogWatch(EventLog* log, std::string log_dir);
  ~LogWatch();

  // What an earlier run got to: the session is folded up to `folded_seq`
  // and so is not reported again until it grows past it.
  void seed(const std::string& session, uint64_t folded_seq, uint64_t crashed_after);

  // Catches up with the writer; one change per session that grew or was
  // found crashed.
  Status poll(std::vector<WatchChange>* changes);

  // The spans of a session being followed (one that grew and has not
  // finished), up to date with the last poll; nullptr otherwise.
  const SpanBuilder* builder(const std::string& session) const;

  // Goes on with another reader of the same log (one opened again after
  // the writer went away).
  void use_log(EventLog* log) { log_ = log; }

 private:
  struct Session {
    std::unique_ptr<SpanBuilder> builder;  // null until the session grows
    uint64_t seen_seq = 0;
    uint64_t crashed_after = 0;
    pid_t writer = 0;  // the lock holder when its events last grew
    uint64_t stopped_seq = 0;  // the seq of its session.stopped, when that was its last event
    uint64_t parked_seq = 0;   // its last seq, when it was found parked on an approval request
  };
  EventLog* log_;
  std::string log_dir_;
  std::map<std::string, Session> sessions_;
};

}  // namespace carapace
