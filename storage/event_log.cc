#include "storage/event_log.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "base/crc32c.h"
#include "base/lib_log.h"
#include "events/record.h"
#include "storage/close_compaction.h"
#include "storage/db_directory.h"
#include "storage/db_lock.h"
#include "storage/db_options.h"
#include "storage/group_commit.h"
#include "storage/keys.h"
#include "storage/session_time_index.h"
#include "storage/wal_scan.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

enum Family : size_t { kDefault = 0, kEvents, kSessions, kCheckpoints, kSnapshots, kSessionsByTime, kFamilyCount };

Status from_rocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status();
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsNotFound()) return Status::not_found(msg);
  if (s.IsCorruption()) return Status::corruption(msg);
  if (s.IsInvalidArgument()) return Status::invalid_argument(msg);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return Status::busy(msg);
  if (s.IsNoSpace()) return Status::io_error(msg).with_detail(Status::Detail::kNoSpace);
  return Status::io_error(msg);
}

std::string where(std::string_view session, uint64_t seq) {
  return "session " + std::string(session) + " seq " + std::to_string(seq);
}

rocksdb::Slice slice(std::string_view v) { return rocksdb::Slice(v.data(), v.size()); }
std::string_view view(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Snapshot frame: masked crc32c(key || rest):fixed32 turn:varint state-bytes.
std::string frame_snapshot(std::string_view key, const SnapshotEntry& snap) {
  std::string value(4, '\0');
  wire::put_varint(value, snap.turn);
  value.append(snap.state);
  uint32_t crc =
      crc32c::extend(crc32c::extend(0, key.data(), key.size()), value.data() + 4, value.size() - 4);
  wire::store_fixed32_le(value.data(), crc32c::mask(crc));
  return value;
}

Status unframe_snapshot(std::string_view key, std::string_view value, SnapshotEntry* out) {
  if (value.size() < 5) return Status::corruption("snapshot frame truncated");
  uint32_t stored = crc32c::unmask(wire::load_fixed32_le(value.data()));
  uint32_t crc =
      crc32c::extend(crc32c::extend(0, key.data(), key.size()), value.data() + 4, value.size() - 4);
  if (stored != crc) return Status::corruption("snapshot checksum mismatch");
  std::string_view rest = value.substr(4);
  if (!wire::get_varint(rest, &out->turn)) return Status::corruption("snapshot turn does not decode");
  out->state.assign(rest);
  return Status();
}

// A writer closing with this many small files in a family (all of level 0,
// those of level 1 under kSmallTable) merges them (settle_before_close),
// up to the budget.
constexpr uint64_t kCloseCompactionTrigger = 8;
constexpr uint64_t kSmallTable = 4 << 20;
constexpr std::chrono::milliseconds kCloseCompactionBudget{3000};
// A writer closing with this much in its memtables writes them to files
// first: else every reader's open replays the write-ahead log (a secondary
// instance cannot keep what it replayed): 30 ms for the 2 MB of a
// 2,000-session `log synth`.
constexpr uint64_t kCloseFlushBytes = 256 << 10;

// The writers this process has open, by canonical path: the kernel does not
// report a process its own locks, and RocksDB's in-process refusal is only a
// message.
std::mutex open_writers_mu;
std::set<std::string> open_writers;

// A key as text: printable ASCII kept, every other byte as \xNN.
std::string printable_key(std::string_view key) {
  std::string out;
  for (unsigned char c : key.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (key.size() > 64) out += "...";
  return "'" + out + "'";
}

Status busy_writer(const std::string& path, pid_t holder) {
  std::string who = holder > 0 ? "another carapace process (pid " + std::to_string(holder) + ")"
                               : "this process";
  return Status::busy(who + " is writing to the event log at " + path +
                      "; wait for it to finish or stop it, or read with a command that only reads")
      .with_detail(Status::Detail::kLockHeld);
}

}  // namespace

struct EventLog::Impl {
  Options options;
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // indexed by Family
  std::shared_ptr<rocksdb::Cache> cache;
  std::string secondary_dir;  // readers only
  std::unique_ptr<GroupCommitter> committer;
  std::unique_ptr<rocksdb::Env> env;  // over options.file_system, when one is given
  std::string registered_writer;     // our entry in open_writers

  // Per-session write position, for writers: appends must continue it. The
  // session's lock is held from the seq check to the write (or the hand-off
  // to the committer, whose queue keeps order), so appends of one session
  // land in seq order.
  struct Writer {
    std::mutex mu;
    bool known = false;  // last_seq was read from the log
    uint64_t last_seq = 0;
    // The session's time index entry as this writer last wrote it, once
    // read (index_known): whether it has a session index entry, and the
    // time of its time index key (-1: its entry does not decode; no key to
    // replace).
    bool index_known = false;
    bool indexed = false;
    int64_t indexed_when = -1;
    uint32_t durable_in_flight = 0;  // batches of this session in the committer's queue
  };
  std::mutex writers_mu;
  std::unordered_map<std::string, std::shared_ptr<Writer>> writers;
  std::atomic<uint64_t> durable_appends{0};
  // Blocking durable appends being written right now.
  std::atomic<int> syncing{0};
  // The first failed write; every later append fails with it.
  std::mutex failed_mu;
  rocksdb::Status failed;

  // Null for kSessionsByTime in a log written before it (readers only).
  rocksdb::ColumnFamilyHandle* cf(Family f) const { return f < handles.size() ? handles[f] : nullptr; }
  // The log has its session time index, built (session_time_index.h).
  bool time_index = false;

  ~Impl() {
    committer.reset();  // drains queued durable appends
    settle_before_close();
    for (auto* h : handles) {
      if (h != nullptr) db->DestroyColumnFamilyHandle(h);
    }
    if (db != nullptr) {
      db->Close().PermitUncheckedError();
      delete db;
    }
    if (!secondary_dir.empty()) {
      std::error_code ignored;
      fs::remove_all(secondary_dir, ignored);
    }
    if (!registered_writer.empty()) {
      std::lock_guard lock(open_writers_mu);
      open_writers.erase(registered_writer);
    }
  }

  // A writer that closes with small files piling up (level 0's, and level
  // 1's under kSmallTable) merges them into level 1 before it closes. A CLI command is
  // a short writer: its open flushes what the last one left in the
  // write-ahead log into a small file per family, and RocksDB's
  // own compactions either never ran before it exited or moved the files
  // down whole (a "trivial move": one session's keys overlap no other's),
  // so a home used by thousands of commands kept thousands of files, all of
  // which every reader opens (docs/architecture.md, "Compaction"). The merge
  // rewrites only files under kSmallTable, so a byte is rewritten a few
  // times at most; it stops at the close budget's end (cancelled by the
  // close; the next writer does it).
  void settle_before_close() {
    if (registered_writer.empty() || options.scratch || db == nullptr) return;
    carapace::settle_before_close(db, handles,
                                  CloseCompactionOptions{.trigger_files = kCloseCompactionTrigger,
                                                         .small_table_bytes = kSmallTable,
                                                         .flush_bytes = kCloseFlushBytes,
                                                         .budget = kCloseCompactionBudget});
  }

  Status read_last_seq(std::string_view session, uint64_t* seq) const {
    rocksdb::ReadOptions ro;
    std::string lower = keys::session_prefix(session);
    rocksdb::Slice lower_slice(lower);
    ro.iterate_lower_bound = &lower_slice;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf(kEvents)));
    it->SeekForPrev(keys::seq_key(session, UINT64_MAX));
    *seq = 0;
    if (it->Valid()) {
      std::string_view id;
      if (keys::parse_seq_key(view(it->key()), &id, seq) && id == session) return Status();
      *seq = 0;
    }
    return from_rocks(it->status(), "reading the last seq of session " + std::string(session));
  }

  std::shared_ptr<Writer> writer_for(std::string_view session) {
    std::lock_guard lock(writers_mu);
    auto& w = writers[std::string(session)];
    if (!w) w = std::make_shared<Writer>();
    return w;
  }

  Status sticky_failure() {
    std::lock_guard lock(failed_mu);
    if (failed.ok()) return Status();
    return from_rocks(failed, "the event log stopped accepting writes after a failed write; reopen it");
  }

  void note_failure(const rocksdb::Status& s) {
    if (s.ok()) return;
    {
      std::lock_guard lock(failed_mu);
      if (failed.ok()) failed = s;
    }
    // The write-ahead log may have seen the error: the committer must not sync it.
    if (committer) committer->fail(s);
  }

  // Adds to `batch` the time index's share of the meta `request` writes: the
  // entry at its new time, the old one deleted, the count up for a session
  // new to the index. The caller holds w.mu, from here to the write.
  Status index_by_time(const AppendRequest& request, Writer& w, rocksdb::WriteBatch* batch) {
    if (request.meta == nullptr || !time_index) return Status();
    if (!w.index_known) {
      std::string value;
      rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf(kSessions), slice(request.session), &value);
      if (!s.ok() && !s.IsNotFound()) return from_rocks(s, "reading the index entry of " + std::string(request.session));
      SessionMeta old;
      w.indexed = s.ok();
      w.indexed_when = s.ok() && codec::decode(value, &old) ? time_index::when(old) : -1;
      w.index_known = true;
    }
    const int64_t when = time_index::when(*request.meta);
    if (w.indexed && w.indexed_when == when) return Status();
    if (w.indexed && w.indexed_when >= 0) {
      CARAPACE_RETURN_IF_ERROR(
          from_rocks(batch->Delete(cf(kSessionsByTime), time_index::key(w.indexed_when, request.session)), "batching"));
    }
    if (!w.indexed) {
      CARAPACE_RETURN_IF_ERROR(
          from_rocks(batch->Merge(cf(kDefault), slice(time_index::kCountKey), time_index::count_value(1)), "batching"));
    }
    CARAPACE_RETURN_IF_ERROR(
        from_rocks(batch->Put(cf(kSessionsByTime), time_index::key(when, request.session), rocksdb::Slice()), "batching"));
    w.indexed = true;
    w.indexed_when = when;
    return Status();
  }

  // Builds the time index of a log written before it: one entry per session
  // index entry that decodes, the count of all of them, and the mark, in one
  // synced batch. A writer does it on open; until then readers sort.
  Status build_time_index() {
    std::string mark;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf(kDefault), slice(time_index::kBuiltKey), &mark);
    if (s.ok()) {
      time_index = true;
      return Status();
    }
    if (!s.IsNotFound()) return from_rocks(s, "reading the session time index's mark");
    rocksdb::WriteBatch batch;
    int64_t count = 0;
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf(kSessions)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++count;
      SessionMeta meta;
      if (!keys::validate_session_id(view(it->key())).ok() || !codec::decode(view(it->value()), &meta)) continue;
      CARAPACE_RETURN_IF_ERROR(from_rocks(
          batch.Put(cf(kSessionsByTime), time_index::key(time_index::when(meta), view(it->key())), rocksdb::Slice()),
          "batching"));
    }
    CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading the session index"));
    it.reset();
    CARAPACE_RETURN_IF_ERROR(
        from_rocks(batch.Put(cf(kDefault), slice(time_index::kCountKey), time_index::count_value(count)), "batching"));
    CARAPACE_RETURN_IF_ERROR(from_rocks(batch.Put(cf(kDefault), slice(time_index::kBuiltKey), "1"), "batching"));
    rocksdb::WriteOptions wo;
    wo.sync = !options.scratch;
    CARAPACE_RETURN_IF_ERROR(from_rocks(db->Write(wo, &batch), "building the session time index"));
    time_index = true;
    return Status();
  }

  // Adds to `batch` the removal of `session` from the time index: its entry
  // (every entry with its id, if its meta does not decode) and one off the
  // count, if it has a session index entry.
  Status unindex_by_time(std::string_view session, rocksdb::WriteBatch* batch) {
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf(kSessions), slice(session), &value);
    if (s.IsNotFound()) return Status();
    CARAPACE_RETURN_IF_ERROR(from_rocks(s, "reading the index entry of " + std::string(session)));
    SessionMeta meta;
    if (codec::decode(value, &meta)) {
      CARAPACE_RETURN_IF_ERROR(
          from_rocks(batch->Delete(cf(kSessionsByTime), time_index::key(time_index::when(meta), session)), "batching"));
    } else {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf(kSessionsByTime)));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        int64_t when = 0;
        std::string_view id;
        if (time_index::parse_key(view(it->key()), &when, &id) && id == session) {
          CARAPACE_RETURN_IF_ERROR(from_rocks(batch->Delete(cf(kSessionsByTime), it->key()), "batching"));
        }
      }
      CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading the session time index"));
    }
    return from_rocks(batch->Merge(cf(kDefault), slice(time_index::kCountKey), time_index::count_value(-1)),
                      "batching");
  }

  // Checks that `request` continues its session's log; the caller holds w.mu.
  Status check_continues(const AppendRequest& request, Writer& w) {
    const auto& events = request.events;
    if (!w.known) {
      CARAPACE_RETURN_IF_ERROR(read_last_seq(request.session, &w.last_seq));
      w.known = true;
    }
    if (!events.empty() && events.front().seq != w.last_seq + 1) {
      return Status::invalid_argument("append to session " + std::string(request.session) + " at seq " +
                                      std::to_string(events.front().seq) + ", but its log ends at seq " +
                                      std::to_string(w.last_seq) + " (is another writer appending to it?)");
    }
    return Status();
  }

  // A queued batch of `w`'s session completed: after a failure its seqs may or
  // may not be on disk, so the position is read again next time.
  void complete_queued(Writer& w, const rocksdb::Status& s) {
    note_failure(s);
    std::lock_guard lock(w.mu);
    if (w.durable_in_flight > 0) --w.durable_in_flight;
    if (!s.ok()) w.known = w.index_known = false;
  }

  Status build_batch(const AppendRequest& request, rocksdb::WriteBatch* batch) const {
    const auto& events = request.events;
    for (size_t i = 1; i < events.size(); ++i) {
      if (events[i].seq != events[i - 1].seq + 1) {
        return Status::invalid_argument("append to session " + std::string(request.session) + ": seq " +
                                        std::to_string(events[i].seq) + " follows " +
                                        std::to_string(events[i - 1].seq) + " in one batch");
      }
    }
    std::string key;
    std::string value;
    for (const Event& e : events) {
      key = keys::seq_key(request.session, e.seq);
      value.clear();
      encode_record(key, e, &value);
      CARAPACE_RETURN_IF_ERROR(from_rocks(batch->Put(cf(kEvents), key, value), "batching"));
      if (request.event_bytes != nullptr) *request.event_bytes += value.size();
    }
    for (const CheckpointEntry& c : request.checkpoints) {
      bool found = !events.empty() && c.seq >= events.front().seq && c.seq <= events.back().seq &&
                   std::holds_alternative<TurnCommitted>(events[c.seq - events.front().seq].body);
      if (!found) {
        return Status::invalid_argument("checkpoint entry at seq " + std::to_string(c.seq) +
                                        " is not a turn.committed of this append");
      }
      value.clear();
      codec::encode(value, c);
      key = keys::seq_key(request.session, c.seq);
      CARAPACE_RETURN_IF_ERROR(from_rocks(batch->Put(cf(kCheckpoints), key, value), "batching"));
    }
    if (request.meta != nullptr) {
      value.clear();
      codec::encode(value, *request.meta);
      CARAPACE_RETURN_IF_ERROR(
          from_rocks(batch->Put(cf(kSessions), slice(request.session), value), "batching"));
    }
    return Status();
  }
};

