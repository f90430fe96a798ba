// FullDiskFs: a RocksDB file system over the real one whose disk fills up on
// demand. Once `room` bytes have been appended in all (set it at any time;
// UINT64_MAX: no limit), every further append, and every new file, fails
// with NoSpace, as a full disk's would. Appends that fit are written.
// Thread-safe.
#pragma once

#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace carapace::testing {

class FullDiskFs : public rocksdb::FileSystemWrapper {
 public:
  FullDiskFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "FullDiskFs"; }

  // Bytes that may still be appended; UINT64_MAX: as many as the real disk takes.
  void set_room(uint64_t bytes) { room_ = bytes; }
  bool filled() const { return filled_; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    if (room_ == 0) return full(f);
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(f, options, &file, dbg);
    if (s.ok()) *r = std::make_unique<File>(std::move(file), this, f);
    return s;
  }
  // What RocksDB's recovery from a full disk polls before it tries again.
  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& options, uint64_t* free,
                                 rocksdb::IODebugContext* dbg) override {
    uint64_t room = room_;
    if (room == UINT64_MAX) return target()->GetFreeSpace(path, options, free, dbg);
    *free = room;
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->ReopenWritableFile(f, options, &file, dbg);
    if (s.ok()) *r = std::make_unique<File>(std::move(file), this, f);
    return s;
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> t, FullDiskFs* fs, std::string path)
        : FSWritableFileOwnerWrapper(std::move(t)), fs_(fs), path_(std::move(path)) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
      if (!fs_->take(data.size())) return fs_->full(path_);
      return target()->Append(data, o, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             const rocksdb::DataVerificationInfo& info, rocksdb::IODebugContext* dbg) override {
      if (!fs_->take(data.size())) return fs_->full(path_);
      return target()->Append(data, o, info, dbg);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset, const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* dbg) override {
      if (!fs_->take(data.size())) return fs_->full(path_);
      return target()->PositionedAppend(data, offset, o, dbg);
    }

   private:
    FullDiskFs* fs_;
    std::string path_;
  };

  bool take(uint64_t n) {
    uint64_t room = room_.load();
    do {
      if (room == UINT64_MAX) return true;
      if (room < n) {
        room_ = 0;
        filled_ = true;
        return false;
      }
    } while (!room_.compare_exchange_weak(room, room - n));
    return true;
  }
  rocksdb::IOStatus full(const std::string& path) {
    filled_ = true;
    return rocksdb::IOStatus::NoSpace("No space left on device: " + path);
  }

  std::atomic<uint64_t> room_{UINT64_MAX};
  std::atomic<bool> filled_{false};
};

}  // namespace carapace::testing
