#include "storage/group_commit.h"

#include <unordered_map>

namespace carapace {
namespace {

// Copies the records of one batch into another (WriteBatch has no public
// append). Records name their family by id, which is not the family's place
// among the handles (a family added later, or after one was dropped). Every
// kind of record the log writes is copied; any other fails the copy rather
// than vanish (Handler's defaults drop some without a word).
class Copier : public rocksdb::WriteBatch::Handler {
 public:
  Copier(rocksdb::WriteBatch* dst, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) : dst_(dst) {
    for (auto* h : handles) {
      if (h != nullptr) by_id_[h->GetID()] = h;
    }
  }

  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    rocksdb::ColumnFamilyHandle* h = family(cf);
    return h == nullptr ? unknown(cf) : dst_->Put(h, key, value);
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    rocksdb::ColumnFamilyHandle* h = family(cf);
    return h == nullptr ? unknown(cf) : dst_->Delete(h, key);
  }
  rocksdb::Status MergeCF(uint32_t cf, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    rocksdb::ColumnFamilyHandle* h = family(cf);
    return h == nullptr ? unknown(cf) : dst_->Merge(h, key, value);
  }
  rocksdb::Status DeleteRangeCF(uint32_t cf, const rocksdb::Slice& from, const rocksdb::Slice& to) override {
    rocksdb::ColumnFamilyHandle* h = family(cf);
    return h == nullptr ? unknown(cf) : dst_->DeleteRange(h, from, to);
  }
  rocksdb::Status SingleDeleteCF(uint32_t cf, const rocksdb::Slice&) override { return unsupported(cf); }
  rocksdb::Status PutEntityCF(uint32_t cf, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return unsupported(cf);
  }
  rocksdb::Status PutBlobIndexCF(uint32_t cf, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return unsupported(cf);
  }

 private:
  rocksdb::ColumnFamilyHandle* family(uint32_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
  }
  static rocksdb::Status unknown(uint32_t cf) {
    return rocksdb::Status::InvalidArgument("unknown column family id " + std::to_string(cf));
  }
  static rocksdb::Status unsupported(uint32_t cf) {
    return rocksdb::Status::NotSupported("a kind of record the group committer does not copy, family id " +
                                         std::to_string(cf));
  }

  rocksdb::WriteBatch* dst_;
  std::unordered_map<uint32_t, rocksdb::ColumnFamilyHandle*> by_id_;
};

// Upper bound of one merged write; a larger backlog is written in several.
constexpr size_t kMaxGroupBytes = 4 << 20;

}  // namespace

GroupCommitter::GroupCommitter(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : db_(db), handles_(std::move(handles)), thread_([this] { run(); }) {}

GroupCommitter::~GroupCommitter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void GroupCommitter::submit(rocksdb::WriteBatch batch, Done done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(Pending{std::move(batch), std::move(done)});
  }
  cv_.notify_one();
}

void GroupCommitter::submit_sync(Done done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(Pending{rocksdb::WriteBatch(), std::move(done), /*sync_only=*/true});
  }
  cv_.notify_one();
}

void GroupCommitter::fail(const rocksdb::Status& s) {
  if (s.ok()) return;
  std::lock_guard lock(mu_);
  if (failed_outside_.load()) return;
  outside_status_ = s;
  failed_outside_.store(true);
}

uint64_t GroupCommitter::syncs() const {
  std::lock_guard lock(mu_);
  return syncs_;
}

uint64_t GroupCommitter::batches() const {
  std::lock_guard lock(mu_);
  return batches_;
}

rocksdb::Status GroupCommitter::write_group(std::vector<Pending>& group) {
  // After a failed write nothing more is written: what reached the disk is
  // unknown, and a later batch must never land without an earlier one.
  if (failed_.ok() && failed_outside_.load()) {
    std::lock_guard lock(mu_);
    failed_ = outside_status_;
  }
  if (!failed_.ok()) return failed_;
  // Not a synced write: RocksDB would hold its write queue through the
  // fsync, and every other writer with it. Written, then synced (the header).
  rocksdb::WriteOptions options;
  rocksdb::Status s;
  bool sync = false;  // owed by a sync-only request, or by a batch written here
  size_t with_records = 0;
  Pending* only = nullptr;
  for (auto& p : group) {
    sync = sync || p.sync_only;
    if (p.batch.Count() > 0) {
      ++with_records;
      only = &p;
    }
  }
  if (with_records == 1) {
    s = db_->Write(options, &only->batch);
  } else if (with_records > 1) {
    rocksdb::WriteBatch merged;
    Copier copier(&merged, handles_);
    for (auto& p : group) {
      s = p.batch.Iterate(&copier);
      if (!s.ok()) return s;  // nothing written
    }
    s = db_->Write(options, &merged);
  }
  sync = sync || with_records > 0;
  if (s.ok() && sync && failed_outside_.load()) {
    std::lock_guard lock(mu_);
    s = outside_status_;
  }
  if (s.ok() && sync) s = db_->SyncWAL();
  if (!s.ok()) failed_ = s;
  return s;
}

void GroupCommitter::run() {
  std::vector<Pending> group;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to write
      size_t bytes = 0;
      while (!queue_.empty() &&
             (group.empty() || bytes + queue_.front().batch.GetDataSize() <= kMaxGroupBytes)) {
        bytes += queue_.front().batch.GetDataSize();
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    rocksdb::Status s = write_group(group);
    {
      std::lock_guard lock(mu_);
      ++syncs_;
      batches_ += group.size();
    }
    for (auto& p : group) p.done(s);
    group.clear();
  }
}

}  // namespace carapace