EventLog::EventLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventLog::~EventLog() = default;

const std::string& EventLog::path() const { return impl_->options.path; }
EventLog::Mode EventLog::mode() const { return impl_->options.mode; }

Status EventLog::open(const Options& options, std::unique_ptr<EventLog>* out) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const bool writer = options.mode == Mode::kWriter;

  LogDbOptions tuned = log_db_options(writer, options.block_cache_bytes, options.write_buffer_bytes);
  rocksdb::DBOptions db_options = tuned.db;
  impl->cache = tuned.block_cache;

  std::vector<rocksdb::ColumnFamilyDescriptor> families = log_families(tuned);

  std::string damage;
  DbDirectoryState state = inspect_db_directory(options.path, &damage);
  if (state == DbDirectoryState::kDamaged) {
    return Status::corruption("the event log at " + options.path + " is damaged: " + damage +
                              ". Nothing was opened or written; `carapace repair` salvages what it can");
  }
  if (state == DbDirectoryState::kUnreadable) {
    return Status::io_error(damage + "; the log belongs to another user, or its permissions were changed");
  }
  if (state != DbDirectoryState::kDatabase) {
    if (!writer || !options.create_if_missing) return Status::not_found("no event log at " + options.path);
    // Made whole in a temporary directory, then renamed into place: a crash
    // leaves no log or a complete one, never a half-made one.
    Status created = create_db_atomically(options.path, [&](const std::string& dir) {
      rocksdb::DBOptions create_options = db_options;
      create_options.create_if_missing = true;
      create_options.create_missing_column_families = true;
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      rocksdb::DB* db = nullptr;
      rocksdb::Status cs = rocksdb::DB::Open(create_options, dir, families, &handles, &db);
      if (!cs.ok()) return from_rocks(cs, "creating the event log at " + dir);
      for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
      cs = db->Close();
      delete db;
      return from_rocks(cs, "closing the new event log at " + dir);
    });
    CARAPACE_RETURN_IF_ERROR(created);
  }
  if (writer) {
    std::error_code ec;
    std::string canonical = fs::weakly_canonical(options.path, ec).string();
    if (ec) canonical = options.path;
    std::lock_guard lock(open_writers_mu);
    if (open_writers.count(canonical)) return busy_writer(options.path, 0);
    if (pid_t holder = lock_holder(options.path, false); holder > 0) return busy_writer(options.path, holder);
    open_writers.insert(canonical);
    impl->registered_writer = canonical;
  }
  if (options.file_system) {
    impl->env = rocksdb::NewCompositeEnv(options.file_system);
    db_options.env = impl->env.get();
  }

  rocksdb::Status s;
  if (writer) {
    s = rocksdb::DB::Open(db_options, options.path, families, &impl->handles, &impl->db);
  } else {
    std::random_device rd;
    impl->secondary_dir = (fs::temp_directory_path() /
                           ("carapace-reader-" + std::to_string(::getpid()) + "-" + std::to_string(rd())))
                              .string();
    s = rocksdb::DB::OpenAsSecondary(db_options, options.path, impl->secondary_dir, families, &impl->handles,
                                     &impl->db);
    if (s.IsInvalidArgument()) {
      // A log no writer of this build has opened yet has no time index.
      impl->handles.clear();
      families = log_families(tuned, /*with_time_index=*/false);
      s = rocksdb::DB::OpenAsSecondary(db_options, options.path, impl->secondary_dir, families, &impl->handles,
                                       &impl->db);
    }
  }
  if (!s.ok()) {
    impl->handles.clear();
    impl->db = nullptr;
    // Another process took the lock between the probe and the open.
    if (pid_t holder = writer && s.IsIOError() ? lock_holder(options.path, false) : 0; holder > 0)
      return busy_writer(options.path, holder);
    if (s.IsCorruption()) {
      // The WAL is damaged before its tail (db_options.h's recovery rule):
      // name the file and offset; nothing was dropped or written.
      std::string where = describe_wal_damage(options.path);
      return Status::corruption("the event log at " + options.path + " is damaged: " +
                                (where.empty() ? s.ToString() : "its write-ahead log " + where) +
                                ". Nothing was opened or written; `carapace repair` salvages what it can");
    }
    return from_rocks(s, "opening the event log at " + options.path);
  }
  if (writer) {
    CARAPACE_RETURN_IF_ERROR(impl->build_time_index());
    impl->committer = std::make_unique<GroupCommitter>(impl->db, impl->handles);
  } else if (impl->cf(kSessionsByTime) != nullptr) {
    std::string mark;
    rocksdb::Status built =
        impl->db->Get(rocksdb::ReadOptions(), impl->cf(kDefault), slice(time_index::kBuiltKey), &mark);
    impl->time_index = built.ok();
  }
  out->reset(new EventLog(std::move(impl)));
  return Status();
}

