// compaction_bench: the bytes the event log's compactions write, with the
// level sizes it uses (storage/db_options.h, size_levels_to_flushes) against
// RocksDB's own (level 1 up to 256 MB, 64 MB files), in the same run.
//
//   build/bench/compaction_bench [--store log|traces] [--mb N] [--rounds R] [--dir DIR] [--quick]
//
// A service's log: 16 sessions at once under the runtime's 1 MB write-buffer
// cap; one lives throughout (its id sorts first), the others end after 30
// turns and new ones (ids that sort later) take their place. Each turn is
// seven records in one batch to the events family (about 1 KB, a tool's
// output of file names), plus the session's index entry, as the runtime
// writes them; the write-ahead log off, so that the bytes written are the
// flushes' and the compactions'. Both variants open RocksDB with the log's
// own options and families (log_db_options); the baseline then restores
// RocksDB's level sizes on every family. After N MB of records, once the
// compactions are done: bytes written (the process's, /proc/self/io) against
// the bytes stored, and the time. Rounds alternate the variants.
//
// --store traces: the trace store's families and options
// (trace_store_families) instead, written as the collector writes them: a
// turn is three spans (about 540 bytes each, keyed by session), each with
// its entry in the time index and the llm and tool spans in the model and
// tool indexes, and the session's progress.
//
// Prints a table, then one JSON object as the last line.
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/process_io.h"
#include "storage/db_options.h"
#include "storage/keys.h"

namespace fs = std::filesystem;
using namespace carapace;
using carapace::bench::process_write_bytes;

