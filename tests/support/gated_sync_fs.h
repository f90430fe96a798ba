// GatedSyncFs: a RocksDB file system over the real one whose WAL syncs can
// be held. While the gate is closed, every sync of a WAL file (*.log) waits
// until it opens; everything else passes straight through (a write-back
// hint, RangeSync, is not a sync). It shows what a writer does while its
// sync is slow: what it may write meanwhile, what it must wait for. It also
// counts the writes to WAL files (one for each write batch RocksDB logs).
// Thread-safe.
#pragma once

#include <rocksdb/file_system.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace carapace::testing {

class GatedSyncFs : public rocksdb::FileSystemWrapper {
 public:
  GatedSyncFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "GatedSyncFs"; }

  void close_gate() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void open_gate() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    changed_.notify_all();
  }
  // Waits up to `timeout` until `n` WAL syncs wait at the gate.
  bool wait_for_held(int n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return held_ >= n; });
  }
  int held() {
    std::lock_guard lock(mu_);
    return held_;
  }
  // Appends to WAL files so far.
  uint64_t wal_appends() const { return wal_appends_.load(); }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return wrap(f, target()->NewWritableFile(f, options, r, dbg), r);
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    return wrap(f, target()->ReopenWritableFile(f, options, r, dbg), r);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    return wrap(f, target()->ReuseWritableFile(f, old, options, r, dbg), r);
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> t, GatedSyncFs* fs)
        : FSWritableFileOwnerWrapper(std::move(t)), fs_(fs) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
      ++fs_->wal_appends_;
      return target()->Append(data, o, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* dbg) override {
      ++fs_->wal_appends_;
      return target()->Append(data, o, info, dbg);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
      fs_->pass();
      return target()->Sync(o, dbg);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
      fs_->pass();
      return target()->Fsync(o, dbg);
    }

   private:
    GatedSyncFs* fs_;
  };

  rocksdb::IOStatus wrap(const std::string& f, rocksdb::IOStatus s,
                         std::unique_ptr<rocksdb::FSWritableFile>* r) {
    const bool wal = f.size() > 4 && f.compare(f.size() - 4, 4, ".log") == 0;
    if (s.ok() && wal) *r = std::make_unique<File>(std::move(*r), this);
    return s;
  }

  void pass() {
    std::unique_lock lock(mu_);
    if (open_) return;
    ++held_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    --held_;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = true;
  int held_ = 0;
  std::atomic<uint64_t> wal_appends_{0};
};

}  // namespace carapace::testing
