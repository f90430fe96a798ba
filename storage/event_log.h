// EventLog: the append-only event log of every session, over RocksDB.
//
// One database holds all sessions, in five column families:
//   events            session_id 0x00 seq -> record (events/record.h)
//   sessions          session_id          -> SessionMeta (the session index)
//   sessions_by_time  when session_id     -> "" (the time index, storage/session_time_index.h)
//   checkpoints       session_id 0x00 seq -> CheckpointEntry, for each turn.committed
//   snapshots         session_id 0x00 seq -> framed SessionState at that checkpoint
// (key layout: storage/keys.h). An append is one atomic WriteBatch. Buffered
// appends are written at once without a WAL sync; durable appends go through
// the group committer, which shares one synced WAL write among all the durable
// appends queued at that moment, from any number of sessions.
//
// The log is append-only: an append must continue its session's seq exactly.
// Claiming the seqs and writing them is one step under the session's own
// lock, so appends of one session land in seq order whatever the threads;
// the log still expects one writer per session (a second writer's seq
// collides and is refused). Another process is kept out by RocksDB's lock
// (reported as busy, naming the holder's pid); readers (Mode::kReader) open a
// secondary instance and may run beside a writer.
//
// A durable append that fails leaves the log unwritable (every later append
// fails with the same error): what is on disk after a failed sync is unknown,
// and no later step may land without the earlier one. Reopen to go on.
//
// Thread-safe: all methods may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "events/events.h"
#include "storage/session_meta.h"

namespace rocksdb {
class FileSystem;
class WriteBatch;
}

namespace carapace {

enum class Durability {
  kBuffered,  // written to the WAL, not synced: survives a process crash, not a power loss
  kSynced,    // the WAL is synced before the append completes
};

struct AppendRequest {
  std::string_view session;
  std::span<const Event> events;  // seqs continue the session's log, contiguous
  Durability durability = Durability::kBuffered;
  const SessionMeta* meta = nullptr;            // replaces the session's index entry
  std::span<const CheckpointEntry> checkpoints;  // index turn.committed events of `events`
  uint64_t* event_bytes = nullptr;               // if set, the events' encoded records' bytes are added to it
};

// A snapshot: the encoded state just before the turn.committed at `seq`
// (the state that checkpoint's hash describes).
struct SnapshotEntry {
  uint64_t seq = 0;
  uint64_t turn = 0;
  std::string state;  // encode_state() bytes
};

class EventCursor;

class EventLog {
 public:
  enum class Mode {
    kWriter,  // read-write; one process at a time
    kReader,  // read-only secondary; sees what writers had written when opened or refreshed
  };

  struct Options {
    std::string path;
    Mode mode = Mode::kWriter;
    bool create_if_missing = true;  // writers only
    size_t block_cache_bytes = 64 << 20;
    // The memtables of all its column families together; 0: 16 MB each.
    size_t write_buffer_bytes = 0;
    // append_async writes durable appends on the calling thread and completes
    // them before returning, instead of on the committer thread. For
    // deterministic single-threaded schedulers (CAF's test coordinator),
    // which must never hear from another thread.
    bool inline_durable_appends = false;
    // A scratch log, thrown away afterwards (a replay's): durable appends
    // are not synced, and appends skip the write-ahead log (the memtable
    // holds them until a flush; a crash loses them). Never for a log whose
    // contents matter.
    bool scratch = false;
    // The file system under the database; null: the operating system's.
    // Tests put storage/sync_ledger_fs.h here to simulate power loss.
    std::shared_ptr<rocksdb::FileSystem> file_system;
  };

  // Opens (or, for a writer, creates with owner-only permissions) the log at
  // options.path. A reader on a path with no log gets not_found.
  static Status open(const Options& options, std::unique_ptr<EventLog>* out);

  // Completes every queued durable append, then closes the database.
  ~EventLog();

  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  const std::string& path() const;
  Mode mode() const;

  // Appends atomically; returns once written (kBuffered) or durable (kSynced).
  // Written from the calling thread, where concurrent synced appends share
  // WAL syncs through RocksDB's own write grouping.
  Status append(const AppendRequest& request);

  // As append(), without blocking on the disk: the records are written
  // (unsynced) before this returns, and `done` runs once they are durable, on
  // the committer thread, sharing its WAL sync with other sessions' (kSynced);
  // or before this returns (kBuffered, and any error found before writing).
  // What the session appends next, buffered or not, goes to the log at once,
  // behind them, without waiting for the sync. (Should a batch of the session
  // still be queued at the committer, by a durable append() from another
  // thread, the append is queued behind it instead, so that the log never
  // holds a later step without the earlier one.)
  void append_async(const AppendRequest& request, std::function<void(Status)> done);

  // Returns once every durable append queued so far has completed (or failed).
  void drain();

