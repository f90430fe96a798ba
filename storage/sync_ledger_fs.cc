#include "storage/sync_ledger_fs.h"

#include <fcntl.h>
#include <rocksdb/file_system.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/text.h"

namespace carapace {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

// The ledger: one line per durable step, appended with write(2).
class Ledger {
 public:
  Ledger(int fd, bool ignore_wal_syncs) : fd_(fd), ignore_wal_syncs_(ignore_wal_syncs) {}
  ~Ledger() { ::close(fd_); }

  void created(const std::string& path) { put("C " + path); }
  void synced(const std::string& path, uint64_t size) {
    if (ignore_wal_syncs_ && path.size() > 4 && path.compare(path.size() - 4, 4, ".log") == 0) return;
    put("S " + std::to_string(size) + " " + path);
  }
  void dir_synced(const std::string& dir) { put("D " + dir); }
  // Written before the rename, so that a process killed between the rename
  // and its `R` line still leaves a trace of it (storage/power_loss.cc).
  void renaming(const std::string& from, const std::string& to) { put("r " + from + "\t" + to); }
  void renamed(const std::string& from, const std::string& to) { put("R " + from + "\t" + to); }
  void deleted(const std::string& path) { put("X " + path); }

 private:
  void put(std::string line) {
    line += '\n';
    std::lock_guard lock(mu_);
    // One write per line: O_APPEND keeps lines whole and in order.
    [[maybe_unused]] ssize_t n = ::write(fd_, line.data(), line.size());
  }

  int fd_;
  bool ignore_wal_syncs_;
  std::mutex mu_;
};

// A writable file that tells the ledger how far it was synced.
class LedgerWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  LedgerWritableFile(std::unique_ptr<rocksdb::FSWritableFile> target, std::string path, uint64_t size,
                     std::shared_ptr<Ledger> ledger)
      : FSWritableFileOwnerWrapper(std::move(target)),
        path_(std::move(path)),
        size_(size),
        ledger_(std::move(ledger)) {}

  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Append(data, options, dbg);
    if (s.ok()) grow_to(size() + data.size());
    return s;
  }
  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
    IOStatus s = target()->Append(data, options, info, dbg);
    if (s.ok()) grow_to(size() + data.size());
    return s;
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset, const IOOptions& options,
                            IODebugContext* dbg) override {
    IOStatus s = target()->PositionedAppend(data, offset, options, dbg);
    if (s.ok()) grow_to(offset + data.size());
    return s;
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset, const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
    IOStatus s = target()->PositionedAppend(data, offset, options, info, dbg);
    if (s.ok()) grow_to(offset + data.size());
    return s;
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Truncate(size, options, dbg);
    if (s.ok()) {
      std::lock_guard lock(mu_);
      size_ = size;
    }
    return s;
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    uint64_t at = size();
    IOStatus s = target()->Sync(options, dbg);
    if (s.ok()) ledger_->synced(path_, at);
    return s;
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    uint64_t at = size();
    IOStatus s = target()->Fsync(options, dbg);
    if (s.ok()) ledger_->synced(path_, at);
    return s;
  }
  // A range sync makes part of a file durable; counting none of it is the
  // strict reading (RocksDB issues it only as a background hint).

 private:
  uint64_t size() {
    std::lock_guard lock(mu_);
    return size_;
  }
  void grow_to(uint64_t end) {
    std::lock_guard lock(mu_);
    if (end > size_) size_ = end;
  }

  std::string path_;
  std::mutex mu_;
  uint64_t size_;
  std::shared_ptr<Ledger> ledger_;
};

class LedgerDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  LedgerDirectory(std::unique_ptr<rocksdb::FSDirectory> target, std::string path, std::shared_ptr<Ledger> ledger)
      : FSDirectoryWrapper(std::move(target)), path_(std::move(path)), ledger_(std::move(ledger)) {}

  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = FSDirectoryWrapper::Fsync(options, dbg);
    if (s.ok()) ledger_->dir_synced(path_);
    return s;
  }
  IOStatus FsyncWithDirOptions(const IOOptions& options, IODebugContext* dbg,
                               const rocksdb::DirFsyncOptions& dir_options) override {
    IOStatus s = FSDirectoryWrapper::FsyncWithDirOptions(options, dbg, dir_options);
    if (s.ok()) ledger_->dir_synced(path_);
    return s;
  }

 private:
  std::string path_;
  std::shared_ptr<Ledger> ledger_;
};

class SyncLedgerFileSystem : public rocksdb::FileSystemWrapper {
 public:
  SyncLedgerFileSystem(std::shared_ptr<rocksdb::FileSystem> target, std::shared_ptr<Ledger> ledger)
      : FileSystemWrapper(std::move(target)), ledger_(std::move(ledger)) {}

  const char* Name() const override { return "SyncLedgerFileSystem"; }

  IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                           std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s = target()->NewWritableFile(f, options, &file, dbg);
    if (!s.ok()) return s;
    ledger_->created(f);
    *r = std::make_unique<LedgerWritableFile>(std::move(file), f, 0, ledger_);
    return s;
  }

  IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                              std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) override {
    bool existed = target()->FileExists(f, IOOptions(), dbg).ok();
    uint64_t size = 0;
    if (existed) target()->GetFileSize(f, IOOptions(), &size, dbg).PermitUncheckedError();
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s = target()->ReopenWritableFile(f, options, &file, dbg);
    if (!s.ok()) return s;
    // What the file held before this process is as durable as the disk made it.
    if (existed)
      ledger_->synced(f, size);
    else
      ledger_->created(f);
    *r = std::make_unique<LedgerWritableFile>(std::move(file), f, size, ledger_);
    return s;
  }

  IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const rocksdb::FileOptions& options,
                             std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    ledger_->renaming(old, f);
    IOStatus s = target()->ReuseWritableFile(f, old, options, &file, dbg);
    if (!s.ok()) return s;
    ledger_->renamed(old, f);
    *r = std::make_unique<LedgerWritableFile>(std::move(file), f, 0, ledger_);
    return s;
  }

  IOStatus NewDirectory(const std::string& name, const IOOptions& options,
                        std::unique_ptr<rocksdb::FSDirectory>* r, IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    IOStatus s = target()->NewDirectory(name, options, &dir, dbg);
    if (!s.ok()) return s;
    *r = std::make_unique<LedgerDirectory>(std::move(dir), name, ledger_);
    return s;
  }

  IOStatus RenameFile(const std::string& from, const std::string& to, const IOOptions& options,
                      IODebugContext* dbg) override {
    ledger_->renaming(from, to);
    IOStatus s = target()->RenameFile(from, to, options, dbg);
    if (s.ok()) ledger_->renamed(from, to);
    return s;
  }

  IOStatus DeleteFile(const std::string& f, const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->DeleteFile(f, options, dbg);
    if (s.ok()) ledger_->deleted(f);
    return s;
  }

 private:
  std::shared_ptr<Ledger> ledger_;
};

}  // namespace

Status make_sync_ledger_fs(const SyncLedgerOptions& options, std::shared_ptr<rocksdb::FileSystem>* out) {
  if (options.ledger_path.empty()) return Status::invalid_argument("the sync ledger needs a file path");
  int fd = ::open(options.ledger_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::io_error("cannot open the sync ledger " + options.ledger_path + ": " + errno_text(errno));
  }
  *out = std::make_shared<SyncLedgerFileSystem>(options.target ? options.target : rocksdb::FileSystem::Default(),
                                                std::make_shared<Ledger>(fd, options.ignore_wal_syncs));
  return Status();
}

}  // namespace carapace
