// Finds a string anywhere under a Carapace home: in every file's raw bytes,
// and in every key and value of every column family of every RocksDB
// database there (read through RocksDB, so compressed blocks are searched
// decompressed). For the tests that prove a credential is stored nowhere.
#pragma once

#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "storage/session_time_index.h"

namespace carapace::testing {

struct HomeScan {
  std::vector<std::string> found;  // where the needle is: "file X", "db X family F key K"
  size_t files = 0;                // files read raw
  size_t records = 0;              // key-value pairs read through RocksDB
  std::vector<std::string> databases;
};

inline HomeScan scan_home(const std::string& home, const std::string& needle) {
  namespace fs = std::filesystem;
  HomeScan scan;
  for (const auto& entry : fs::recursive_directory_iterator(home)) {
    if (entry.is_regular_file()) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      ++scan.files;
      if (ss.str().find(needle) != std::string::npos) scan.found.push_back("file " + entry.path().string());
    }
    if (!entry.is_directory() || !fs::exists(entry.path() / "CURRENT")) continue;
    std::string path = entry.path().string();
    scan.databases.push_back(path);
    std::vector<std::string> names;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
    if (!s.ok()) {
      scan.found.push_back("db " + path + " unreadable: " + s.ToString());
      continue;
    }
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const auto& n : names) {
      rocksdb::ColumnFamilyOptions family;
      // The log's session count is merged: without the operator its reads fail.
      if (n == rocksdb::kDefaultColumnFamilyName) family.merge_operator = time_index::count_merge_operator();
      families.emplace_back(n, family);
    }
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, families, &handles, &db);
    if (!s.ok()) {
      scan.found.push_back("db " + path + " unreadable: " + s.ToString());
      continue;
    }
    for (auto* h : handles) {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), h));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        ++scan.records;
        if (it->key().ToString().find(needle) != std::string::npos ||
            it->value().ToString().find(needle) != std::string::npos) {
          scan.found.push_back("db " + path + " family " + h->GetName() + " key " + it->key().ToString(true));
        }
      }
      // A family read only in part would hide what the rest holds.
      if (!it->status().ok()) scan.found.push_back("db " + path + " family " + h->GetName() + ": " + it->status().ToString());
    }
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  return scan;
}

}  // namespace carapace::testing
