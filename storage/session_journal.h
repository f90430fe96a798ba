// SessionJournal: the write side of one session.
//
// It numbers the session's events, applies each to the folded state as it is
// appended (so the fold's rules are checked before anything is written),
// writes every step as one atomic batch, and ends a turn with a checkpoint:
// a turn.committed carrying the state's hash, written with its step in one
// synced batch together with the checkpoint index and session index entries.
// Every `snapshot_every_turns` turns it also stores a snapshot of the state,
// once the events written since the last one weigh half as much as it did.
//
// If a write fails, or a step breaks the fold's rules after part of it was
// applied, the journal is broken: its state may be ahead of the log, and it
// refuses further appends. Recover the session (replay/recovery.h) to go on.
//
// Not thread-safe: a session has one writer. The EventLog must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fault_injection.h"
#include "base/status.h"
#include "events/events.h"
#include "events/session_state.h"
#include "storage/event_log.h"

namespace carapace {

// Microseconds since the Unix epoch; injectable so tests control time.
using WallClock = std::function<int64_t()>;
int64_t system_clock_us();

struct JournalOptions {
  // A snapshot at each multiple of this turn count (0: never), once the events written since the
  // journal's last snapshot weigh at least half of that snapshot's bytes. A long conversation's state,
  // and so its snapshot, grows with every turn: a snapshot every K turns would cost more each time.
  // This way every snapshot but the newest is followed by half its weight in events, so together they
  // weigh at most twice the events; a recovery folds, after the newest snapshot, less than half its
  // weight in events plus the K turns up to the next multiple.
  uint64_t snapshot_every_turns = 100;
  WallClock clock = system_clock_us;
  // Asked at log.before_append, log.after_append, commit.before and
  // commit.after (base/fault_injection.h); null: no faults.
  std::shared_ptr<FaultInjector> faults;
};

class SessionJournal {
 public:
  // Starts session `id` (which must not exist yet): writes `opening` (a
  // session.started, then typically the task's user.message) with a
  // checkpoint, durably.
  static Status create(EventLog* log, std::string id, std::vector<EventBody> opening, JournalOptions options,
                       std::unique_ptr<SessionJournal>* out);

  // Starts session `id` with a whole history at once (a fork): `turns` are
  // the events of each checkpointed step, the first opening with
  // session.started; each step gets its own turn.committed. Events keep their
  // timestamps. Everything is written in one synced batch: all or nothing.
  static Status create_with_history(EventLog* log, std::string id, std::vector<std::vector<Event>> turns,
                                    JournalOptions options, std::unique_ptr<SessionJournal>* out);

  // Continues a session whose state at its last checkpoint is `committed`,
  // whose log ends at `last_seq`, and whose events after that checkpoint are
  // `uncommitted`. Before appending, the caller settles those events: either
  // roll_back_uncommitted() (turn mode) or adopt_uncommitted() (step mode).
  static std::unique_ptr<SessionJournal> attach(EventLog* log, std::string id, SessionState committed,
                                                std::vector<Event> uncommitted, uint64_t last_seq,
                                                JournalOptions options);

  // Appends a turn.rolled_back covering the uncommitted events, durably. The
  // events stay on disk; the fold skips them. User messages among them are
  // appended again after it, queued for the next turn: they were
  // acknowledged, so they must not be lost with the turn. A no-op if there
  // are no uncommitted events.
  Status roll_back_uncommitted(std::string reason);

  // Of a call adopted_uncommitted() found requested and not completed: the
  // reason of the stop (session.stopped) that ended the run it was running
  // in, or "" if that run crashed.
  std::string stop_reason_of_call(const std::string& call_id) const;
  // Folds the uncommitted events into the state, keeping the interrupted
  // turn's completed steps.
  Status adopt_uncommitted();

  // Appends one step as an atomic batch, without a sync, behind any staged
  // steps (in the same batch). `written`, if given, receives the events as
  // written: the staged steps' and this one's.
  Status append(std::vector<EventBody> step, std::vector<Event>* written = nullptr);

  // Numbers `step` and applies it to the state, as append() does, but
  // keeps it to be written with the next write: flush(), or any append or
  // commit, which writes the staged steps first, in the same batch. Each
  // step is still written whole. A session stages the steps it makes
  // between two moments it acts outside itself, so they cost one write;
  // the loop flushes before it sends a request or tells anyone anything.
  // A crash loses what is staged, as it loses a step not yet appended.
  // A step refused before anything is written (a fault plan's error, a
  // step the fold rejects) first has the steps staged before it written,
  // as they would have been one by one: `written`, if given, receives them.
  Status stage_append(std::vector<EventBody> step, std::vector<Event>* written = nullptr);
  // Writes the staged steps as one batch, without a sync; `written`, if
  // given, receives their events. Nothing staged: nothing written.
  Status flush(std::vector<Event>* written = nullptr);
  bool has_staged() const { return !staged_.empty(); }

  // Appends one step as an atomic batch, synced before it returns: for what
  // is written before a session's loop runs and must survive a power loss
  // (a resume's follow-up messages).
  Status append_synced(std::vector<EventBody> step);
  // Appends `step` and a turn.committed in one synced batch, then a snapshot
  // when one is due.
  Status commit(std::vector<EventBody> step = {});