  // Drops what the log keeps in memory for writing `session` (its write
  // position), if nothing is writing it now; the next append reads it again.
  // For sessions that are done here, so that a long-running writer of many
  // sessions does not grow.
  void forget_writer(std::string_view session);

  // Removes every record of `session` — events, checkpoints, snapshots and
  // its index entry — in one synced write (`carapace sessions rm`). The
  // writer only; the caller makes sure no one appends to it.
  Status remove_session(std::string_view session);

  // Writes a snapshot (buffered: a lost snapshot only means a longer
  // recovery) and drops the session's snapshots older than the one before it.
  Status put_snapshot(std::string_view session, const SnapshotEntry& snapshot);

  // Readers: catches up with what a writer process wrote since open.
  Status refresh();

  // A cursor over `session`'s records from `from_seq` on, in seq order.
  std::unique_ptr<EventCursor> cursor(std::string_view session, uint64_t from_seq = 1) const;

  // Decodes the records [from_seq, to_seq] into *out; stops at the first one
  // that fails its checksum or does not decode, with an error naming the
  // session and seq (the events before it are in *out).
  Status read(std::string_view session, uint64_t from_seq, uint64_t to_seq, std::vector<Event>* out) const;

  // The seq of the session's last record, 0 if it has none.
  Status last_seq(std::string_view session, uint64_t* seq) const;

  // The session's index entry; not_found if it has none.
  Status get_meta(std::string_view session, SessionMeta* out) const;

  // Every entry of the session index, ordered by id. An entry that does not
  // decode, or whose key is not a session id, goes to *unreadable ("<key>:
  // <why>", the key printable) when it is given, and the listing goes on;
  // without it, the first such entry is a corruption error.
  Status list_sessions(std::vector<SessionMeta>* out, std::vector<std::string>* unreadable = nullptr) const;

  // Sessions newest first: by when they last changed (session_time), ties
  // the greater id first, down to those that changed at `since_us`. `visit`
  // gets each one's index entry and returns false to stop. Reads the session
  // time index, so the newest few cost a few reads in a log of any size; a
  // log no writer of this build has opened yet has none, and is read whole
  // and sorted. Entries that do not decode go to *unreadable as in
  // list_sessions.
  Status sessions_by_time(int64_t since_us, const std::function<bool(SessionMeta&)>& visit,
                          std::vector<std::string>* unreadable = nullptr) const;

  // The number of session index entries: kept with the time index, else
  // counted.
  Status session_count(uint64_t* out) const;

  // Checks the time index against the session index (`verify --all`): one
  // line in *problems for each entry missing, extra or at the wrong time,
  // and for a count that differs. Nothing when the log has no time index.
  Status check_time_index(std::vector<std::string>* problems) const;

  // Every session id that has records, read from the events themselves.
  Status list_logged_sessions(std::vector<std::string>* out) const;

  // The checkpoint index of a session, in seq order.
  Status checkpoints(std::string_view session, std::vector<CheckpointEntry>* out) const;

  // The latest snapshot at or before `max_seq` whose frame checks out;
  // not_found if there is none. Corrupt frames are skipped, and counted in
  // *skipped when it is given.
  Status latest_snapshot(std::string_view session, uint64_t max_seq, SnapshotEntry* out,
                         uint64_t* skipped = nullptr) const;

  // Every snapshot of a session (for verify), with each frame's status.
  Status snapshots(std::string_view session, std::vector<std::pair<SnapshotEntry, Status>>* out) const;

  // Durable appends requested; synced writes the committer thread made for
  // the asynchronous ones (each carrying every append queued at that moment).
  uint64_t durable_appends() const;
  uint64_t durable_syncs() const;

 private:
  struct Impl;
  Status prepare(const AppendRequest& request, rocksdb::WriteBatch* batch);

  explicit EventLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// When a session last changed, as sessions_by_time orders it: the later of
// its updated_us and created_us.
int64_t session_time(const SessionMeta& meta);
// sessions_by_time's order: true if `a` comes before `b`.
bool newer_session(const SessionMeta& a, const SessionMeta& b);

// Iterates one session's records in seq order. Not thread-safe; must not
// outlive the EventLog that made it.
class EventCursor {
 public:
  virtual ~EventCursor() = default;

  virtual bool valid() const = 0;
  virtual void next() = 0;
  virtual uint64_t seq() const = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Decodes the current record; errors name the session and seq.
  virtual Status event(Event* out) const = 0;
  // The iterator's own error, once !valid().
  virtual Status status() const = 0;
};

// Names of the column families, for tools that open the database directly.
inline constexpr std::string_view kEventsFamily = "events";
inline constexpr std::string_view kSessionsFamily = "sessions";
inline constexpr std::string_view kCheckpointsFamily = "checkpoints";
inline constexpr std::string_view kSnapshotsFamily = "snapshots";
inline constexpr std::string_view kSessionsByTimeFamily = "sessions_by_time";

}  // namespace carapace