// Checks the request and builds its batch.
Status EventLog::prepare(const AppendRequest& request, rocksdb::WriteBatch* batch) {
  if (impl_->options.mode != Mode::kWriter) {
    return Status::invalid_argument("the event log at " + path() + " is open read-only");
  }
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(request.session));
  if (request.events.empty() && request.meta == nullptr) {
    return Status::invalid_argument("append to session " + std::string(request.session) +
                                    " has nothing to write");
  }
  CARAPACE_RETURN_IF_ERROR(impl_->sticky_failure());
  return impl_->build_batch(request, batch);
}

Status EventLog::append(const AppendRequest& request) {
  rocksdb::WriteBatch batch;
  CARAPACE_RETURN_IF_ERROR(prepare(request, &batch));
  std::string session(request.session);
  const bool synced = request.durability == Durability::kSynced;
  std::shared_ptr<Impl::Writer> held = impl_->writer_for(session);
  Impl::Writer& w = *held;
  std::unique_lock lock(w.mu);
  CARAPACE_RETURN_IF_ERROR(impl_->check_continues(request, w));
  CARAPACE_RETURN_IF_ERROR(impl_->index_by_time(request, w, &batch));
  if (synced) ++impl_->durable_appends;
  // A durable append that arrives while another is syncing joins the
  // committer's next group instead of queueing for its own sync; and any
  // append of a session with durable appends queued goes behind them.
  struct SyncingGuard {
    std::atomic<int>* counter;
    ~SyncingGuard() {
      if (counter != nullptr) --*counter;
    }
  } guard{synced ? &impl_->syncing : nullptr};
  bool others_syncing = synced && impl_->syncing.fetch_add(1) > 0;
  if (w.durable_in_flight > 0 || others_syncing) {
    ++w.durable_in_flight;
    if (!request.events.empty()) w.last_seq = request.events.back().seq;
    std::promise<Status> promise;
    Impl* impl = impl_.get();
    impl_->committer->submit(std::move(batch), [&, impl](const rocksdb::Status& s) {
      impl->complete_queued(w, s);
      promise.set_value(from_rocks(s, "append to session " + session));
    });
    lock.unlock();
    return promise.get_future().get();
  }
  // Alone: written from this thread, without a hand-off to the committer.
  rocksdb::WriteOptions wo;
  wo.sync = synced && !impl_->options.scratch;
  wo.disableWAL = impl_->options.scratch;  // thrown away: the memtable is enough
  rocksdb::Status s = impl_->db->Write(wo, &batch);
  impl_->note_failure(s);
  if (s.ok() && !request.events.empty()) w.last_seq = request.events.back().seq;
  if (!s.ok()) w.known = w.index_known = false;
  return from_rocks(s, "append to session " + session);
}

