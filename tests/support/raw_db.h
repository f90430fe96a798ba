// RawDb: opens a Carapace log directory with plain RocksDB, for tests that
// must alter stored bytes behind the EventLog's back.
#pragma once

#include <rocksdb/db.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "storage/event_log.h"

namespace carapace::testing {

class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    rocksdb::DBOptions options;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {{rocksdb::kDefaultColumnFamilyName, {}},
                                                             {std::string(kEventsFamily), {}},
                                                             {std::string(kSessionsFamily), {}},
                                                             {std::string(kCheckpointsFamily), {}},
                                                             {std::string(kSnapshotsFamily), {}}};
    rocksdb::Status s = rocksdb::DB::Open(options, path, families, &handles_, &db_);
    if (!s.ok()) throw std::runtime_error("RawDb: " + s.ToString());
  }
  ~RawDb() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close().PermitUncheckedError();
    delete db_;
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  rocksdb::ColumnFamilyHandle* family(std::string_view name) const {
    for (auto* h : handles_) {
      if (h->GetName() == name) return h;
    }
    throw std::runtime_error("RawDb: no family " + std::string(name));
  }

  std::string get(std::string_view family_name, const std::string& key) const {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), family(family_name), key, &value);
    if (!s.ok()) throw std::runtime_error("RawDb get: " + s.ToString());
    return value;
  }

  void put(std::string_view family_name, const std::string& key, const std::string& value) {
    rocksdb::Status s = db_->Put(rocksdb::WriteOptions(), family(family_name), key, value);
    if (!s.ok()) throw std::runtime_error("RawDb put: " + s.ToString());
  }

  void erase(std::string_view family_name, const std::string& key) {
    rocksdb::Status s = db_->Delete(rocksdb::WriteOptions(), family(family_name), key);
    if (!s.ok()) throw std::runtime_error("RawDb delete: " + s.ToString());
  }

 private:
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace carapace::testing
