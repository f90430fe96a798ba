// event_log_bench: Carapace's event log against the raw baselines, in one run.
//
//   build/bench/event_log_bench [--events N] [--turns T] [--dir DIR] [--quick]
//
// (a) appending 10-event steps, unsynced, vs raw RocksDB WriteBatches of the same bytes;
// (b) durable turns (one synced commit per turn) vs raw synced WriteBatches, 1 and 16 sessions;
// (c) fold/recovery throughput vs raw RocksDB iteration;
// (d) resume latency of an N-event session with and without snapshots;
// (e) the reference systems' storage on the same turns: SQLite (WAL, a
//     transaction per turn, synchronous=FULL) and NDJSON with fdatasync per 10 events;
// (f) end to end: a scripted session calling one trivial tool per turn through
//     the whole runtime, 1 and 16 sessions, against the same writes done raw.
// Prints a table, then one JSON object as the last line.
#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/provider/scripted_provider.h"
#include "bench/process_io.h"
#include "events/event_json.h"
#include "events/record.h"
#include "events/synthetic.h"
#include "replay/recovery.h"
#include "runtime/logging.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "storage/db_options.h"
#include "storage/event_log.h"
#include "storage/keys.h"
#include "storage/session_journal.h"
#include "storage/synthetic_writer.h"
#include "tools/allocator.h"

using namespace carapace;
using carapace::bench::process_write_bytes;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// CPU time of every thread of this process so far, user and system.
double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "event_log_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

void check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "event_log_bench: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A scratch directory for one measurement, removed afterwards.
class Scratch {
 public:
  Scratch(const fs::path& root, const std::string& name) : path_(root / name) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Scratch() { fs::remove_all(path_); }
  std::string str(const std::string& sub = "") const { return (sub.empty() ? path_ : path_ / sub).string(); }

 private:
  fs::path path_;
};

std::unique_ptr<EventLog> open_log(const std::string& path) {
  std::unique_ptr<EventLog> log;
  check(EventLog::open(EventLog::Options{.path = path}, &log), "opening the event log");
  return log;
}

// A raw RocksDB with the same column families and options, for baselines.
struct RawDb {
  LogDbOptions tuned;
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;

  // The event log's own options (storage/db_options.h): the baselines differ
  // from Carapace only in what Carapace adds. By default the log's own
  // memory (EventLog::Options: a 64 MB block cache, 16 MB memtables);
  // against the runtime, the caps it opens its log with.
  explicit RawDb(const std::string& path, bool create = true, size_t block_cache_bytes = 64 << 20,
                 size_t write_buffer_bytes = 0)
      : tuned(log_db_options(true, block_cache_bytes, write_buffer_bytes)) {
    rocksdb::DBOptions options = tuned.db;
    options.create_if_missing = create;
    options.create_missing_column_families = create;
    // A log Carapace wrote has all of the log's families; a raw baseline, two.
    std::vector<rocksdb::ColumnFamilyDescriptor> families = log_families(tuned);
    if (create) families.resize(2);
    check(rocksdb::DB::Open(options, path, families, &handles, &db), "opening raw RocksDB");
  }
  ~RawDb() {
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    db->Close().PermitUncheckedError();
    delete db;
  }
  rocksdb::ColumnFamilyHandle* events() const { return handles[1]; }
};

struct Kv {
  std::string key;
  std::string value;
};

// The synthetic workload: turns of realistic events (as the journal commits
// them, one batch per turn), and the same events flattened into 10-event steps.
struct Workload {
  std::vector<EventBody> opening;
  std::vector<std::vector<EventBody>> turns;  // each ends a turn (commit follows)
};

Workload make_workload(uint64_t turns, uint64_t seed) {
  Workload w;
  SyntheticSession synth(SyntheticOptions{.turns = turns + 1, .tool_calls_per_turn = 2, .seed = seed});
  SyntheticStep step;
  synth.next(&step);
  w.opening = std::move(step.events);
  std::vector<EventBody> current;
  while (synth.next(&step)) {
    for (auto& b : step.events) current.push_back(std::move(b));
    if (step.checkpoint) {
      w.turns.push_back(std::move(current));
      current.clear();
      if (w.turns.size() == turns) break;
    }
  }
  return w;
}

