// durability_bench: what durability costs on the whole path a user runs, each
// figure against its baseline measured in the same run.
//
//   build/bench/durability_bench [--dir DIR] [--quick]
//
// (r) resume after a crash, through Runtime::resume_session as `carapace
//     resume` runs it — record checks, recovery from the newest snapshot,
//     settling the interrupted turn, session.resumed, the actor started —
//     until the resumed session writes its first new event; for sessions of
//     10, 1,000 and 100,000 events left mid-turn (a snapshot every 100
//     turns). The first resume of a session checks every record once; a
//     later one checks only what came after. Opening the database is reported
//     beside it. Baselines, raw reads from the same database with the log's
//     options: every record of the session for the first resume (what
//     checking them all must read), the records after the snapshot for a
//     later one (the least any recovery from that snapshot must do).
// (i) the durable intent: turns that each call one C++ tool, declared not
//     idempotent (its tool.requested is synced before it runs) vs declared
//     idempotent (buffered), alternating rounds, 1 session and 16 at once.
// Prints a table, then one JSON object as the last line.
#include <rocksdb/db.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "runtime/logging.h"
#include "events/synthetic.h"
#include "replay/recovery.h"
#include "runtime/runtime.h"
#include "storage/db_options.h"
#include "storage/keys.h"
#include "storage/session_journal.h"

using namespace carapace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "durability_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Results {
  std::vector<std::array<std::string, 4>> rows;
  nlohmann::json json;
  void row(std::string what, std::string ours, std::string base, std::string ratio) {
    rows.push_back({std::move(what), std::move(ours), std::move(base), std::move(ratio)});
  }
};

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// ---------------------------------------------------------------- (r)
// A session of about `events` events left in the middle of a turn, as a
// crash leaves it; its workspace is `workspace`.
void write_interrupted_session(const std::string& home, const std::string& workspace, uint64_t events) {
  std::unique_ptr<EventLog> log;
  check(EventLog::open(EventLog::Options{.path = home + "/log"}, &log), "open");
  SyntheticSession synth(SyntheticOptions{.turns = events / 10 + 2, .seed = 9});
  SyntheticStep step;
  synth.next(&step);
  std::get<SessionStarted>(step.events[0]).workspace = workspace;
  std::unique_ptr<SessionJournal> journal;
  check(SessionJournal::create(log.get(), "crashed", std::move(step.events),
                               JournalOptions{.snapshot_every_turns = 100}, &journal),
        "create");
  uint64_t written = 3;
  while (synth.next(&step)) {
    written += step.events.size() + (step.checkpoint ? 1 : 0);
    if (step.checkpoint) {
      check(journal->commit(std::move(step.events)), "commit");
    } else {
      check(journal->append(std::move(step.events)), "append");
      if (written >= events) break;  // the process dies here, mid-turn
    }
  }
}

struct ResumeTimes {
  double open_ms = 0;
  double resume_ms = 0;  // resume_session until the first new event is written
  uint64_t events = 0;
};

// Opens a runtime on `home` and resumes the session, timing each part.
ResumeTimes resume_once(const std::string& home, const std::string& scenario) {
  ResumeTimes t;
  Config config;
  config.provider.scenario = scenario;
  config.snapshot_every_turns = 100;
  // Turns to spare: a session at its last turn would complete as soon as the
  // interrupted tool call is done, before the runtime is closed, and the next
  // round would have nothing to resume.
  config.max_turns = 1'000'000;
  auto t0 = Clock::now();
  std::unique_ptr<Runtime> rt;
  check(Runtime::open(Runtime::Options{.home = home, .config = config}, &rt), "open the runtime");
  t.open_ms = ms_since(t0);
  std::mutex mu;
  std::condition_variable cv;
  uint64_t first_new = 0;
  auto t1 = Clock::now();
  Clock::time_point ready;
  // The subscriber hears the resumed loop's events (session.resumed is
  // written before the actor starts): the first is the session going on.
  check(rt->resume_session("crashed", Runtime::ResumeOptions{.mode = Runtime::ResumeMode::kStep,
                                                             .on_event =
                                                                 [&](const Event& e) {
                                                                   std::lock_guard lock(mu);
                                                                   if (first_new != 0) return;
                                                                   first_new = e.seq;
                                                                   ready = Clock::now();
                                                                   cv.notify_all();
                                                                 }}),
        "resume");
  std::unique_lock lock(mu);
  cv.wait_for(lock, std::chrono::seconds(30), [&] { return first_new != 0; });
  if (first_new == 0) {
    std::fprintf(stderr, "durability_bench: the resumed session wrote nothing\n");
    std::exit(1);
  }
  t.resume_ms = std::chrono::duration<double, std::milli>(ready - t1).count();
  t.events = first_new;
  lock.unlock();
  rt.reset();
  return t;
}