void EventLog::append_async(const AppendRequest& request, std::function<void(Status)> done) {
  if (impl_->options.inline_durable_appends) return done(append(request));
  rocksdb::WriteBatch batch;
  Status prepared = prepare(request, &batch);
  if (!prepared.ok()) return done(prepared);
  std::string session(request.session);
  std::shared_ptr<Impl::Writer> held = impl_->writer_for(session);
  Impl::Writer& w = *held;
  std::unique_lock lock(w.mu);
  Status continues = impl_->check_continues(request, w);
  if (continues.ok()) continues = impl_->index_by_time(request, w, &batch);
  if (!continues.ok()) {
    lock.unlock();
    return done(continues);
  }
  const bool synced = request.durability == Durability::kSynced;
  if (synced) ++impl_->durable_appends;
  if (w.durable_in_flight > 0) {
    // Behind batches of this session still queued (a durable append() from
    // another thread): queued too, so that they land in order.
    ++w.durable_in_flight;
    if (!request.events.empty()) w.last_seq = request.events.back().seq;
    Impl* impl = impl_.get();
    impl_->committer->submit(std::move(batch),
                             [impl, held, session, done = std::move(done)](const rocksdb::Status& s) {
                               impl->complete_queued(*held, s);
                               done(from_rocks(s, "durable append to session " + session));
                             });
    return;
  }
  // Written from this thread, unsynced: the records are in the WAL before
  // this returns, ahead of whatever the session writes next, which need not
  // wait for the sync. A durable one then waits for the committer's next
  // sync, shared with every other session's.
  rocksdb::WriteOptions wo;
  wo.disableWAL = impl_->options.scratch;
  rocksdb::Status s = impl_->db->Write(wo, &batch);
  impl_->note_failure(s);
  if (s.ok() && !request.events.empty()) w.last_seq = request.events.back().seq;
  if (!s.ok()) w.known = w.index_known = false;
  lock.unlock();
  if (!s.ok() || !synced || impl_->options.scratch)
    return done(from_rocks(s, "append to session " + session));
  Impl* impl = impl_.get();
  impl_->committer->submit_sync([impl, session, done = std::move(done)](const rocksdb::Status& synced_s) {
    impl->note_failure(synced_s);
    done(from_rocks(synced_s, "durable append to session " + session));
  });
}