// Reads a session's stored records (key, value) back, grouped by checkpoint.
std::vector<std::vector<Kv>> stored_turns(const EventLog& log, const std::string& id) {
  std::vector<std::vector<Kv>> out(1);
  auto c = log.cursor(id, 1);
  for (; c->valid(); c->next()) {
    out.back().push_back(Kv{std::string(c->key()), std::string(c->value())});
    Event e;
    check(c->event(&e), "reading back");
    if (std::holds_alternative<TurnCommitted>(e.body)) out.emplace_back();
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

struct Results {
  nlohmann::json json = nlohmann::json::object();
  std::vector<std::array<std::string, 4>> rows;  // measurement, carapace, baseline, ratio

  void row(std::string what, std::string ours, std::string base, std::string ratio) {
    rows.push_back({std::move(what), std::move(ours), std::move(base), std::move(ratio)});
  }
};

std::string fmt(const char* f, double v) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// ---------------------------------------------------------------- (a)
void bench_append(const fs::path& root, uint64_t events, Results& r) {
  // 10-event steps of synthetic events, numbered as one long session.
  Workload w = make_workload(events / 10 + 1, 1);
  std::vector<Event> all;
  uint64_t seq = 0;
  for (auto& b : w.opening) all.push_back(Event{++seq, 1, b});
  for (auto& turn : w.turns) {
    for (auto& b : turn) all.push_back(Event{++seq, 1, b});
    if (all.size() >= events) break;
  }
  all.resize(std::min<size_t>(all.size(), events));
  std::vector<Kv> encoded;
  uint64_t bytes = 0;
  for (const auto& e : all) {
    Kv kv{keys::seq_key("bench", e.seq), ""};
    encode_record(kv.key, e, &kv.value);
    bytes += kv.key.size() + kv.value.size();
    encoded.push_back(std::move(kv));
  }

  std::vector<double> ours, raw;
  for (int round = 0; round < 3; ++round) {
    {
      Scratch dir(root, "append-carapace");
      auto log = open_log(dir.str());
      auto start = Clock::now();
      for (size_t i = 0; i < all.size(); i += 10) {
        size_t n = std::min<size_t>(10, all.size() - i);
        check(log->append(AppendRequest{.session = "bench", .events = std::span(all).subspan(i, n)}),
              "append");
      }
      ours.push_back(static_cast<double>(all.size()) / seconds_since(start));
    }
    {
      Scratch dir(root, "append-raw");
      RawDb db(dir.str());
      rocksdb::WriteOptions wo;
      auto start = Clock::now();
      for (size_t i = 0; i < encoded.size(); i += 10) {
        rocksdb::WriteBatch batch;
        for (size_t j = i; j < std::min(encoded.size(), i + 10); ++j) {
          check(batch.Put(db.events(), encoded[j].key, encoded[j].value), "batch");
        }
        check(db.db->Write(wo, &batch), "raw write");
      }
      raw.push_back(static_cast<double>(encoded.size()) / seconds_since(start));
    }
  }
  double o = median(ours), b = median(raw);
  r.json["append_events_per_s"] = o;
  r.json["append_raw_events_per_s"] = b;
  r.json["append_ratio_vs_raw"] = o / b;
  r.json["append_us_per_event"] = 1e6 / o;
  r.json["append_overhead_us_per_event"] = 1e6 / o - 1e6 / b;
  r.json["append_bytes_per_event"] = static_cast<double>(bytes) / static_cast<double>(encoded.size());
  r.row("(a) unsynced append, 10-event steps [events/s]", fmt("%.0f", o), fmt("%.0f", b), fmt("%.2f", o / b));
  r.row("    per event [us]", fmt("%.2f", 1e6 / o), fmt("%.2f", 1e6 / b), "");
}

// ---------------------------------------------------------------- (b)
// Each session commits `turns` turns through its journal, one synced batch per turn.
double carapace_durable(const fs::path& root, int sessions, uint64_t turns,
                        std::vector<std::vector<Kv>>* stored) {
  Scratch dir(root, "durable-carapace");
  auto log = open_log(dir.str());
  std::vector<Workload> work;
  for (int s = 0; s < sessions; ++s) work.push_back(make_workload(turns, 100 + static_cast<uint64_t>(s)));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<SessionJournal>> journals(static_cast<size_t>(sessions));
  for (int s = 0; s < sessions; ++s) {
    check(SessionJournal::create(
              log.get(), "session-" + std::to_string(s), work[static_cast<size_t>(s)].opening,
              JournalOptions{.snapshot_every_turns = 0}, &journals[static_cast<size_t>(s)]),
          "create");
  }
  auto start = Clock::now();
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      auto& j = *journals[static_cast<size_t>(s)];
      for (auto& turn : work[static_cast<size_t>(s)].turns) check(j.commit(std::move(turn)), "commit");
    });
  }
  for (auto& t : threads) t.join();
  double rate = static_cast<double>(turns) * sessions / seconds_since(start);
  if (stored != nullptr) *stored = stored_turns(*log, "session-0");
  return rate;
}

double raw_durable(const fs::path& root, int sessions, const std::vector<std::vector<Kv>>& turns) {
  Scratch dir(root, "durable-raw");
  RawDb db(dir.str());
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      std::string prefix = "raw-" + std::to_string(s);
      for (size_t t = 1; t < turns.size(); ++t) {  // turn 0 is the opening
        rocksdb::WriteBatch batch;
        for (const auto& kv : turns[t]) check(batch.Put(db.events(), prefix + kv.key, kv.value), "batch");
        check(db.db->Write(wo, &batch), "raw synced write");
      }
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<double>(turns.size() - 1) * sessions / seconds_since(start);
}