// Reads the session's records, raw, with the log's own options: all of them
// (what a first resume must check) or those after the newest snapshot (what
// any resume must fold).
double raw_read_ms(const std::string& home, bool since_snapshot, uint64_t* records) {
  std::unique_ptr<EventLog> log;
  check(EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, &log), "reader");
  SnapshotEntry snap;
  uint64_t from = since_snapshot && log->latest_snapshot("crashed", UINT64_MAX, &snap).ok() ? snap.seq : 1;
  log.reset();
  LogDbOptions o = log_db_options(true, 64 << 20);
  std::vector<rocksdb::ColumnFamilyDescriptor> families = log_families(o);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  if (!rocksdb::DB::Open(o.db, home + "/log", families, &handles, &db).ok()) std::exit(1);
  auto t = Clock::now();
  std::string upper = keys::session_upper_bound("crashed");
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, handles[1]));
  size_t bytes = 0;
  *records = 0;
  for (it->Seek(keys::seq_key("crashed", from)); it->Valid(); it->Next()) {
    bytes += it->value().size();
    ++*records;
  }
  double ms = ms_since(t);
  if (bytes == 0) std::fprintf(stderr, "durability_bench: nothing after the snapshot\n");
  it.reset();
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  db->Close().PermitUncheckedError();
  delete db;
  return ms;
}

void bench_resume(const fs::path& root, bool quick, Results& r) {
  nlohmann::json sizes = nlohmann::json::array();
  std::vector<uint64_t> counts = quick ? std::vector<uint64_t>{10, 1000} : std::vector<uint64_t>{10, 1000, 100000};
  for (uint64_t events : counts) {
    // The scripted provider answers model call N with reply N, and the
    // interrupted session has made about events/10 calls already: a reply for
    // each of them and more. Each takes its time, so that the session is still
    // running when the runtime is closed after its first new event and the
    // next round resumes it again. (With too few replies the call fails at
    // once, and on a loaded machine the session ends before it is closed.)
    nlohmann::json replies = nlohmann::json::array();
    for (uint64_t i = 0; i < events / 10 + 16; ++i) replies.push_back({{"text", "resumed"}, {"latency_ms", 60000}});
    std::string scenario = write_text((root / "resume-scenario.json").string(),
                                      nlohmann::json{{"replies", replies}}.dump());
    fs::path pristine = root / ("crashed-" + std::to_string(events));
    fs::create_directories(pristine / "ws");
    write_interrupted_session((pristine / "home").string(), (pristine / "ws").string(), events);
    std::vector<double> open_ms, first_ms, later_ms, raw_ms, raw_all_ms;
    uint64_t raw_records = 0, all_records = 0, at = 0;
    for (int round = 0; round < (quick ? 1 : 5); ++round) {
      fs::path copy = root / ("round-" + std::to_string(round));
      fs::copy(pristine, copy, fs::copy_options::recursive);
      std::string home = (copy / "home").string();
      raw_ms.push_back(raw_read_ms(home, true, &raw_records));
      raw_all_ms.push_back(raw_read_ms(home, false, &all_records));
      ResumeTimes first = resume_once(home, scenario);
      ResumeTimes later = resume_once(home, scenario);  // a second crash: the earlier records are checked
      open_ms.push_back(first.open_ms);
      first_ms.push_back(first.resume_ms);
      later_ms.push_back(later.resume_ms);
      at = first.events;
      fs::remove_all(copy);
    }
    fs::remove_all(pristine);
    double first = median(first_ms), later = median(later_ms), raw = median(raw_ms), open = median(open_ms),
           raw_all = median(raw_all_ms);
    sizes.push_back({{"events", events},
                     {"first_new_seq", at},
                     {"open_ms", open},
                     {"first_resume_ms", first},
                     {"later_resume_ms", later},
                     {"raw_read_since_snapshot_ms", raw},
                     {"raw_read_all_ms", raw_all},
                     {"records_since_snapshot", raw_records}});
    r.row(fmt("(r) resume, %.0f events, first after the crash [ms]", static_cast<double>(events)), fmt("%.2f", first),
          fmt("%.2f", raw_all), fmt("%.1f", first / raw_all));
    r.row("    a later resume (earlier records checked before) [ms]", fmt("%.2f", later), fmt("%.2f", raw),
          fmt("%.1f", later / raw));
    r.row("    opening the database, beside it [ms]", fmt("%.2f", open), "", "");
  }
  r.json["resume"] = sizes;
}