void EventLog::forget_writer(std::string_view session) {
  std::lock_guard lock(impl_->writers_mu);
  auto it = impl_->writers.find(std::string(session));
  if (it == impl_->writers.end() || it->second.use_count() > 1) return;  // in use
  std::unique_lock busy(it->second->mu, std::try_to_lock);
  if (!busy.owns_lock() || it->second->durable_in_flight > 0) return;
  busy.unlock();
  impl_->writers.erase(it);
}

void EventLog::drain() {
  if (!impl_->committer) return;
  std::promise<void> drained;
  impl_->committer->submit(rocksdb::WriteBatch(), [&](const rocksdb::Status&) { drained.set_value(); });
  drained.get_future().wait();
}

Status EventLog::remove_session(std::string_view session) {
  if (impl_->options.mode != Mode::kWriter) {
    return Status::invalid_argument("the event log at " + path() + " is open read-only");
  }
  const std::string from = keys::session_prefix(session), to = keys::session_upper_bound(session);
  rocksdb::WriteBatch batch;
  for (Family f : {kEvents, kCheckpoints, kSnapshots}) {
    CARAPACE_RETURN_IF_ERROR(from_rocks(batch.DeleteRange(impl_->cf(f), from, to), "batching"));
  }
  CARAPACE_RETURN_IF_ERROR(from_rocks(batch.Delete(impl_->cf(kSessions), slice(session)), "batching"));
  if (impl_->time_index) CARAPACE_RETURN_IF_ERROR(impl_->unindex_by_time(session, &batch));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  CARAPACE_RETURN_IF_ERROR(from_rocks(impl_->db->Write(wo, &batch), "removing session " + std::string(session)));
  std::lock_guard lock(impl_->writers_mu);
  impl_->writers.erase(std::string(session));
  return Status();
}