// ---------------------------------------------------------------- (e)
double sqlite_durable(const fs::path& root, const std::vector<std::vector<Kv>>& turns) {
  Scratch dir(root, "sqlite");
  sqlite3* db = nullptr;
  if (sqlite3_open((dir.str() + "/events.db").c_str(), &db) != SQLITE_OK) std::exit(1);
  auto exec = [&](const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::fprintf(stderr, "sqlite: %s\n", err);
      std::exit(1);
    }
  };
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec(
      "CREATE TABLE events(session TEXT NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL, "
      "ts INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY(session, seq)) WITHOUT ROWID");
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO events VALUES(?, ?, ?, ?, ?)", -1, &insert, nullptr);
  uint64_t seq = 0;
  auto start = Clock::now();
  for (size_t t = 1; t < turns.size(); ++t) {
    exec("BEGIN");
    for (const auto& kv : turns[t]) {
      sqlite3_bind_text(insert, 1, "bench", -1, SQLITE_STATIC);
      sqlite3_bind_int64(insert, 2, static_cast<sqlite3_int64>(++seq));
      sqlite3_bind_int(insert, 3, static_cast<uint8_t>(kv.value[6]));
      sqlite3_bind_int64(insert, 4, 1);
      sqlite3_bind_blob(insert, 5, kv.value.data() + 16, static_cast<int>(kv.value.size() - 16),
                        SQLITE_STATIC);
      if (sqlite3_step(insert) != SQLITE_DONE) std::exit(1);
      sqlite3_reset(insert);
    }
    exec("COMMIT");
  }
  double rate = static_cast<double>(turns.size() - 1) / seconds_since(start);
  sqlite3_finalize(insert);
  sqlite3_close(db);
  return rate;
}

double ndjson_durable(const fs::path& root, const std::vector<std::vector<Kv>>& turns) {
  Scratch dir(root, "ndjson");
  // The lines are rendered up front: this measures the storage, not JSON rendering.
  std::vector<std::vector<std::string>> lines;
  for (size_t t = 1; t < turns.size(); ++t) {
    lines.emplace_back();
    for (const auto& kv : turns[t]) {
      std::string_view id;
      uint64_t seq = 0;
      keys::parse_seq_key(kv.key, &id, &seq);
      Event e;
      check(decode_record(kv.key, kv.value, seq, &e), "decode");
      lines.back().push_back(event_to_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                             "\n");
    }
  }
  int fd = ::open((dir.str() + "/trace.ndjson").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) std::exit(1);
  size_t since_sync = 0;
  auto start = Clock::now();
  for (const auto& turn : lines) {
    for (const auto& line : turn) {
      if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::exit(1);
      if (++since_sync == 10) {
        ::fdatasync(fd);
        since_sync = 0;
      }
    }
  }
  ::fdatasync(fd);
  double rate = static_cast<double>(lines.size()) / seconds_since(start);
  ::close(fd);
  return rate;
}

void bench_durable(const fs::path& root, uint64_t turns, Results& r) {
  std::vector<std::vector<Kv>> stored;
  std::vector<double> ours1, raw1;
  for (int round = 0; round < 3; ++round) {
    ours1.push_back(carapace_durable(root, 1, turns, round == 0 ? &stored : nullptr));
    raw1.push_back(raw_durable(root, 1, stored));
  }
  uint64_t turns16 = std::max<uint64_t>(turns / 4, 50);
  double ours16 = carapace_durable(root, 16, turns16, nullptr);
  std::vector<std::vector<Kv>> stored16(
      stored.begin(),
      stored.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(stored.size(), turns16 + 1)));
  double raw16 = raw_durable(root, 16, stored16);
  double sqlite = sqlite_durable(root, stored);
  double ndjson = ndjson_durable(root, stored);
  double o1 = median(ours1), b1 = median(raw1);
  size_t events_per_turn = 0;
  for (size_t t = 1; t < stored.size(); ++t) events_per_turn += stored[t].size();
  double avg_events = static_cast<double>(events_per_turn) / static_cast<double>(stored.size() - 1);

  r.json["durable_1_session_turns_per_s"] = o1;
  r.json["durable_raw_1_session_turns_per_s"] = b1;
  r.json["durable_ratio_vs_raw"] = o1 / b1;
  r.json["durable_16_sessions_turns_per_s"] = ours16;
  r.json["durable_raw_16_sessions_turns_per_s"] = raw16;
  r.json["durable_16_vs_1_session"] = ours16 / o1;
  r.json["events_per_turn"] = avg_events;
  r.json["sqlite_durable_turns_per_s"] = sqlite;
  r.json["ndjson_durable_turns_per_s"] = ndjson;
  r.json["ratio_vs_sqlite_durable"] = o1 / sqlite;
  r.json["ratio_vs_ndjson_durable"] = o1 / ndjson;
  r.row(fmt("(b) durable turns, 1 session (%.1f events/turn) [turns/s]", avg_events), fmt("%.0f", o1),
        fmt("%.0f", b1), fmt("%.2f", o1 / b1));
  r.row("    durable turns, 16 sessions [turns/s]", fmt("%.0f", ours16), fmt("%.0f", raw16),
        fmt("%.2f", ours16 / raw16));
  r.row("    16 sessions vs 1 session", fmt("%.1fx", ours16 / o1), fmt("%.1fx", raw16 / b1), "");
  r.row("(e) vs SQLite WAL, txn/turn, synchronous=FULL [turns/s]", fmt("%.0f", o1), fmt("%.0f", sqlite),
        fmt("%.2f", o1 / sqlite));
  r.row("    vs NDJSON, fdatasync every 10 events [turns/s]", fmt("%.0f", o1), fmt("%.0f", ndjson),
        fmt("%.2f", o1 / ndjson));
}

