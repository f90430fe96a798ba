// serve_host_bench: `carapace serve` hosting many sessions started over its
// API at once, with WebSocket clients watching: the server's threads, its
// memory per session, the API's latency under that load, and how long the
// sessions take against the model's own latency.
//
//   build/bench/serve_host_bench [--sessions N] [--latency-ms L] [--watchers W] [--clients C] [--quick]
//
// One server (its own process, the scripted model answering each session
// after L ms). Baseline, the same server in the same run before the load:
// idle, with nothing running, its threads and RSS, and the latency of
// `POST /api/sessions` (one session at a time, each waited for) and of
// `GET /api/sessions`. Then W WebSocket clients connect and watch, and N
// sessions are started from C client threads at once; meanwhile GET
// /api/sessions is timed every 100 ms and the server's threads and RSS are
// sampled every 20 ms from /proc, until every session has completed.
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
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/ws_client.h"

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Server {
  pid_t pid = 0;
  uint16_t port = 0;
  std::string token;
};

Server start_server(const fs::path& home, const fs::path& scenario, const fs::path& out) {
  std::fflush(stdout);
  Server s;
  s.pid = ::fork();
  if (s.pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    std::freopen((out.string() + ".err").c_str(), "w", stderr);
    ::execl(CARAPACE_BIN, CARAPACE_BIN, "--home", home.c_str(), "serve", "--port", "0", "--scenario",
            scenario.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 600; ++i) {
    std::string text = slurp(out);
    size_t at = text.find("127.0.0.1:");
    if (at != std::string::npos && text.find("Ctrl-C stops") != std::string::npos) {
      std::string line = text.substr(0, text.find('\n'));
      s.port = static_cast<uint16_t>(std::stoi(line.substr(at + 10)));
      s.token = line.substr(line.find("#token=") + 7);
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "serve_host_bench: carapace serve did not start (see %s)\n", out.c_str());
  std::exit(1);
}

// One request over a fresh loopback connection: status and body.
std::pair<int, std::string> call(const Server& s, http::verb method, const std::string& target,
                                 const std::string& body = "") {
  boost::asio::io_context io;
  tcp::socket socket(io);
  boost::beast::error_code ec;
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), s.port), ec);
  if (ec) return {0, ec.message()};
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(s.port));
  req.set(http::field::authorization, "Bearer " + s.token);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  http::write(socket, req, ec);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256 << 20);
  http::read(socket, buffer, parser, ec);
  if (ec) return {0, ec.message()};
  return {static_cast<int>(parser.get().result_int()), parser.get().body()};
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
  size_t n = 0;
};
Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))]; };
  return {at(0.5), at(0.99), v.back(), v.size()};
}
json to_json(const Stats& s) { return {{"p50", s.p50}, {"p99", s.p99}, {"max", s.max}, {"n", s.n}}; }

// Threads and resident memory (KiB) of `pid`, from /proc.
std::pair<long, long> proc_status(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  long threads = 0, rss = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) threads = std::stol(line.substr(8));
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stol(line.substr(6));
  }
  return {threads, rss};
}