// ---------------------------------------------------------------- (i)
// Sessions whose every turn calls `tool`; turns per second.
double tool_turns_per_s(const fs::path& root, bool idempotent, int sessions, uint64_t turns) {
  fs::path dir = root / (idempotent ? "intent-buffered" : "intent-durable");
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json replies = nlohmann::json::array();
  for (uint64_t t = 0; t < turns; ++t) {
    replies.push_back({{"text", "step"}, {"tool_calls", {{{"name", "act"}, {"args", {{"n", t}}}}}}});
  }
  replies.push_back({{"text", "done"}});
  std::string scenario = write_text((dir / "scenario.json").string(), nlohmann::json{{"replies", replies}}.dump());
  Config config;
  config.provider.scenario = scenario;
  config.tools_enabled = {};
  config.max_turns = turns + 1;
  config.workspace = dir.string();
  std::unique_ptr<Runtime> rt;
  check(Runtime::open(Runtime::Options{.home = (dir / "home").string(), .config = config}, &rt), "runtime");
  check(rt->register_tool(ToolDefinition{
            .spec = {.name = "act", .description = "acts", .idempotent = idempotent},
            .blocking = false,
            .run = [](const nlohmann::json&, const ToolContext&) { return ToolResult{.output = "ok"}; }}),
        "tool");
  std::vector<std::string> ids;
  auto start = Clock::now();
  for (int s = 0; s < sessions; ++s) {
    ids.push_back("s" + std::to_string(s));
    check(rt->start_session(SessionOptions{.id = ids.back(), .task = "go"}, nullptr), "start");
  }
  for (const auto& id : ids) {
    SessionOutcome o;
    check(rt->wait(id, std::chrono::minutes(10), &o), "wait");
  }
  double rate = static_cast<double>((turns + 1) * sessions) / (ms_since(start) / 1000);
  rt.reset();
  fs::remove_all(dir);
  return rate;
}

void bench_intent(const fs::path& root, bool quick, Results& r) {
  uint64_t turns = quick ? 20 : 400;
  std::vector<double> durable1, buffered1, durable16, buffered16;
  for (int round = 0; round < (quick ? 1 : 3); ++round) {
    durable1.push_back(tool_turns_per_s(root, false, 1, turns));
    buffered1.push_back(tool_turns_per_s(root, true, 1, turns));
    durable16.push_back(tool_turns_per_s(root, false, 16, turns / 4));
    buffered16.push_back(tool_turns_per_s(root, true, 16, turns / 4));
  }
  double d1 = median(durable1), b1 = median(buffered1), d16 = median(durable16), b16 = median(buffered16);
  double added_ms = 1000.0 / d1 - 1000.0 / b1;
  r.json["intent_durable_turns_per_s_1"] = d1;
  r.json["intent_buffered_turns_per_s_1"] = b1;
  r.json["intent_added_ms_per_call_1"] = added_ms;
  r.json["intent_durable_turns_per_s_16"] = d16;
  r.json["intent_buffered_turns_per_s_16"] = b16;
  r.row("(i) a tool call per turn, durable intent vs buffered, 1 session [turns/s]", fmt("%.0f", d1),
        fmt("%.0f", b1), fmt("%.2f", d1 / b1));
  r.row("    added per side-effecting call [ms]", fmt("%.3f", added_ms), "", "");
  r.row("    16 sessions at once [turns/s]", fmt("%.0f", d16), fmt("%.0f", b16), fmt("%.2f", d16 / b16));
}

}  // namespace

int main(int argc, char** argv) {
  // Warnings and errors only: the runtime logs every turn at info level.
  (void)carapace::configure_logging(carapace::LogOptions{});
  CLI::App app{"Carapace durability benchmark: resume and durable intents, each against its baseline"};
  std::string dir = fs::temp_directory_path().string();
  bool quick = false;
  app.add_option("--dir", dir, "Where to put the scratch homes (the disk under test)")->capture_default_str();
  app.add_flag("--quick", quick, "Tiny sizes: checks the benchmark runs, measures nothing useful");
  CLI11_PARSE(app, argc, argv);
  fs::path root = fs::path(dir) / ("carapace-durability-bench-" + std::to_string(::getpid()));
  fs::create_directories(root);
  Results r;
  std::fprintf(stderr, "(r) resume after a crash...\n");
  bench_resume(root, quick, r);
  std::fprintf(stderr, "(i) durable intents...\n");
  bench_intent(root, quick, r);
  fs::remove_all(root);
  std::printf("%-72s %10s %10s %6s\n", "measurement", "carapace", "baseline", "ratio");
  for (const auto& row : r.rows)
    std::printf("%-72s %10s %10s %6s\n", row[0].c_str(), row[1].c_str(), row[2].c_str(), row[3].c_str());
  std::printf("%s\n", r.json.dump().c_str());
  return 0;
}