// ---------------------------------------------------------------- (c), (d)
// Times recover() of `id` (median of 5) and returns the last result.
double time_recover(const EventLog& log, const char* id, bool snapshots, RecoveredSession* out) {
  std::vector<double> ms;
  for (int round = 0; round < 5; ++round) {
    auto start = Clock::now();
    check(recover(log, id, RecoverOptions{.use_snapshots = snapshots}, out), "recover");
    ms.push_back(seconds_since(start) * 1000);
  }
  return median(ms);
}

void bench_fold_and_resume(const fs::path& root, uint64_t events, Results& r) {
  Scratch dir(root, "fold");
  constexpr uint64_t kSnapshotEvery = 100;
  // The snapshotted sessions end 99 turns after their last snapshot: the
  // worst case, a whole interval of events to fold on top of the snapshot.
  uint64_t turns = std::max<uint64_t>(events / 10 / kSnapshotEvery, 1) * kSnapshotEvery - 1;
  uint64_t written = 0;
  {
    auto log = open_log(dir.str());
    struct Spec {
      const char* id;
      uint64_t snapshot_every;
      uint64_t context_budget;
    };
    // "plain" and "snapshotted" trim their context to 400k characters, as a
    // model's window forces; "untrimmed" keeps its whole history in the state.
    for (Spec spec : {Spec{"plain", 0, 400'000}, Spec{"snapshotted", kSnapshotEvery, 400'000},
                      Spec{"untrimmed", kSnapshotEvery, 0}}) {
      SyntheticWriteStats stats;
      check(write_synthetic_session(
                log.get(), spec.id,
                SyntheticOptions{.turns = turns, .seed = 5, .context_budget_chars = spec.context_budget},
                JournalOptions{.snapshot_every_turns = spec.snapshot_every}, &stats),
            "writing the fold sessions");
      written = stats.events;
    }
  }
  auto log = open_log(dir.str());
  RecoveredSession rec;
  // Fold and raw iteration alternate on the same open database, so that both
  // see the same caches; "raw" walks the same records without decoding them.
  std::vector<double> fold_rates, raw_rates, full_ms;
  for (int round = 0; round < 7; ++round) {
    uint64_t n = 0, bytes = 0;
    auto start = Clock::now();
    for (auto c = log->cursor("plain", 1); c->valid(); c->next()) {
      bytes += c->key().size() + c->value().size();
      ++n;
    }
    raw_rates.push_back(static_cast<double>(n) / seconds_since(start));
    if (bytes == 0) std::exit(1);
    start = Clock::now();
    check(recover(*log, "plain", RecoverOptions{.use_snapshots = false}, &rec), "fold");
    double secs = seconds_since(start);
    fold_rates.push_back(static_cast<double>(rec.events_folded) / secs);
    full_ms.push_back(secs * 1000);
  }
  double snap_ms = time_recover(*log, "snapshotted", true, &rec);
  uint64_t snapshot_events = rec.events_folded;
  size_t messages = rec.committed.messages.size();
  double untrimmed_ms = time_recover(*log, "untrimmed", true, &rec);
  size_t untrimmed_messages = rec.committed.messages.size();
  uint64_t untrimmed_events = rec.events_folded;
  log.reset();

  double fold = median(fold_rates), raw = median(raw_rates);
  r.json["fold_events"] = written;
  r.json["fold_events_per_s"] = fold;
  r.json["raw_iter_events_per_s"] = raw;
  r.json["fold_ratio_vs_raw_iter"] = fold / raw;
  r.json["resume_100k_ms_snapshot"] = snap_ms;
  r.json["resume_100k_ms_no_snapshot"] = median(full_ms);
  r.json["resume_snapshot_events_folded"] = snapshot_events;
  r.json["resume_state_messages"] = messages;
  r.json["resume_untrimmed_ms_snapshot"] = untrimmed_ms;
  r.json["resume_untrimmed_state_messages"] = untrimmed_messages;
  r.json["resume_untrimmed_events_folded"] = untrimmed_events;
  r.row(fmt("(c) fold with checkpoint re-hash, %.0f events [events/s]", static_cast<double>(written)),
        fmt("%.0f", fold), fmt("%.0f", raw), fmt("%.2f", fold / raw));
  r.row(fmt("(d) resume from a snapshot + %.0f events [ms]", static_cast<double>(snapshot_events)),
        fmt("%.2f", snap_ms), "", "");
  r.row("    resume by folding from seq 1 [ms]", fmt("%.1f", median(full_ms)), "", "");
  r.row(fmt("    resume, untrimmed (%.0f msgs), snapshot + ", static_cast<double>(untrimmed_messages)) +
            fmt("%.0f ev [ms]", static_cast<double>(untrimmed_events)),
        fmt("%.1f", untrimmed_ms), "", "");
}

