// embed_bench: a long-running embedder's memory. One Runtime runs many short
// sessions, as a service would for days; finished sessions must release their
// actors and state, so resident memory stays flat after warm-up.
//
//   build/bench/embed_bench [--sessions N] [--at-once K] [--dir DIR] [--quick]
//
// (m) N short sessions (one scripted answer each, no tools), K at a time;
//     resident memory (VmRSS) after every tenth of them, once every session
//     of that batch has closed. Baseline: the resident memory after the first
//     tenth (the warm-up: caches, arenas, the actor system's threads); the
//     figure is the growth per 1,000 sessions after it.
// (a) 1,000 sessions alive at once, each waiting 1 s for its model: the live
//     session count at the peak, resident memory there, and the wall time
//     against one such session's.
// Prints a table, then one JSON object as the last line.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/logging.h"
#include "runtime/runtime.h"

using namespace carapace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "embed_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

double rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

// 0: the Runtime::Options defaults.
size_t g_block_cache_mb = 0, g_write_buffer_mb = 0;

std::unique_ptr<Runtime> open_runtime(const fs::path& dir, const std::string& scenario_json) {
  fs::create_directories(dir / "ws");
  std::string scenario = (dir / "scenario.json").string();
  std::ofstream(scenario) << scenario_json;
  Config config;
  config.provider.scenario = scenario;
  config.tools_enabled = {};
  config.workspace = (dir / "ws").string();
  std::unique_ptr<Runtime> rt;
  Runtime::Options options{.home = (dir / "home").string(), .config = config};
  if (g_block_cache_mb != 0) options.log_block_cache_bytes = g_block_cache_mb << 20;
  if (g_write_buffer_mb != 0) options.log_write_buffer_bytes = g_write_buffer_mb << 20;
  check(Runtime::open(std::move(options), &rt), "runtime");
  return rt;
}

void run_batch(Runtime& rt, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    std::string id;
    check(rt.start_session(SessionOptions{.task = "go"}, &id), "start");
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    SessionOutcome o;
    check(rt.wait(id, std::chrono::minutes(5), &o), "wait");
  }
  for (int i = 0; i < 2000 && rt.live_sessions() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

int main(int argc, char** argv) {
  // Warnings and errors only: the runtime logs every turn at info level.
  (void)carapace::configure_logging(carapace::LogOptions{});
  CLI::App app{"Carapace embedding benchmark: a long-running runtime's memory"};
  int sessions = 10000, at_once = 100;
  std::string dir = "/tmp";
  bool quick = false;
  app.add_option("--sessions", sessions, "Short sessions through one runtime")->capture_default_str();
  app.add_option("--at-once", at_once, "Sessions started together")->capture_default_str();
  app.add_option("--dir", dir, "Where to put the scratch home")->capture_default_str();
  app.add_option("--block-cache-mb", g_block_cache_mb, "Runtime::Options::log_block_cache_bytes, in MB (0: its default)")
      ->capture_default_str();
  app.add_option("--write-buffer-mb", g_write_buffer_mb, "Runtime::Options::log_write_buffer_bytes, in MB (0: its default)")
      ->capture_default_str();
  app.add_flag("--quick", quick, "Tiny sizes: checks the benchmark runs, measures nothing useful");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    sessions = 200;
    at_once = 20;
  }
  fs::path root = fs::path(dir) / ("embed-bench-" + std::to_string(::getpid()));
  fs::remove_all(root);
  nlohmann::json out;

  // (m)
  std::fprintf(stderr, "(m) %d sessions, %d at a time...\n", sessions, at_once);
  std::vector<double> rss;
  size_t max_live = 0;
  auto t0 = Clock::now();
  {
    auto rt = open_runtime(root / "m", R"({"replies": [{"text": "ok"}]})");
    int tenth = std::max(sessions / 10, at_once);
    for (int done = 0; done < sessions;) {
      int n = std::min(at_once, sessions - done);
      run_batch(*rt, n);
      done += n;
      max_live = std::max(max_live, rt->live_sessions());
      if (done % tenth == 0 || done == sessions) rss.push_back(rss_mb());
    }
  }
  double m_s = std::chrono::duration<double>(Clock::now() - t0).count();
  double per_1000 = rss.size() > 1 ? (rss.back() - rss.front()) / ((sessions - sessions / 10) / 1000.0) : 0;

  // (a)
  int alive = quick ? 50 : 1000;
  std::fprintf(stderr, "(a) %d sessions alive at once...\n", alive);
  std::string slow = R"({"replies": [{"text": "ok", "latency_ms": 1000}]})";
  double one_s = 0, all_s = 0, peak_rss = 0;
  size_t peak_live = 0;
  {
    auto rt = open_runtime(root / "a1", slow);
    auto t = Clock::now();
    run_batch(*rt, 1);
    one_s = std::chrono::duration<double>(Clock::now() - t).count();
  }
  {
    auto rt = open_runtime(root / "a", slow);
    auto t = Clock::now();
    std::vector<std::string> ids;
    for (int i = 0; i < alive; ++i) {
      std::string id;
      check(rt->start_session(SessionOptions{.task = "go"}, &id), "start");
      ids.push_back(id);
    }
    peak_live = rt->live_sessions();
    peak_rss = rss_mb();
    for (const auto& id : ids) {
      SessionOutcome o;
      check(rt->wait(id, std::chrono::minutes(5), &o), "wait");
    }
    all_s = std::chrono::duration<double>(Clock::now() - t).count();
  }
  fs::remove_all(root);

  std::printf("%-66s %10s %10s\n", "measurement", "carapace", "baseline");
  std::printf("%-66s %10.1f %10.1f\n", "(m) resident memory after all sessions vs after the first tenth [MB]",
              rss.empty() ? 0 : rss.back(), rss.empty() ? 0 : rss.front());
  std::printf("%-66s %10.2f\n", "    growth per 1,000 sessions after warm-up [MB]", per_1000);
  std::printf("%-66s %10zu\n", "    session actors alive after each batch, at most", max_live);
  std::printf("%-66s %10.0f\n", "    sessions per second", sessions / m_s);
  std::printf("%-66s %10zu\n", "(a) sessions alive at once", peak_live);
  std::printf("%-66s %10.1f\n", "    resident memory with them alive [MB]", peak_rss);
  std::printf("%-66s %10.2f %10.2f\n", "    wall time for all of them vs for one [s]", all_s, one_s);
  out["sessions"] = sessions;
  out["rss_mb_by_tenth"] = rss;
  out["rss_growth_mb_per_1000"] = per_1000;
  out["max_live_after_batch"] = max_live;
  out["alive_at_once"] = peak_live;
  out["alive_rss_mb"] = peak_rss;
  out["alive_wall_s"] = all_s;
  out["one_wall_s"] = one_s;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
