// collector_bench: what the collector costs (actors/collector/), against
// the same work without it, in the same run.
//
//   build/bench/collector_bench [--turns N,...] [--rounds R] [--dir DIR] [--quick]
//
// For each N:
//   turns     a session of N durable turns recorded by the real runtime (the
//             scripted provider; each turn a model answer calling a C++
//             tool), with the in-process collector observing it and without;
//             R rounds of each, alternated, each on a fresh home; the best
//             of each. The figure: turns per second with / without.
//   spans     on the recorded log: SpanBuilder over every event (the
//             collector's work) against a plain fold (Folder) of the same
//             events, both from memory, best of three.
//   render    the stored text of every span built: span_to_json().dump()
//             against span_json_text(), per span, best of three.
// Prints a table, then one JSON object as the last line.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/collector/collector.h"
#include "actors/collector/span_builder.h"
#include "actors/provider/scripted_provider.h"
#include "events/fold.h"
#include "runtime/logging.h"
#include "bench/echo_session.h"
#include "runtime/runtime.h"
#include "storage/event_log.h"

using namespace carapace;
using namespace carapace::bench;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Records a session of `turns` turns; its id.
std::string record(const fs::path& dir, uint64_t turns, bool collect, double* seconds, double* flush_seconds) {
  fs::create_directories(dir / "home");
  std::shared_ptr<Collector> collector;
  if (collect) check(Collector::start(CollectorOptions{.home = (dir / "home").string()}, &collector), "collector");
  std::unique_ptr<Runtime> rt = echo_runtime(dir, turns, echo_scenario(turns), [&](Runtime::Options& options) {
    if (collector) options.observe = collector->observer();
  });
  auto start = Clock::now();
  std::string id;
  check(rt->start_session(SessionOptions{.id = "long", .task = "go"}, &id), "start");
  SessionOutcome out;
  check(rt->wait(id, std::chrono::hours(1), &out), "wait");
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  rt.reset();
  auto flushing = Clock::now();
  if (collector) check(collector->flush(), "flush");
  *flush_seconds = std::chrono::duration<double>(Clock::now() - flushing).count();
  if (out.turns != turns) {
    std::fprintf(stderr, "collector_bench: the session ran %llu turns, not %llu\n",
                 static_cast<unsigned long long>(out.turns), static_cast<unsigned long long>(turns));
    std::exit(1);
  }
  return id;
}


}  // namespace

int main(int argc, char** argv) {
  (void)carapace::configure_logging(carapace::LogOptions{});
  CLI::App app{"The collector's cost against the same work without it"};
  std::vector<uint64_t> turns = {1000};
  int rounds = 3;
  std::string dir_flag;
  bool quick = false;
  app.add_option("--turns", turns, "Session lengths in turns")->delimiter(',');
  app.add_option("--rounds", rounds, "Recordings with and without the collector, alternated")->check(CLI::Range(1, 20));
  app.add_option("--dir", dir_flag, "Work directory (default: a temporary one, removed)");
  app.add_flag("--quick", quick, "Tiny sizes: proves it runs");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    turns = {20};
    rounds = 1;
  }
  fs::path root = dir_flag.empty() ? fs::temp_directory_path() / ("collector-bench-" + std::to_string(::getpid()))
                                   : fs::path(dir_flag);
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%7s %8s | %12s %12s %6s %8s | %12s %12s %6s | %9s %9s %6s\n", "turns", "events", "off turns/s",
              "on turns/s", "ratio", "flush s", "fold ev/s", "spans ev/s", "ratio", "dump us", "text us",
              "ratio");
  for (uint64_t n : turns) {
    double off_s = 1e100, on_s = 1e100, flush_s = 0;
    std::string id;
    for (int r = 0; r < rounds; ++r) {
      for (bool collect : {false, true}) {
        fs::path dir = root / (std::to_string(n) + (collect ? "-on-" : "-off-") + std::to_string(r));
        fs::remove_all(dir);
        double s = 0, flushed = 0;
        id = record(dir, n, collect, &s, &flushed);
        if (collect && s < on_s) on_s = s, flush_s = flushed;
        if (!collect) off_s = std::min(off_s, s);
      }
    }
    std::unique_ptr<EventLog> log;
    check(EventLog::open(EventLog::Options{.path = (root / (std::to_string(n) + "-off-0") / "home" / "log").string(),
                                           .mode = EventLog::Mode::kReader},
                         &log),
          "log");
    std::vector<Event> all;
    check(log->read(id, 1, UINT64_MAX, &all), "read");
    double fold_s = best_of_three([&] {
      Folder folder;
      for (const auto& e : all) check(folder.add(e), "fold");
    });
    size_t spans = 0;
    double spans_s = best_of_three([&] {
      SpanBuilder builder(id);
      for (const auto& e : all) builder.add(e);
      spans = builder.spans().size();
    });
    // Rendering the spans' stored text: the JSON value built and dumped
    // (as the collector did) against the text written straight.
    SpanBuilder built(id);
    for (const auto& e : all) built.add(e);
    size_t bytes = 0;
    double dump_s = best_of_three([&] {
      for (const Span& sp : built.spans()) {
        bytes += span_to_json(sp).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
      }
    });
    double text_s = best_of_three([&] {
      for (const Span& sp : built.spans()) bytes += span_json_text(sp).size();
    });
    if (bytes == 0) std::exit(1);
    const double span_count = static_cast<double>(built.spans().size());
    const double events = static_cast<double>(all.size());
    std::printf("%7llu %8zu | %12.0f %12.0f %5.2fx %8.3f | %12.0f %12.0f %5.2fx | %9.2f %9.2f %5.2fx\n",
                static_cast<unsigned long long>(n), all.size(), n / off_s, n / on_s, off_s / on_s, flush_s,
                events / fold_s, events / spans_s, fold_s / spans_s, dump_s / span_count * 1e6,
                text_s / span_count * 1e6, dump_s / text_s);
    rows.push_back({{"turns", n},
                    {"events", all.size()},
                    {"spans", spans},
                    {"off_turns_per_s", n / off_s},
                    {"on_turns_per_s", n / on_s},
                    {"on_off_ratio", off_s / on_s},
                    {"flush_s", flush_s},
                    {"fold_events_per_s", events / fold_s},
                    {"spans_events_per_s", events / spans_s},
                    {"spans_fold_ratio", fold_s / spans_s},
                    {"render_dump_us_per_span", dump_s / span_count * 1e6},
                    {"render_text_us_per_span", text_s / span_count * 1e6}});
  }
  if (dir_flag.empty()) fs::remove_all(root);
  std::printf("%s\n", nlohmann::json{{"collector", rows}}.dump().c_str());
  return 0;
}
