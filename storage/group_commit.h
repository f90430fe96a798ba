// GroupCommitter: makes batches durable with as few WAL syncs as possible.
//
// Callers hand over a WriteBatch and a completion callback; one committer
// thread takes every batch queued so far, writes them as a single batch,
// syncs the WAL (DB::SyncWAL), and then completes them all. Writing and
// syncing apart, rather than one synced write, keeps RocksDB's write queue
// free during the fsync: other threads' buffered writes go on meanwhile. So
// a group is readable up to one fsync before it is durable, and completed
// only once it is. Concurrent durable commits from many
// sessions thus share one fsync (group commit), and no caller's thread ever
// blocks on the disk unless it chooses to wait. Batches are written in the
// order they were queued. After a failed write every later batch fails with
// the same error (the disk's state is unknown). An empty batch writes nothing
// and completes in order: a barrier. A caller that writes its batch itself
// (unsynced, from its own thread) asks only for the sync (submit_sync): its
// records are then in the WAL, ahead of anything it writes next, before the
// sync. Thread-safe.
//
// Internal to storage/: this header includes RocksDB.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace carapace {

class GroupCommitter {
 public:
  using Done = std::function<void(const rocksdb::Status&)>;

  // `db` and the handles must outlive the committer. `handles` maps a column
  // family id to its handle, for merging batches.
  GroupCommitter(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles);
  // Writes what is queued, then stops the thread.
  ~GroupCommitter();

  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Queues `batch`; `done` runs on the committer thread once it is durable (or failed).
  void submit(rocksdb::WriteBatch batch, Done done);
  // For a batch the caller has already written (unsynced): `done` runs on the
  // committer thread once a WAL sync that began after this call has ended
  // (or failed). Such requests share the sync of the group they join.
  void submit_sync(Done done);

  // A write made outside the committer failed: every later batch fails with
  // `s`, and nothing more is synced. RocksDB 7.8 aborts the process (an
  // assertion) when a write-ahead log file on which a write failed is synced
  // before a sync ever succeeded on it: a full disk would otherwise crash.
  void fail(const rocksdb::Status& s);

  // Number of synced writes so far, and of batches they carried.
  uint64_t syncs() const;
  uint64_t batches() const;

 private:
  struct Pending {
    rocksdb::WriteBatch batch;
    Done done;
    bool sync_only = false;  // written by the caller: only a sync is owed
  };

  void run();
  rocksdb::Status write_group(std::vector<Pending>& group);

  rocksdb::DB* db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  uint64_t syncs_ = 0;
  uint64_t batches_ = 0;
  rocksdb::Status failed_;  // the first failed write (committer thread only)
  std::atomic<bool> failed_outside_{false};
  rocksdb::Status outside_status_;  // guarded by mu_, set once failed_outside_
  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace carapace
