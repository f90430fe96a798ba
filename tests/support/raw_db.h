// RawDb: opens a Carapace log directory with plain RocksDB, for tests that
// must alter stored bytes behind the EventLog's back.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/table_properties.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/event_log.h"
#include "storage/session_time_index.h"

namespace carapace::testing {

class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    rocksdb::DBOptions options;
    // Every family the log has (a log of an older build has fewer); the
    // default one with its merge operator (the session count).
    std::vector<std::string> names;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(options, path, &names);
    if (!s.ok()) throw std::runtime_error("RawDb: " + s.ToString());
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const auto& name : names) {
      rocksdb::ColumnFamilyOptions family;
      if (name == rocksdb::kDefaultColumnFamilyName) family.merge_operator = time_index::count_merge_operator();
      families.emplace_back(name, family);
    }
    s = rocksdb::DB::Open(options, path, families, &handles_, &db_);
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

  // As a log of an older build: without that family.
  void drop_family(std::string_view name) {
    rocksdb::ColumnFamilyHandle* h = family(name);
    rocksdb::Status s = db_->DropColumnFamily(h);
    if (!s.ok()) throw std::runtime_error("RawDb drop: " + s.ToString());
    db_->DestroyColumnFamilyHandle(h);
    handles_.erase(std::find(handles_.begin(), handles_.end(), h));
  }

  // Writes every family's memtable to a table file, with RocksDB's default
  // table options (as a build before some option would have).
  void flush() {
    rocksdb::Status s = db_->Flush(rocksdb::FlushOptions(), handles_);
    if (!s.ok()) throw std::runtime_error("RawDb flush: " + s.ToString());
  }

  // The prefix extractor each table file of a family was built with
  // ("nullptr" for none), from the files' properties.
  std::vector<std::string> prefix_extractors(std::string_view family_name) const {
    rocksdb::TablePropertiesCollection tables;
    rocksdb::Status s = db_->GetPropertiesOfAllTables(family(family_name), &tables);
    if (!s.ok()) throw std::runtime_error("RawDb table properties: " + s.ToString());
    std::vector<std::string> out;
    for (const auto& [file, props] : tables) out.push_back(props->prefix_extractor_name);
    return out;
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
