// serve_bench: how soon `carapace serve` shows what a running session
// writes, and what its API costs, each against a raw baseline in the same
// run.
//
//   build/bench/serve_bench [--turns N] [--pace-ms P] [--interval-ms I,...] [--api-turns M] [--dir DIR] [--quick]
//
// live    A session of N turns recorded by the real runtime in this process
//         (the scripted provider answering after P ms; each turn a model
//         answer calling a C++ tool), while `carapace serve --interval-ms I`
//         runs on the same home as its own process and a WebSocket client
//         here collects its messages. Per event: the time from the event's
//         timestamp to the first `session` message whose last_seq covers it.
//         Baseline: a RocksDB secondary of the same log, polled every I ms
//         in this process (refresh + last_seq), which is the floor of any
//         follower that polls at that interval.
// api     GET /api/sessions/ID?spans=all of a finished session of M turns (folded from
//         the log on request), over loopback HTTP; baseline: the same work
//         in this process (read the events, build the spans, render them as
//         JSON). Best of five.
// Prints a table, then one JSON object as the last line.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/collector/span_builder.h"
#include "bench/echo_session.h"
#include "runtime/logging.h"
#include "runtime/runtime.h"
#include "storage/event_log.h"
#include "tests/support/ws_client.h"

using namespace carapace;
using namespace carapace::bench;
namespace fs = std::filesystem;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `carapace --home HOME serve --port 0 --interval-ms I` in the background; its pid, port and
// token (from the URL it prints: http://127.0.0.1:PORT/#token=T).
pid_t start_server(const fs::path& home, int interval_ms, const fs::path& out, uint16_t* port,
                   std::string* token) {
  std::fflush(stdout);  // else the child writes this process's buffered lines again
  pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    std::freopen((out.string() + ".err").c_str(), "w", stderr);
    std::string interval = std::to_string(interval_ms);
    ::execl(CARAPACE_BIN, CARAPACE_BIN, "--home", home.c_str(), "serve", "--read-only", "--port", "0",
            "--interval-ms", interval.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    size_t at = text.str().find("127.0.0.1:");
    size_t line_end = text.str().find('\n');
    if (at != std::string::npos && line_end != std::string::npos) {
      std::string line = text.str().substr(0, line_end);
      *port = static_cast<uint16_t>(std::stoi(line.substr(at + 10)));
      size_t t = line.find("#token=");
      *token = t == std::string::npos ? "" : line.substr(t + 7);
      return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "serve_bench: carapace serve did not start (see %s)\n", out.c_str());
  std::exit(1);
}

void stop_server(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

struct Percentiles {
  double p50 = 0, p95 = 0, max = 0;
};

Percentiles percentiles(std::vector<int64_t> us) {
  if (us.empty()) return {};
  std::sort(us.begin(), us.end());
  auto at = [&](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))] / 1000.0; };
  return {at(0.50), at(0.95), us.back() / 1000.0};
}

// Per event: the time until the first observation (time, last seq) that covers it.
std::vector<int64_t> delays(const std::vector<std::pair<int64_t, uint64_t>>& seen, const std::vector<Event>& events) {
  std::vector<int64_t> out;
  for (const auto& e : events) {
    for (const auto& [at, seq] : seen) {
      if (seq >= e.seq) {
        out.push_back(std::max<int64_t>(0, at - e.ts_us));
        break;
      }
    }
  }
  return out;
}

struct LiveResult {
  size_t events = 0;
  Percentiles serve, raw;
};