// The statuses of the sessions whose id starts with `prefix`: how many completed.
size_t completed(const Server& s, const std::string& prefix) {
  auto [status, body] = call(s, http::verb::get, "/api/sessions");
  json j = json::parse(body, nullptr, false);
  size_t n = 0;
  if (status != 200 || !j.contains("data")) return 0;
  for (const auto& row : j["data"]) {
    if (row["id"].get<std::string>().rfind(prefix, 0) == 0 && row["status"] == "completed") ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"serve_host_bench: carapace serve hosting many sessions started over its API"};
  size_t sessions = 200, watchers = 64, clients = 16, baseline_sessions = 10;
  int latency_ms = 1000;
  bool quick = false;
  std::string dir_arg;
  app.add_option("--sessions", sessions, "Sessions started at once");
  app.add_option("--latency-ms", latency_ms, "The model's latency (the scripted provider's)");
  app.add_option("--watchers", watchers, "WebSocket clients watching");
  app.add_option("--clients", clients, "Threads sending the starts");
  app.add_option("--dir", dir_arg, "Work directory (default: a temporary one, removed)");
  app.add_flag("--quick", quick, "20 sessions, 8 watchers, 200 ms (the smoke test)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    sessions = 20;
    watchers = 8;
    latency_ms = 200;
    baseline_sessions = 3;
  }
  fs::path dir = dir_arg.empty() ? fs::temp_directory_path() / ("serve-host-bench-" + std::to_string(::getpid()))
                                 : fs::path(dir_arg);
  fs::create_directories(dir / "home");
  fs::permissions(dir / "home", fs::perms::owner_all, fs::perm_options::replace);
  {
    json reply = {{"text", "An answer that arrives after the model's latency, streamed in pieces."},
                  {"latency_ms", latency_ms}};
    std::ofstream(dir / "scenario.json") << json{{"replies", json::array({reply})}}.dump();
  }
  Server server = start_server(dir / "home", dir / "scenario.json", dir / "serve.out");
  std::printf("serve_host_bench: %zu sessions, the model answering in %d ms, %zu watchers, %zu client threads\n",
              sessions, latency_ms, watchers, clients);

  // Baseline: idle, then one session at a time.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto [idle_threads, idle_rss] = proc_status(server.pid);
  std::vector<double> idle_get, idle_post;
  for (int i = 0; i < 20; ++i) {
    auto t = Clock::now();
    call(server, http::verb::get, "/api/sessions");
    idle_get.push_back(ms_since(t));
  }
  for (size_t i = 0; i < baseline_sessions; ++i) {
    const std::string id = "base-" + std::to_string(i);
    auto t = Clock::now();
    auto [status, body] = call(server, http::verb::post, "/api/sessions", json{{"task", "hello"}, {"id", id}}.dump());
    idle_post.push_back(ms_since(t));
    if (status != 200) {
      std::fprintf(stderr, "serve_host_bench: a start answered %d: %s\n", status, body.c_str());
      return 1;
    }
    while (completed(server, id) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto [base_threads, base_rss] = proc_status(server.pid);

  // The load.
  std::vector<std::unique_ptr<carapace::testing::WsClient>> ws;
  for (size_t i = 0; i < watchers; ++i) {
    ws.push_back(std::make_unique<carapace::testing::WsClient>(server.port, server.token));
  }
  std::atomic<bool> done{false};
  std::mutex mu;
  long peak_threads = 0, peak_rss = 0;
  std::vector<double> load_get;
  std::thread sampler([&] {
    while (!done) {
      auto [threads, rss] = proc_status(server.pid);
      {
        std::lock_guard lock(mu);
        peak_threads = std::max(peak_threads, threads);
        peak_rss = std::max(peak_rss, rss);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::thread getter([&] {
    while (!done) {
      auto t = Clock::now();
      call(server, http::verb::get, "/api/sessions");
      double ms = ms_since(t);
      {
        std::lock_guard lock(mu);
        load_get.push_back(ms);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<double> load_post;
  std::atomic<size_t> next{0}, failed{0};
  const auto start = Clock::now();
  std::vector<std::thread> senders;
  for (size_t c = 0; c < clients; ++c) {
    senders.emplace_back([&] {
      for (size_t i = next++; i < sessions; i = next++) {
        auto t = Clock::now();
        auto [status, body] =
            call(server, http::verb::post, "/api/sessions", json{{"task", "hello"}, {"id", "load-" + std::to_string(i)}}.dump());
        double ms = ms_since(t);
        std::lock_guard lock(mu);
        load_post.push_back(ms);
        if (status != 200) {
          ++failed;
          std::fprintf(stderr, "serve_host_bench: a start answered %d: %s\n", status, body.substr(0, 200).c_str());
        }
      }
    });
  }
  for (auto& t : senders) t.join();
  const double started_ms = ms_since(start);
  size_t finished = 0;
  for (int i = 0; i < 3000 && finished < sessions - failed; ++i) {
    finished = completed(server, "load-");
    if (finished < sessions - failed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double all_done_ms = ms_since(start);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  done = true;
  sampler.join();
  getter.join();
  size_t ws_messages = 0;
  for (auto& w : ws) ws_messages += w->count();
  auto [after_threads, after_rss] = proc_status(server.pid);
  ws.clear();
  ::kill(server.pid, SIGTERM);
  int status = 0;
  ::waitpid(server.pid, &status, 0);

  Stats ig = stats(idle_get), ip = stats(idle_post), lg = stats(load_get), lp = stats(load_post);
  const double per_session_kib =
      sessions > 0 ? static_cast<double>(peak_rss - base_rss) / static_cast<double>(sessions) : 0;
  std::printf("                              |  idle (baseline) | under load\n");
  std::printf("POST /api/sessions p50/p99 ms | %7.1f %7.1f  | %7.1f %7.1f  (%zu starts from %zu threads)\n", ip.p50,
              ip.p99, lp.p50, lp.p99, lp.n, clients);
  std::printf("GET /api/sessions p50/p99 ms  | %7.1f %7.1f  | %7.1f %7.1f\n", ig.p50, ig.p99, lg.p50, lg.p99);
  std::printf("server threads                | %7ld          | %7ld peak, %ld after\n", base_threads, peak_threads,
              after_threads);
  std::printf("server RSS MiB                | %7.1f          | %7.1f peak (%.1f KiB a session), %.1f after\n",
              base_rss / 1024.0, peak_rss / 1024.0, per_session_kib, after_rss / 1024.0);
  std::printf("all %zu started in %.0f ms; all completed %.0f ms after the first start (the model: %d ms); %zu "
              "failed; %zu WebSocket messages to %zu watchers\n",
              sessions, started_ms, all_done_ms, latency_ms, static_cast<size_t>(failed), ws_messages, watchers);
  json out = {{"sessions", sessions},
              {"latency_ms", latency_ms},
              {"watchers", watchers},
              {"idle", {{"threads", idle_threads}, {"rss_kib", idle_rss}}},
              {"baseline", {{"threads", base_threads}, {"rss_kib", base_rss}, {"post_ms", to_json(ip)}, {"get_ms", to_json(ig)}}},
              {"load",
               {{"peak_threads", peak_threads},
                {"peak_rss_kib", peak_rss},
                {"rss_kib_per_session", per_session_kib},
                {"post_ms", to_json(lp)},
                {"get_ms", to_json(lg)},
                {"started_ms", started_ms},
                {"all_completed_ms", all_done_ms},
                {"failed", static_cast<size_t>(failed)},
                {"completed", finished},
                {"ws_messages", ws_messages}}}};
  std::printf("%s\n", out.dump().c_str());
  if (dir_arg.empty()) fs::remove_all(dir);
  return failed == 0 && finished == sessions ? 0 : 1;
}