// ---------------------------------------------------------------- (f) end to end
// A scripted session whose every turn calls one trivial C++ tool: the whole
// runtime (actors, hooks check, prompt, fold, journal, group commit).
std::string e2e_scenario(uint64_t turns) {
  nlohmann::json replies = nlohmann::json::array();
  for (uint64_t t = 0; t < turns; ++t) {
    replies.push_back({{"text", "step " + std::to_string(t)},
                       {"tool_calls", {{{"name", "noop"}, {"args", {{"n", t}}}}}},
                       {"usage", {{"input", 1000}, {"output", 20}}}});
  }
  replies.push_back({{"text", "done"}});
  return nlohmann::json{{"replies", replies}}.dump();
}

// The scripted provider, but one that reads the conversation: each request
// carries a copy of it, as for the HTTP providers (which render it).
class ReadingScripted : public Provider {
 public:
  explicit ReadingScripted(Scenario scenario) : scripted_(std::move(scenario)) {}
  std::string name() const override { return "scripted"; }
  bool blocking() const override { return false; }
  bool reads_messages() const override { return true; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override {
    return scripted_.call(request, on_delta);
  }

 private:
  ScriptedProvider scripted_;
};

// The runtime as it is, and two baselines:
//   kCafClock: on a system of the bench's own with CAF 0.17's scheduler as
//     it comes, but for idle workers waiting on a condition variable (what
//     the runtime configured before actors/actor_scheduler.h): its clock
//     wakes its thread for every timer set or cancelled;
//   kCopiedConversation: the provider reads the conversation, so every
//     request carries a copy of it (as before Provider::reads_messages).
enum class E2e { kRuntime, kCafClock, kCopiedConversation };

// `cpu_us_per_turn`, if given, gets the process's CPU time (every thread)
// per turn while the sessions ran.
// `write_buffer_bytes`: the runtime's log_write_buffer_bytes (0: its default).
double e2e_turns_per_s(const fs::path& root, int sessions, uint64_t turns,
                       std::vector<std::vector<Kv>>* stored, E2e variant = E2e::kRuntime,
                       double* cpu_us_per_turn = nullptr, size_t write_buffer_bytes = 0) {
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> caf_system;
  if (variant == E2e::kCafClock) {
    caf_config = std::make_unique<caf::actor_system_config>();
    caf_config->set("work-stealing.moderate-poll-attempts", 0);
    caf_system = std::make_unique<caf::actor_system>(*caf_config);
  }
  Scratch dir(root, "e2e");
  std::string scenario = dir.str("scenario.json");
  {
    std::ofstream out(scenario);
    out << e2e_scenario(turns);
  }
  Config config;
  config.provider.scenario = scenario;
  config.tools_enabled = {};
  config.max_turns = turns + 1;
  config.workspace = dir.str();
  std::unique_ptr<Runtime> rt;
  std::shared_ptr<Provider> provider;
  if (variant == E2e::kCopiedConversation) {
    Scenario parsed;
    check(load_scenario(scenario, &parsed), "loading the scenario");
    provider = std::make_shared<ReadingScripted>(std::move(parsed));
  }
  Runtime::Options runtime_options{
      .home = dir.str("home"), .config = config, .system = caf_system.get(), .provider = provider};
  if (write_buffer_bytes != 0) runtime_options.log_write_buffer_bytes = write_buffer_bytes;
  check(Runtime::open(runtime_options, &rt), "opening the runtime");
  check(rt->register_tool(ToolDefinition{
            // Idempotent: no durable intent before it runs, so a turn has the
            // baseline's syncs (durability_bench (i) measures the intent).
            .spec = {.name = "noop", .description = "does nothing", .idempotent = true},
            .blocking = false,
            .run = [](const nlohmann::json&, const ToolContext&) { return ToolResult{.output = "ok"}; }}),
        "registering noop");
  std::vector<std::string> ids;
  auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (int s = 0; s < sessions; ++s) {
    std::string id = "e2e-" + std::to_string(s);
    check(rt->start_session(SessionOptions{.id = id, .task = "run"}, nullptr), "starting a session");
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    SessionOutcome o;
    check(rt->wait(id, std::chrono::minutes(10), &o), "waiting");
    if (o.status != SessionStatus::kCompleted || o.turns != turns + 1) {
      std::fprintf(stderr, "event_log_bench: e2e session %s ended %s: %s\n", id.c_str(),
                   std::string(status_name(o.status)).c_str(), o.error.c_str());
      std::exit(1);
    }
  }
  double rate = static_cast<double>(turns + 1) * sessions / seconds_since(start);
  if (cpu_us_per_turn != nullptr) {
    *cpu_us_per_turn =
        (process_cpu_seconds() - cpu_start) * 1e6 / static_cast<double>((turns + 1) * sessions);
  }
  if (stored != nullptr) {
    // Every record, one step each (each of this session's steps is one
    // event).
    stored->clear();
    auto c = runtime_log(*rt).cursor(ids[0], 1);
    for (; c->valid(); c->next()) stored->push_back({Kv{std::string(c->key()), std::string(c->value())}});
  }
  rt.reset();  // before the system it may borrow
  return rate;
}

EventType record_type(const Kv& kv) { return static_cast<EventType>(static_cast<uint8_t>(kv.value[6])); }

// The records regrouped into the batches the runtime writes them in: a
// session writes the steps it makes before it acts outside itself as one
// batch, so a turn is three: up to llm.requested (before the model is
// asked), up to tool.requested (before the tool runs), and the rest with
// the checkpoint (synced).
std::vector<std::vector<Kv>> runtime_batches(const std::vector<std::vector<Kv>>& steps) {
  std::vector<std::vector<Kv>> batches(1);
  for (const auto& step : steps) {
    for (const auto& kv : step) batches.back().push_back(kv);
    const EventType t = record_type(step.back());
    if (t == EventType::kLlmRequested || t == EventType::kToolRequested || t == EventType::kTurnCommitted) {
      batches.emplace_back();
    }
  }
  if (batches.back().empty()) batches.pop_back();
  return batches;
}

// The same records, written raw: a batch each as given, synced when it
// ends with a checkpoint.
double raw_turn_ms(const fs::path& root, const std::vector<std::vector<Kv>>& records, uint64_t turns,
                   double* cpu_us_per_turn) {
  Scratch dir(root, "e2e-raw");
  // The memory the runtime gives its log (Runtime::Options' defaults): with
  // 1 MB of write buffers, its memtables are flushed, and their files
  // compacted, far more often than with the log's own 16 MB.
  const Runtime::Options runtime_defaults;
  RawDb db(dir.str(), true, runtime_defaults.log_block_cache_bytes, runtime_defaults.log_write_buffer_bytes);
  rocksdb::WriteOptions buffered, synced;
  synced.sync = true;
  auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (const auto& batch_records : records) {
    rocksdb::WriteBatch batch;
    for (const auto& kv : batch_records) check(batch.Put(db.events(), kv.key, kv.value), "batch");
    bool commit = record_type(batch_records.back()) == EventType::kTurnCommitted;
    check(db.db->Write(commit ? synced : buffered, &batch), "raw write");
  }
  double ms = seconds_since(start) * 1000 / static_cast<double>(turns + 1);
  *cpu_us_per_turn = (process_cpu_seconds() - cpu_start) * 1e6 / static_cast<double>(turns + 1);
  return ms;
}

void bench_e2e(const fs::path& root, uint64_t turns, Results& r) {
  std::vector<std::vector<Kv>> records;
  std::vector<std::vector<Kv>> batches;
  std::vector<double> ones, raws, ones_caf, ones_copied, sixteens, sixteens_caf, cpus, raw_cpus, cpus16;
  std::vector<double> raws_batched, raw_cpus_batched;
  uint64_t turns16 = std::max<uint64_t>(turns / 4, 20);
  // Rounds interleaved, so that the variants share the machine's noise.
  for (int round = 0; round < 3; ++round) {
    double cpu = 0, raw_cpu = 0;
    ones.push_back(e2e_turns_per_s(root, 1, turns, round == 0 ? &records : nullptr, E2e::kRuntime, &cpu));
    raws.push_back(raw_turn_ms(root, records, turns, &raw_cpu));
    cpus.push_back(cpu);
    raw_cpus.push_back(raw_cpu);
    if (round == 0) batches = runtime_batches(records);
    raws_batched.push_back(raw_turn_ms(root, batches, turns, &raw_cpu));
    raw_cpus_batched.push_back(raw_cpu);
    ones_caf.push_back(e2e_turns_per_s(root, 1, turns, nullptr, E2e::kCafClock));
    ones_copied.push_back(e2e_turns_per_s(root, 1, turns, nullptr, E2e::kCopiedConversation));
    double cpu16 = 0;
    sixteens.push_back(e2e_turns_per_s(root, 16, turns16, nullptr, E2e::kRuntime, &cpu16));
    cpus16.push_back(cpu16);
    sixteens_caf.push_back(e2e_turns_per_s(root, 16, turns16, nullptr, E2e::kCafClock));
  }
  double one_copied = median(ones_copied);
  double sixteen = median(sixteens), sixteen_caf = median(sixteens_caf), one_caf = median(ones_caf);
  double one = median(ones), raw_ms = median(raws);
  double e2e_ms = 1000.0 / one;
  double events_per_turn = static_cast<double>(records.size()) / static_cast<double>(turns + 1);
  // Beyond the raw writes, per event, of a single session at `turns_per_s`.
  auto overhead_us = [&](double turns_per_s) {
    return (1000.0 / turns_per_s - raw_ms) * 1000 / events_per_turn;
  };
  const double cpu = median(cpus), raw_cpu = median(raw_cpus);
  const double raw_ms_batched = median(raws_batched), raw_cpu_batched = median(raw_cpus_batched);
  const double batches_per_turn = static_cast<double>(batches.size()) / static_cast<double>(turns + 1);
  r.json["e2e_raw_batched_turn_ms"] = raw_ms_batched;
  r.json["e2e_raw_batched_cpu_us_per_turn"] = raw_cpu_batched;
  r.json["e2e_batches_per_turn"] = batches_per_turn;
  r.json["e2e_cpu_overhead_us_per_event_batched"] = (cpu - raw_cpu_batched) / events_per_turn;
  r.json["e2e_overhead_us_per_event_batched"] = (e2e_ms - raw_ms_batched) * 1000 / events_per_turn;
  r.json["e2e_cpu_us_per_turn_1"] = cpu;
  r.json["e2e_raw_cpu_us_per_turn"] = raw_cpu;
  r.json["e2e_cpu_overhead_us_per_event"] = (cpu - raw_cpu) / events_per_turn;
  r.json["e2e_turns_per_s_1"] = one;
  r.json["e2e_turns_per_s_16"] = sixteen;
  r.json["e2e_turn_ms_1"] = e2e_ms;
  r.json["e2e_raw_turn_ms"] = raw_ms;
  r.json["e2e_overhead_ms_per_turn"] = e2e_ms - raw_ms;
  r.json["e2e_events_per_turn"] = events_per_turn;
  r.json["e2e_overhead_us_per_event"] = overhead_us(one);
  r.json["e2e_16_vs_1_session"] = sixteen / one;
  // CPU a turn, and the cores kept busy (CPU seconds a second), with 1 and
  // 16 sessions: whether 16 sessions are short of cores or wait on something.
  const double cpu16 = median(cpus16);
  r.json["e2e_cpu_us_per_turn_16"] = cpu16;
  r.json["e2e_cores_busy_1"] = cpu * one / 1e6;
  r.json["e2e_cores_busy_16"] = cpu16 * sixteen / 1e6;
  r.json["e2e_caf_clock_turns_per_s_1"] = one_caf;
  r.json["e2e_caf_clock_turns_per_s_16"] = sixteen_caf;
  r.json["e2e_caf_clock_overhead_us_per_event"] = overhead_us(one_caf);
  r.json["e2e_copied_conversation_turns_per_s_1"] = one_copied;
  r.json["e2e_copied_conversation_overhead_us_per_event"] = overhead_us(one_copied);
  r.row(fmt("(f) end to end, scripted + 1 tool, 1 session (%.0f events/turn) [turns/s]", events_per_turn),
        fmt("%.0f", one), fmt("%.0f", 1000.0 / raw_ms), fmt("%.2f", one * raw_ms / 1000.0));
  r.row("    end to end, 16 sessions [turns/s]", fmt("%.0f", sixteen), "", "");
  r.row("    16 sessions vs 1 session", fmt("%.2fx", sixteen / one), "", "");
  r.row("    CPU per turn, every thread: 16 sessions vs 1 [us]", fmt("%.0f", cpu16), fmt("%.0f", cpu),
        fmt("%.2f", cpu16 / cpu));
  r.row("    cores busy (CPU seconds a second): 16 sessions vs 1", fmt("%.2f", cpu16 * sixteen / 1e6),
        fmt("%.2f", cpu * one / 1e6), "");
  r.row("    per turn: carapace vs raw writes, a batch a step, same syncs [ms]", fmt("%.3f", e2e_ms),
        fmt("%.3f", raw_ms), "");
  r.row("    runtime overhead beyond the raw writes [us/event]", fmt("%.1f", overhead_us(one)), "", "");
  r.row("    CPU per turn, every thread: carapace vs raw writes [us]", fmt("%.0f", cpu), fmt("%.0f", raw_cpu),
        fmt("%.2f", cpu / raw_cpu));
  r.row("    CPU beyond the raw writes' [us/event]", fmt("%.1f", (cpu - raw_cpu) / events_per_turn), "", "");
  r.row(
      fmt("    per turn: carapace vs raw writes, the runtime's batches (%.1f a turn) [ms]", batches_per_turn),
      fmt("%.3f", e2e_ms), fmt("%.3f", raw_ms_batched), "");
  r.row("    runtime overhead beyond those writes [us/event]",
        fmt("%.1f", (e2e_ms - raw_ms_batched) * 1000 / events_per_turn), "", "");
  r.row("    CPU per turn, every thread: carapace vs those writes [us]", fmt("%.0f", cpu),
        fmt("%.0f", raw_cpu_batched), fmt("%.2f", cpu / raw_cpu_batched));
  r.row("    CPU beyond those writes' [us/event]", fmt("%.1f", (cpu - raw_cpu_batched) / events_per_turn), "",
        "");
  r.row("    1 session: this scheduler vs CAF's own clock [turns/s]", fmt("%.0f", one), fmt("%.0f", one_caf),
        fmt("%.2f", one / one_caf));
  r.row("    16 sessions: this scheduler vs CAF's own clock [turns/s]", fmt("%.0f", sixteen),
        fmt("%.0f", sixteen_caf), fmt("%.2f", sixteen / sixteen_caf));
  r.row("    overhead with CAF's own clock [us/event]", fmt("%.1f", overhead_us(one_caf)), "", "");
  r.row("    1 session: requests without vs with the conversation [turns/s]", fmt("%.0f", one),
        fmt("%.0f", one_copied), fmt("%.2f", one / one_copied));
  r.row("    overhead with the conversation copied per request [us/event]",
        fmt("%.1f", overhead_us(one_copied)), "", "");
}

}  // namespace