LiveResult live(const fs::path& dir, uint64_t turns, uint64_t pace_ms, int interval_ms) {
  Scenario scenario = echo_scenario(turns);
  for (auto& entry : scenario.entries) entry.latency_ms = pace_ms;
  std::unique_ptr<Runtime> rt = echo_runtime(dir, turns, std::move(scenario));
  uint16_t port = 0;
  std::string token;
  pid_t server = start_server(dir / "home", interval_ms, dir / "serve.out", &port, &token);
  std::vector<std::pair<int64_t, uint64_t>> raw_seen;
  std::atomic<bool> done{false};
  std::unique_ptr<EventLog> reader;
  check(EventLog::open(EventLog::Options{.path = (dir / "home" / "log").string(), .mode = EventLog::Mode::kReader},
                       &reader),
        "reader");
  std::thread raw([&] {
    uint64_t last_seen = 0;
    while (!done) {
      uint64_t last = 0;
      if (reader->refresh().ok() && reader->last_seq("live", &last).ok() && last > last_seen) {
        raw_seen.emplace_back(now_us(), last);
        last_seen = last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  });
  LiveResult result;
  {
    testing::WsClient client(port, token);
    client.wait([](const nlohmann::json& m) { return m["type"] == "hello"; });
    std::string id;
    check(rt->start_session(SessionOptions{.id = "live", .task = "go"}, &id), "start");
    SessionOutcome out;
    check(rt->wait(id, std::chrono::hours(1), &out), "wait");
    uint64_t last = 0;
    check(reader->refresh(), "refresh");
    check(reader->last_seq("live", &last), "last seq");
    client.wait([&](const nlohmann::json& m) {
      return m["type"] == "session" && m["session"]["id"] == "live" && m["session"]["last_seq"] == last;
    });
    done = true;
    raw.join();
    std::vector<std::pair<int64_t, uint64_t>> serve_seen;
    for (const auto& r : client.received()) {
      if (r.message["type"] == "session" && r.message["session"]["id"] == "live") {
        serve_seen.emplace_back(r.at_us, r.message["session"]["last_seq"].get<uint64_t>());
      }
    }
    std::vector<Event> events;
    check(reader->read("live", 1, last, &events), "read");
    result.events = events.size();
    result.serve = percentiles(delays(serve_seen, events));
    result.raw = percentiles(delays(raw_seen, events));
  }
  stop_server(server);
  rt.reset();
  return result;
}

// One GET over a fresh loopback connection; the body's size.
size_t get(uint16_t port, const std::string& token, const std::string& target) {
  boost::asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 30);
  http::read(socket, buffer, parser);
  if (parser.get().result_int() != 200) {
    std::fprintf(stderr, "serve_bench: GET %s answered %u\n", target.c_str(), parser.get().result_int());
    std::exit(1);
  }
  return parser.get().body().size();
}

struct ApiResult {
  size_t events = 0, spans = 0, bytes = 0;
  double serve_ms = 0, raw_ms = 0;
};

ApiResult api(const fs::path& dir, uint64_t turns) {
  {
    std::unique_ptr<Runtime> rt = echo_runtime(dir, turns, echo_scenario(turns));
    std::string id;
    check(rt->start_session(SessionOptions{.id = "long", .task = "go"}, &id), "start");
    SessionOutcome out;
    check(rt->wait(id, std::chrono::hours(1), &out), "wait");
  }
  // No trace store: the server and the baseline both fold the log.
  fs::remove_all(dir / "home" / "traces");
  ApiResult result;
  uint16_t port = 0;
  std::string token;
  pid_t server = start_server(dir / "home", 200, dir / "serve.out", &port, &token);
  auto best_of_five = [](auto f) {
    double best = 1e100;
    for (int i = 0; i < 5; ++i) {
      auto start = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
  };
  result.serve_ms = best_of_five([&] { result.bytes = get(port, token, "/api/sessions/long?spans=all"); });
  stop_server(server);
  std::unique_ptr<EventLog> log;
  check(EventLog::open(EventLog::Options{.path = (dir / "home" / "log").string(), .mode = EventLog::Mode::kReader},
                       &log),
        "log");
  result.raw_ms = best_of_five([&] {
    std::vector<Event> events;
    check(log->read("long", 1, UINT64_MAX, &events), "read");
    std::vector<Span> spans = build_spans("long", events);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& sp : spans) list.push_back(span_to_json(sp));
    std::string text = list.dump();
    result.events = events.size();
    result.spans = spans.size();
  });
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  (void)carapace::configure_logging(carapace::LogOptions{});
  CLI::App app{"How soon carapace serve shows a running session's events, and what its API costs"};
  uint64_t turns = 100, pace_ms = 20, api_turns = 1000;
  std::vector<int> intervals = {200, 50};
  std::string dir_flag;
  bool quick = false;
  app.add_option("--turns", turns, "Turns of the live session");
  app.add_option("--pace-ms", pace_ms, "The scripted model's answer time");
  app.add_option("--interval-ms", intervals, "serve's --interval-ms, and the baseline's poll")->delimiter(',');
  app.add_option("--api-turns", api_turns, "Turns of the session the API serves");
  app.add_option("--dir", dir_flag, "Work directory (default: a temporary one, removed)");
  app.add_flag("--quick", quick, "Tiny sizes: proves it runs");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    turns = 10;
    api_turns = 20;
    intervals = {50};
  }
  fs::path root = dir_flag.empty() ? fs::temp_directory_path() / ("serve-bench-" + std::to_string(::getpid()))
                                   : fs::path(dir_flag);
  nlohmann::json live_rows = nlohmann::json::array();
  std::printf("live: %llu turns, the model answering in %llu ms\n", static_cast<unsigned long long>(turns),
              static_cast<unsigned long long>(pace_ms));
  std::printf("%11s %7s | %22s | %22s\n", "interval ms", "events", "serve p50/p95/max ms", "raw poll p50/p95/max ms");
  for (int interval : intervals) {
    fs::path dir = root / ("live-" + std::to_string(interval));
    fs::remove_all(dir);
    LiveResult r = live(dir, turns, pace_ms, interval);
    std::printf("%11d %7zu | %6.1f %6.1f %8.1f | %6.1f %6.1f %8.1f\n", interval, r.events, r.serve.p50, r.serve.p95,
                r.serve.max, r.raw.p50, r.raw.p95, r.raw.max);
    live_rows.push_back({{"interval_ms", interval},
                         {"events", r.events},
                         {"serve_ms", {{"p50", r.serve.p50}, {"p95", r.serve.p95}, {"max", r.serve.max}}},
                         {"raw_ms", {{"p50", r.raw.p50}, {"p95", r.raw.p95}, {"max", r.raw.max}}}});
  }
  fs::path dir = root / "api";
  fs::remove_all(dir);
  ApiResult a = api(dir, api_turns);
  std::printf("api: GET /api/sessions/ID?spans=all of %llu turns (%zu events, %zu spans, %zu bytes): %.1f ms; in process %.1f ms "
              "(%.2fx)\n",
              static_cast<unsigned long long>(api_turns), a.events, a.spans, a.bytes, a.serve_ms, a.raw_ms,
              a.serve_ms / a.raw_ms);
  nlohmann::json summary = {{"live", live_rows},
                            {"api", {{"turns", api_turns}, {"events", a.events}, {"spans", a.spans}, {"bytes", a.bytes},
                                     {"serve_ms", a.serve_ms}, {"raw_ms", a.raw_ms}}}};
  std::printf("%s\n", summary.dump().c_str());
  if (dir_flag.empty()) fs::remove_all(root);
  return 0;
}