  // Appends `step` as one atomic batch that is durable (synced, sharing the
  // sync with other sessions' durable appends) before `done` runs, without a
  // checkpoint: for what must survive a power loss before the session acts
  // on it — the intent of a tool call with side effects, an acknowledged
  // user message. The state is updated before this returns; `done` runs on
  // the log's committer thread; a failure breaks the journal.
  // The staged steps go in the same batch, ahead of `step`; `earlier`, if
  // given, receives their events (written, unsynced, when this returns,
  // also when `step` is refused before it is written).
  void append_durable_async(std::vector<EventBody> step, std::function<void(Status)> done,
                            std::vector<Event>* staged = nullptr, std::vector<Event>* earlier = nullptr);

  // commit() without blocking on the disk: `done` runs on the log's committer
  // thread once the checkpoint is durable (or failed, which breaks the
  // journal). The state is updated before this returns, and the caller may
  // append the next step at once: the log queues it behind the checkpoint.
  // `staged`, if given, receives a copy of the events at once (before they
  // are durable). The staged steps go in the same batch, as with
  // append_durable_async().
  void commit_async(std::vector<EventBody> step, std::function<void(Status)> done,
                    std::vector<Event>* staged = nullptr, std::vector<Event>* earlier = nullptr);

  // Appends a session.configured (how the session runs from here: a resume
  // or fork that changed its configuration), with the session index's
  // configured_seq pointing at it, in one atomic batch without a sync.
  Status reconfigure(SessionConfigured configured);

  // Records in the session index that records 1..seq were checked (their
  // checksums and seq contiguity), so that the next resume checks only what
  // follows. A buffered write: losing it only means checking again.
  Status note_verified(uint64_t seq);

  const std::string& id() const { return id_; }
  const SessionState& state() const { return state_; }
  uint64_t last_seq() const { return last_seq_; }
  bool broken() const;
  const std::vector<Event>& uncommitted() const { return uncommitted_; }

 private:
  SessionJournal(EventLog* log, std::string id, JournalOptions options);

  Status check_writable() const;
  // Asks the fault injector at a log or commit point before writing `step`:
  // an error is returned; a delay sleeps and adds a fault.injected event to
  // the step; a crash does not return.
  Status inject_before(FaultPoint point, std::vector<EventBody>& step);
  // Numbers `bodies`, applies them to the state and moves them into *events.
  Status stage(std::vector<EventBody>&& bodies, std::vector<Event>* events);
  // stage() plus the checkpoint event and its index entries; *snapshot_state
  // gets the encoded pre-checkpoint state when a snapshot is due.
  Status stage_commit(std::vector<EventBody>&& step, std::vector<Event>* events, CheckpointEntry* checkpoint,
                      SessionMeta* meta, std::string* snapshot_state);
  void mark_broken(const Status& why);
  // Writes the staged steps (when the journal is not broken) into *written
  // and returns `why`.
  Status refused(const Status& why, std::vector<Event>* written);
  // Asks the fault injector at log.after_append for each written step (the
  // first event type of each, and the turn it was made in).
  static void inject_after(FaultInjector* faults, const std::string& id, const std::vector<Event>& events,
                           const std::vector<std::pair<size_t, uint64_t>>& steps);
  // Moves the staged events in front of `events` (for a write that carries
  // them), with a copy into *earlier if given.
  void take_staged(std::vector<Event>* events, std::vector<Event>* earlier);

  // What the committer thread's callbacks may touch.
  struct Shared {
    std::mutex mu;
    std::string broken_reason;
  };

  // A staged checkpoint, ready to be written.
  struct PreparedCommit {
    std::vector<Event> events;
    CheckpointEntry checkpoint;
    SessionMeta meta;
    std::shared_ptr<SnapshotEntry> snapshot;  // when one is due
    AppendRequest request(const std::string& id, uint64_t* event_bytes) const;
  };
  Status prepare_commit(std::vector<EventBody>&& step, PreparedCommit* out);
  static void finish_commit(EventLog* log, const std::string& id, Shared& shared,
                            const std::shared_ptr<SnapshotEntry>& snapshot, const Status& s,
                            FaultInjector* faults, uint64_t turn);

  EventLog* log_;
  std::string id_;
  JournalOptions options_;
  SessionState state_;
  uint64_t last_seq_ = 0;
  std::vector<Event> uncommitted_;
  std::map<std::string, std::string> stopped_calls_;  // call id -> stop reason, from adopt_uncommitted()
  SessionMeta meta_;
  uint64_t last_snapshot_turn_ = 0;
  // The bytes of the last snapshot this journal took (0: none yet), and of
  // the events it has written since.
  uint64_t last_snapshot_bytes_ = 0;
  uint64_t event_bytes_since_snapshot_ = 0;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  // Steps applied to the state and not written yet (stage_append()): their
  // events, and where each step starts in them with the turn it was made in.
  std::vector<Event> staged_;
  std::vector<std::pair<size_t, uint64_t>> staged_steps_;
};

}  // namespace carapace