int main(int argc, char** argv) {
  // Warnings and errors only: the runtime logs every turn at info level.
  (void)carapace::configure_logging(carapace::LogOptions{});
  CLI::App app{
      "Carapace event log benchmark: every figure against its raw baseline, measured in the same run"};
  uint64_t events = 100'000;
  uint64_t turns = 2'000;
  std::string dir = fs::temp_directory_path().string();
  bool quick = false;
  std::string only = "abcdef";
  app.add_option("--events", events, "Events for the append, fold and resume measurements")
      ->capture_default_str();
  app.add_option("--turns", turns, "Durable turns per measurement (16 sessions write a quarter each)")
      ->capture_default_str();
  app.add_option("--dir", dir, "Where to put the scratch databases (same disk as production data)")
      ->capture_default_str();
  app.add_option("--only", only, "The measurements to run, by letter (e.g. cd: fold and resume)")
      ->capture_default_str()
      ->check([](const std::string& v) {
        return !v.empty() && v.find_first_not_of("abcdef") == std::string::npos
                   ? std::string()
                   : std::string("letters a to f, e.g. --only cd");
      });
  app.add_flag("--quick", quick, "Tiny sizes: checks the benchmark runs, measures nothing useful");
  uint64_t profile_turns = 0;
  int profile_sessions = 1;
  app.add_option("--profile-f", profile_turns,
                 "Only (f)'s runtime for this many turns a session, no baseline: a window for perf");
  app.add_option("--profile-sessions", profile_sessions, "Sessions at once with --profile-f")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  size_t profile_write_buffer_mb = 0;
  app.add_option("--profile-write-buffer-mb", profile_write_buffer_mb,
                 "With --profile-f: the runtime's log_write_buffer_bytes, in MB (0: its default, 1 MB)")
      ->check(CLI::Range(0, 4096));
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    events = 2'000;
    turns = 60;
  }
  fs::path root = fs::path(dir) / ("carapace-bench-" + std::to_string(::getpid()));
  fs::create_directories(root);

  Results r;
  if (profile_turns > 0) {
    double cpu = 0;
    const uint64_t written_before = process_write_bytes();
    double rate = e2e_turns_per_s(root, profile_sessions, profile_turns, nullptr, E2e::kRuntime, &cpu,
                                  profile_write_buffer_mb << 20);
    const double turns_run = static_cast<double>(profile_turns + 1) * profile_sessions;
    const double written_kb = static_cast<double>(process_write_bytes() - written_before) / 1024.0;
    fs::remove_all(root);
    std::printf(
        "(f) end to end, %d session(s), %llu turns each: %.0f turns/s, %.1f us/turn, %.0f us CPU/turn "
        "(%.2f cores), %.1f KB written to storage/turn\n",
        profile_sessions, static_cast<unsigned long long>(profile_turns), rate, 1e6 / rate, cpu,
        cpu * rate / 1e6, written_kb / turns_run);
    return 0;
  }
  auto wanted = [&](const char* letters) { return only.find_first_of(letters) != std::string::npos; };
  if (wanted("a")) {
    std::fprintf(stderr, "(a) append...\n");
    bench_append(root, events, r);
  }
  if (wanted("be")) {
    std::fprintf(stderr, "(b, e) durable turns...\n");
    bench_durable(root, turns, r);
  }
  if (wanted("cd")) {
    std::fprintf(stderr, "(c, d) fold and resume of %llu events...\n", static_cast<unsigned long long>(events));
    bench_fold_and_resume(root, events, r);
  }
  if (wanted("f")) {
    std::fprintf(stderr, "(f) end to end...\n");
    bench_e2e(root, quick ? 20 : 500, r);
  }
  fs::remove_all(root);

  std::printf("allocator: %s (as the carapace program's; tools/allocator.h)\n", allocator_in_use().c_str());
  std::printf("%-58s %14s %14s %7s\n", "measurement", "carapace", "baseline", "ratio");
  for (const auto& row : r.rows)
    std::printf("%-58s %14s %14s %7s\n", row[0].c_str(), row[1].c_str(), row[2].c_str(), row[3].c_str());
  r.json["events"] = events;
  r.json["turns"] = turns;
  r.json["allocator"] = allocator_in_use();
  std::printf("%s\n", r.json.dump().c_str());
  return 0;
}