Status EventLog::put_snapshot(std::string_view session, const SnapshotEntry& snapshot) {
  if (impl_->options.mode != Mode::kWriter) {
    return Status::invalid_argument("the event log at " + path() + " is open read-only");
  }
  std::string key = keys::seq_key(session, snapshot.seq);
  std::string value = frame_snapshot(key, snapshot);
  rocksdb::WriteOptions wo;
  rocksdb::Status put = impl_->db->Put(wo, impl_->cf(kSnapshots), key, value);
  impl_->note_failure(put);
  CARAPACE_RETURN_IF_ERROR(from_rocks(put, "writing a snapshot of session " + std::string(session)));
  // Snapshots are a cache, not history: keep the newest two (the one before
  // the newest covers a damaged newest), so that finding the newest stays cheap.
  rocksdb::ReadOptions ro;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSnapshots)));
  std::string lower = keys::session_prefix(session);
  it->SeekForPrev(keys::seq_key(session, snapshot.seq - 1));
  if (it->Valid() && it->key().starts_with(lower)) {
    std::string keep_from(it->key().data(), it->key().size());
    if (keep_from > keys::seq_key(session, 0)) {
      rocksdb::Status pruned =
          impl_->db->DeleteRange(wo, impl_->cf(kSnapshots), keys::seq_key(session, 0), keep_from);
      impl_->note_failure(pruned);
      return from_rocks(pruned, "pruning old snapshots of session " + std::string(session));
    }
  }
  return from_rocks(it->status(), "pruning old snapshots of session " + std::string(session));
}

Status EventLog::refresh() {
  if (impl_->options.mode != Mode::kReader) return Status();
  return from_rocks(impl_->db->TryCatchUpWithPrimary(), "catching up with the writer");
}

namespace {

class RocksCursor : public EventCursor {
 public:
  RocksCursor(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view session, uint64_t from_seq)
      : session_(session), upper_(keys::session_upper_bound(session)), upper_slice_(upper_) {
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice_;
    ro.readahead_size = 1 << 20;
    // A cursor reads its blocks once, in order: kept out of the block cache,
    // which they would fill (and which a short process then tears down).
    ro.fill_cache = false;
    it_.reset(db->NewIterator(ro, cf));
    it_->Seek(keys::seq_key(session, from_seq));
    parse();
  }

  bool valid() const override { return valid_; }
  void next() override {
    it_->Next();
    parse();
  }
  uint64_t seq() const override { return seq_; }
  std::string_view key() const override { return view(it_->key()); }
  std::string_view value() const override { return view(it_->value()); }
  Status event(Event* out) const override {
    Status s = decode_record(key(), value(), seq_, out);
    return s.ok() ? s : s.with_context(where(session_, seq_));
  }
  Status status() const override {
    if (!bad_key_.empty()) return Status::corruption(bad_key_);
    return from_rocks(it_->status(), "reading session " + session_);
  }

 private:
  void parse() {
    valid_ = it_->Valid();
    if (!valid_) return;
    std::string_view id;
    if (!keys::parse_seq_key(key(), &id, &seq_) || id != session_) {
      bad_key_ = "malformed key of " + std::to_string(key().size()) + " bytes in session " + session_;
      valid_ = false;
    }
  }

  std::string session_;
  std::string upper_;
  rocksdb::Slice upper_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
  bool valid_ = false;
  uint64_t seq_ = 0;
  std::string bad_key_;
};

}  // namespace

std::unique_ptr<EventCursor> EventLog::cursor(std::string_view session, uint64_t from_seq) const {
  return std::make_unique<RocksCursor>(impl_->db, impl_->cf(kEvents), session, from_seq);
}

Status EventLog::read(std::string_view session, uint64_t from_seq, uint64_t to_seq,
                      std::vector<Event>* out) const {
  auto c = cursor(session, from_seq);
  for (; c->valid() && c->seq() <= to_seq; c->next()) {
    Event e;
    CARAPACE_RETURN_IF_ERROR(c->event(&e));
    out->push_back(std::move(e));
  }
  return c->status();
}