namespace {

void check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "compaction_bench: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

struct Result {
  double written_mb = 0, stored_mb = 0, seconds = 0;
  uint64_t files = 0, sessions = 0;
};

void put_be64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

Result run(const fs::path& dir, bool traces, bool rocksdb_levels, uint64_t bytes) {
  fs::remove_all(dir);
  LogDbOptions o = log_db_options(true, 2 << 20, 1 << 20);
  o.db.create_if_missing = true;
  auto families = log_families(o);
  rocksdb::DBOptions db_options(o.db);
  if (traces) {
    families = trace_store_families();
    db_options = rocksdb::DBOptions();  // as TraceStore::open
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.max_background_jobs = 1;
  }
  if (rocksdb_levels) {
    const rocksdb::ColumnFamilyOptions defaults;
    for (auto& f : families) {
      f.options.max_bytes_for_level_base = defaults.max_bytes_for_level_base;
      f.options.target_file_size_base = defaults.target_file_size_base;
    }
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  check(rocksdb::DB::Open(db_options, dir.string(), families, &handles, &raw), "open");
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyHandle* events = handles[1];
  rocksdb::ColumnFamilyHandle* sessions = handles[2];

  struct Live {
    std::string id;
    uint64_t seq = 0;
    int turns = 0;
  };
  uint64_t next_id = 0;
  auto fresh = [&](bool long_lived) {
    char id[32];
    std::snprintf(id, sizeof id, long_lived ? "a-long" : "s-%08llu",
                  static_cast<unsigned long long>(next_id++));
    return Live{id};
  };
  std::vector<Live> live;
  for (int i = 0; i < 16; ++i) live.push_back(fresh(i == 0));
  std::mt19937 rng(7);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  const uint64_t written_before = process_write_bytes();
  const auto start = std::chrono::steady_clock::now();
  uint64_t put = 0;
  for (uint64_t n = 0; put < bytes; ++n) {
    Live& l = live[n % live.size()];
    rocksdb::WriteBatch batch;
    if (traces) {
      // handles: default, spans, progress, by_start, by_model, by_tool
      ++l.turns;
      for (int k = 0; k < 3; ++k) {
        char span_id[17];
        std::snprintf(span_id, sizeof span_id, "%016llx", static_cast<unsigned long long>(rng()) << 20 | n);
        std::string value = R"({"kind":")" +
                            std::string(k == 0   ? "turn"
                                        : k == 1 ? "llm"
                                                 : "tool") +
                            R"(","attrs":{"output":")";
        while (value.size() < 520) value += "file_" + std::to_string(rng() % 100000) + ".txt\\n";
        value += "\"}}";
        std::string key = l.id;
        key.push_back('\0');
        put_be64(&key, l.seq + 1 + k);
        key += span_id;
        std::string tail;
        put_be64(&tail, (n * 3 + k) * 1000);
        tail += l.id;
        tail.push_back('\0');
        tail += span_id;
        put += key.size() + value.size() + 2 * tail.size();
        check(batch.Put(handles[1], key, value), "batch");
        check(batch.Put(handles[3], tail, ""), "batch");
        if (k == 1) check(batch.Put(handles[4], std::string("m1", 3) + tail, ""), "batch");
        if (k == 2) check(batch.Put(handles[5], std::string("shell", 6) + tail, ""), "batch");
      }
      l.seq += 7;
      check(batch.Put(handles[2], l.id, "last_seq " + std::to_string(l.seq)), "batch");
      check(db->Write(wo, &batch), "write");
      if (&l != &live[0] && l.turns == 30) l = fresh(false);
      continue;
    }
    for (int e = 0; e < 7; ++e) {
      std::string value =
          R"({"type":"tool.completed","call_id":"c)" + std::to_string(l.turns) + R"(","output":")";
      const size_t lines = e == 4 ? 40 : 2;
      for (size_t i = 0; i < lines; ++i) value += "file_" + std::to_string(rng() % 100000) + ".txt\\n";
      value += "\"}";
      std::string key = keys::seq_key(l.id, ++l.seq);
      put += key.size() + value.size();
      check(batch.Put(events, key, value), "batch");
    }
    check(batch.Put(sessions, l.id, "turn " + std::to_string(++l.turns) + " seq " + std::to_string(l.seq)),
          "batch");
    check(db->Write(wo, &batch), "write");
    if (&l != &live[0] && l.turns == 30) l = fresh(false);
  }
  for (auto* h : handles) check(db->Flush(rocksdb::FlushOptions(), h), "flush");
  for (;;) {
    uint64_t pending = 0, running = 0;
    db->GetIntProperty("rocksdb.compaction-pending", &pending);
    db->GetIntProperty("rocksdb.num-running-compactions", &running);
    if (pending == 0 && running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.written_mb = static_cast<double>(process_write_bytes() - written_before) / 1e6;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".sst") {
      r.stored_mb += static_cast<double>(entry.file_size()) / 1e6;
      ++r.files;
    }
  }
  r.sessions = next_id;
  for (auto* h : handles) check(db->DestroyColumnFamilyHandle(h), "close");
  db.reset();
  fs::remove_all(dir);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The bytes the event log's compactions write: its level sizes against RocksDB's"};
  uint64_t mb = 160;
  int rounds = 2;
  std::string dir_flag, store = "log";
  bool quick = false;
  app.add_option("--store", store, "Whose options and records: the event log's or the trace store's")
      ->check(CLI::IsMember({"log", "traces"}))
      ->capture_default_str();
  app.add_option("--mb", mb, "Megabytes of records to write")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--rounds", rounds, "Runs of each variant, alternated")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  app.add_option("--dir", dir_flag, "Work directory (default: a temporary one, removed)");
  app.add_flag("--quick", quick, "Tiny sizes: proves it runs");
  CLI11_PARSE(app, argc, argv);
  if (quick) mb = 4, rounds = 1;
  const fs::path dir = (dir_flag.empty() ? fs::temp_directory_path() : fs::path(dir_flag)) /
                       ("compaction-bench-" + std::to_string(::getpid()));
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-22s %8s %10s %10s %7s %8s %6s\n", "level sizes", "MB put", "written MB", "stored MB",
              "ratio", "seconds", "files");
  for (int round = 0; round < rounds; ++round) {
    for (bool rocksdb_levels : {true, false}) {
      const char* name = rocksdb_levels   ? "RocksDB's (baseline)"
                         : store == "log" ? "the log's"
                                          : "the store's";
      std::fprintf(stderr, "round %d, %s level sizes...\n", round + 1, name);
      Result r = run(dir, store == "traces", rocksdb_levels, mb << 20);
      std::printf("%-22s %8llu %10.1f %10.1f %6.2fx %8.2f %6llu\n", name, static_cast<unsigned long long>(mb),
                  r.written_mb, r.stored_mb, r.written_mb / r.stored_mb, r.seconds,
                  static_cast<unsigned long long>(r.files));
      rows.push_back({{"store", store},
                      {"levels", rocksdb_levels ? "rocksdb" : "ours"},
                      {"mb", mb},
                      {"written_mb", r.written_mb},
                      {"stored_mb", r.stored_mb},
                      {"seconds", r.seconds},
                      {"files", r.files},
                      {"sessions", r.sessions}});
    }
  }
  std::printf("%s\n", nlohmann::json{{"compaction", rows}}.dump().c_str());
  return 0;
}
