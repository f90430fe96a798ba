// replay_bench: what a replay costs (replay/replayer.h), against a plain
// fold of the same log in the same run.
//
//   build/bench/replay_bench [--turns N,...] [--dir DIR] [--quick]
//
// For each N, one session of N turns is recorded by the real runtime (the
// scripted provider; each turn one model answer with a call to a C++ tool,
// the last a final answer) — about 10 events a turn. Then, on that log:
//   fold    read every event and fold it (Folder, hashes re-checked): the
//           baseline, what `carapace verify` does;
//   replay  replay_session: the session loop re-run in virtual time, every
//           answer from the log, every event compared with the recorded one.
// Each is the best of three. Prints a table, then one JSON object as the
// last line.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/logging.h"
#include "actors/provider/scripted_provider.h"
#include "events/fold.h"
#include "replay/replayer.h"
#include "bench/echo_session.h"
#include "runtime/runtime.h"
#include "runtime/session_setup.h"

using namespace carapace;
using namespace carapace::bench;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Records a session of `turns` turns; its id.
std::string record(const fs::path& dir, uint64_t turns, double* seconds) {
  std::unique_ptr<Runtime> rt = echo_runtime(dir, turns, echo_scenario(turns));
  auto start = Clock::now();
  std::string id;
  check(rt->start_session(SessionOptions{.id = "long", .task = "go"}, &id), "start");
  SessionOutcome out;
  check(rt->wait(id, std::chrono::hours(1), &out), "wait");
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (out.turns != turns) {
    std::fprintf(stderr, "replay_bench: the session ran %llu turns, not %llu\n",
                 static_cast<unsigned long long>(out.turns), static_cast<unsigned long long>(turns));
    std::exit(1);
  }
  return id;
}


}  // namespace

int main(int argc, char** argv) {
  // Warnings and errors only: the runtime logs every turn at info level.
  (void)carapace::configure_logging(carapace::LogOptions{});
  CLI::App app{"Replay cost against a plain fold of the same log"};
  std::vector<uint64_t> turns = {1000, 10000};
  std::string dir_flag;
  bool quick = false;
  app.add_option("--turns", turns, "Session lengths in turns")->delimiter(',');
  app.add_option("--dir", dir_flag, "Work directory (default: a temporary one, removed)");
  app.add_flag("--quick", quick, "Tiny sizes: proves it runs");
  CLI11_PARSE(app, argc, argv);
  if (quick) turns = {20};
  fs::path root = dir_flag.empty() ? fs::temp_directory_path() / ("replay-bench-" + std::to_string(::getpid()))
                                   : fs::path(dir_flag);
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%8s %9s %10s %10s %12s %12s %7s\n", "turns", "events", "fold s", "replay s", "fold ev/s",
              "replay ev/s", "ratio");
  for (uint64_t n : turns) {
    fs::path dir = root / std::to_string(n);
    fs::remove_all(dir);
    double recorded_s = 0;
    std::string id = record(dir, n, &recorded_s);
    std::unique_ptr<EventLog> log;
    check(EventLog::open(EventLog::Options{.path = (dir / "home" / "log").string(), .mode = EventLog::Mode::kReader},
                         &log),
          "log");
    uint64_t events = 0;
    double fold_s = best_of_three([&] {
      std::vector<Event> all;
      check(log->read(id, 1, UINT64_MAX, &all), "read");
      Folder folder;
      for (auto& e : all) check(folder.add(std::move(e)), "fold");
      events = folder.last_seq();
    });
    Config config = echo_config(dir, n);
    ReplayOptions options{.tools = std::make_shared<ToolRegistry>(),
                          .hooks = std::make_shared<HookRegistry>(),
                          .settings = [&config](const SessionState& s) {
                            return session_settings(config, s.workspace, s.max_turns, s.instructions);
                          }};
    check(options.tools->add(echo_tool()), "tool");
    double replay_s = best_of_three([&] {
      ReplayReport report;
      check(replay_session(*log, id, options, &report), "replay");
      if (!report.identical() || report.events != events) {
        std::fprintf(stderr, "replay_bench: the replay diverged at seq %llu\n",
                     static_cast<unsigned long long>(report.divergence ? report.divergence->seq : 0));
        std::exit(1);
      }
    });
    std::printf("%8llu %9llu %10.3f %10.3f %12.0f %12.0f %6.1fx\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(events), fold_s, replay_s, events / fold_s, events / replay_s,
                replay_s / fold_s);
    rows.push_back({{"turns", n},
                    {"events", events},
                    {"record_s", recorded_s},
                    {"fold_s", fold_s},
                    {"replay_s", replay_s},
                    {"replay_events_per_s", events / replay_s}});
  }
  if (dir_flag.empty()) fs::remove_all(root);
  std::printf("%s\n", nlohmann::json{{"replay", rows}}.dump().c_str());
  return 0;
}