Status EventLog::last_seq(std::string_view session, uint64_t* seq) const {
  return impl_->read_last_seq(session, seq);
}

Status EventLog::get_meta(std::string_view session, SessionMeta* out) const {
  std::string value;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(kSessions), slice(session), &value);
  if (s.IsNotFound()) return Status::not_found("no session '" + std::string(session) + "'");
  CARAPACE_RETURN_IF_ERROR(from_rocks(s, "reading the index entry of " + std::string(session)));
  SessionMeta meta;
  if (!codec::decode(value, &meta)) {
    return Status::corruption("index entry of session " + std::string(session) + " does not decode");
  }
  meta.id = std::string(session);
  *out = std::move(meta);
  return Status();
}

Status EventLog::list_sessions(std::vector<SessionMeta>* out, std::vector<std::string>* unreadable) const {
  uint64_t estimate = 0;
  if (impl_->db->GetIntProperty(impl_->cf(kSessions), "rocksdb.estimate-num-keys", &estimate)) {
    out->reserve(out->size() + std::min<uint64_t>(estimate, 10'000'000));
  }
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // a scan of every entry, read once
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSessions)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string key = it->key().ToString();
    std::string why;
    SessionMeta meta;
    if (!keys::validate_session_id(key).ok()) {
      why = "the key is not a session id";
    } else if (!codec::decode(view(it->value()), &meta)) {
      why = "its " + std::to_string(it->value().size()) + "-byte entry does not decode";
    }
    if (!why.empty()) {
      std::string printable = printable_key(key);
      if (unreadable == nullptr) return Status::corruption("session index entry " + printable + ": " + why);
      unreadable->push_back(printable + ": " + why);
      continue;
    }
    meta.id = std::move(key);
    out->push_back(std::move(meta));
  }
  return from_rocks(it->status(), "listing sessions");
}

int64_t session_time(const SessionMeta& meta) { return time_index::when(meta); }

bool newer_session(const SessionMeta& a, const SessionMeta& b) {
  const int64_t ta = session_time(a), tb = session_time(b);
  return ta != tb ? ta > tb : a.id > b.id;
}

Status EventLog::sessions_by_time(int64_t since_us, const std::function<bool(SessionMeta&)>& visit,
                                  std::vector<std::string>* unreadable) const {
  if (!impl_->time_index) {
    std::vector<SessionMeta> all;
    CARAPACE_RETURN_IF_ERROR(list_sessions(&all, unreadable));
    std::vector<SessionMeta*> order;
    order.reserve(all.size());
    for (auto& m : all) order.push_back(&m);
    std::sort(order.begin(), order.end(), [](const SessionMeta* a, const SessionMeta* b) { return newer_session(*a, *b); });
    for (SessionMeta* m : order) {
      if (session_time(*m) < since_us || !visit(*m)) break;
    }
    return Status();
  }
  // Newest first from the end of the time index, down to since_us. Each
  // entry is checked against the session's meta: one that does not match it
  // (its session was removed or moved on by a write this index did not see)
  // is passed over.
  const std::string lower = time_index::key(since_us, "");
  const rocksdb::Slice lower_slice(lower);
  rocksdb::ReadOptions ro;
  ro.iterate_lower_bound = &lower_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSessionsByTime)));
  std::string value;
  for (it->SeekToLast(); it->Valid(); it->Prev()) {
    int64_t when = 0;
    std::string_view id;
    if (!time_index::parse_key(view(it->key()), &when, &id)) {
      std::string entry = "time index entry " + printable_key(view(it->key())) + ": not a time and a session id";
      if (unreadable == nullptr) return Status::corruption(entry);
      unreadable->push_back(std::move(entry));
      continue;
    }
    rocksdb::Status got = impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(kSessions), slice(id), &value);
    if (got.IsNotFound()) continue;
    CARAPACE_RETURN_IF_ERROR(from_rocks(got, "reading the index entry of " + std::string(id)));
    SessionMeta meta;
    if (!codec::decode(value, &meta)) {
      std::string entry = printable_key(id) + ": its " + std::to_string(value.size()) + "-byte entry does not decode";
      if (unreadable == nullptr) return Status::corruption("session index entry " + entry);
      unreadable->push_back(std::move(entry));
      continue;
    }
    if (time_index::when(meta) != when) continue;
    meta.id = std::string(id);
    if (!visit(meta)) break;
  }
  return from_rocks(it->status(), "reading the session time index");
}

Status EventLog::session_count(uint64_t* out) const {
  if (impl_->time_index) {
    std::string value;
    rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(kDefault), slice(time_index::kCountKey), &value);
    CARAPACE_RETURN_IF_ERROR(from_rocks(s, "reading the session count"));
    int64_t n = 0;
    if (!time_index::parse_count(value, &n) || n < 0) {
      return Status::corruption("the session count (" + std::to_string(value.size()) + " bytes) is not a count");
    }
    *out = static_cast<uint64_t>(n);
    return Status();
  }
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSessions)));
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  *out = n;
  return from_rocks(it->status(), "counting sessions");
}

Status EventLog::check_time_index(std::vector<std::string>* problems) const {
  if (!impl_->time_index) return Status();
  // id -> when; -1: its entry does not decode (list_sessions reports it), so
  // any time of its own entry is taken.
  std::map<std::string, int64_t, std::less<>> expected;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSessions)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    SessionMeta meta;
    expected[it->key().ToString()] = codec::decode(view(it->value()), &meta) ? time_index::when(meta) : -1;
  }
  CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading the session index"));
  it.reset(impl_->db->NewIterator(ro, impl_->cf(kSessionsByTime)));
  std::set<std::string, std::less<>> found;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    int64_t when = 0;
    std::string_view id;
    if (!time_index::parse_key(view(it->key()), &when, &id)) {
      problems->push_back("entry " + printable_key(view(it->key())) + " is not a time and a session id");
      continue;
    }
    auto e = expected.find(id);
    if (e == expected.end()) {
      problems->push_back("entry for " + std::string(id) + " at " + std::to_string(when) + ", which has no session index entry");
    } else if (e->second >= 0 && e->second != when) {
      problems->push_back("entry for " + std::string(id) + " at " + std::to_string(when) + ", but it last changed at " +
                          std::to_string(e->second));
    } else {
      found.insert(std::string(id));
    }
  }
  CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading the session time index"));
  for (const auto& [id, when] : expected) {
    if (when >= 0 && !found.count(id)) problems->push_back("no entry for " + id + ", which last changed at " + std::to_string(when));
  }
  uint64_t counted = 0;
  Status count = session_count(&counted);
  if (!count.ok()) {
    problems->push_back(count.message());
  } else if (counted != expected.size()) {
    problems->push_back("the session count is " + std::to_string(counted) + ", but the session index has " +
                        std::to_string(expected.size()) + " entries");
  }
  return Status();
}

Status EventLog::list_logged_sessions(std::vector<std::string>* out) const {
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(kEvents)));
  it->SeekToFirst();
  while (it->Valid()) {
    std::string_view id;
    uint64_t seq;
    if (!keys::parse_seq_key(view(it->key()), &id, &seq)) {
      return Status::corruption("malformed event key of " + std::to_string(it->key().size()) + " bytes");
    }
    out->emplace_back(id);
    it->Seek(keys::session_upper_bound(id));  // jump to the next session
  }
  return from_rocks(it->status(), "listing logged sessions");
}

Status EventLog::checkpoints(std::string_view session, std::vector<CheckpointEntry>* out) const {
  rocksdb::ReadOptions ro;
  std::string upper = keys::session_upper_bound(session);
  rocksdb::Slice upper_slice(upper);
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kCheckpoints)));
  for (it->Seek(keys::session_prefix(session)); it->Valid(); it->Next()) {
    CheckpointEntry entry;
    std::string_view id;
    if (!keys::parse_seq_key(view(it->key()), &id, &entry.seq) || id != session ||
        !codec::decode(view(it->value()), &entry)) {
      return Status::corruption("checkpoint index entry of session " + std::string(session) +
                                " does not decode");
    }
    out->push_back(entry);
  }
  return from_rocks(it->status(), "reading checkpoints of " + std::string(session));
}

Status EventLog::latest_snapshot(std::string_view session, uint64_t max_seq, SnapshotEntry* out,
                                 uint64_t* skipped) const {
  rocksdb::ReadOptions ro;
  std::string lower = keys::session_prefix(session);
  rocksdb::Slice lower_slice(lower);
  ro.iterate_lower_bound = &lower_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSnapshots)));
  for (it->SeekForPrev(keys::seq_key(session, max_seq)); it->Valid(); it->Prev()) {
    std::string_view id;
    uint64_t seq;
    if (!keys::parse_seq_key(view(it->key()), &id, &seq) || id != session) break;
    SnapshotEntry entry;
    entry.seq = seq;
    if (unframe_snapshot(view(it->key()), view(it->value()), &entry).ok()) {
      *out = std::move(entry);
      return Status();
    }
    if (skipped != nullptr) ++*skipped;
  }
  CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading snapshots of " + std::string(session)));
  return Status::not_found("no snapshot of session " + std::string(session));
}

Status EventLog::snapshots(std::string_view session,
                           std::vector<std::pair<SnapshotEntry, Status>>* out) const {
  rocksdb::ReadOptions ro;
  std::string upper = keys::session_upper_bound(session);
  rocksdb::Slice upper_slice(upper);
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(kSnapshots)));
  for (it->Seek(keys::session_prefix(session)); it->Valid(); it->Next()) {
    SnapshotEntry entry;
    std::string_view id;
    if (!keys::parse_seq_key(view(it->key()), &id, &entry.seq) || id != session) {
      return Status::corruption("malformed snapshot key in session " + std::string(session));
    }
    Status s = unframe_snapshot(view(it->key()), view(it->value()), &entry);
    out->emplace_back(std::move(entry), std::move(s));
  }
  return from_rocks(it->status(), "reading snapshots of " + std::string(session));
}

uint64_t EventLog::durable_appends() const { return impl_->durable_appends.load(); }
uint64_t EventLog::durable_syncs() const { return impl_->committer ? impl_->committer->syncs() : 0; }

bool written_by_this_process(const std::string& dir) {
  std::error_code ec;
  std::string canonical = fs::weakly_canonical(dir, ec).string();
  if (ec) canonical = dir;
  std::lock_guard lock(open_writers_mu);
  return open_writers.count(canonical) != 0;
}

}  // namespace carapace
