// nodes_bench: what tools nodes cost and how fast a lost one is noticed
// (docs/scale-out.md). Every node is a real `carapace node` process on
// 127.0.0.1 with mutual TLS (certificates from `carapace node certs`).
//
//   build/bench/nodes_bench [--sessions S] [--turns T] [--quick]
//
// (t) Throughput: S sessions at once, T turns each, every turn one list_dir
//     call, on one session host. Baseline: the same sessions with the tool
//     in the host's process, in the same run. Then 1, 2 and 4 tools nodes.
// (c) Cost per call: one session, T turns, sequential: (remote - local) / T.
// (p) Provider nodes: one session of T turns, each a model call to a model
//     server on 127.0.0.1 (OpenAI's streamed format), with the provider in
//     the host's process (the baseline, same run) and through a provider
//     node: the difference per model call.
// (k) Collector nodes: the same S sessions with every event also sent to a
//     collector node (baseline: none, same run), and the time the close
//     waits for the node to hold them; then a collector that was down
//     catching up: the sessions' events read back from the host's log and
//     written (synced) into the node's copy, with spans, in events/s.
// (d) Detection: a call in flight (shell `sleep 30`) when its node is
//     killed (SIGKILL), frozen (SIGSTOP) or cut off (a proxy black-holes
//     the link); the time until the session has the call's outcome, with
//     the default heartbeat (1 s) and connection time-out (5 s).
// Prints a table, then one JSON object as the last line.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/collector/remote/collector_shipper.h"
#include "actors/tool/remote/node_protocol.h"
#include "runtime/logging.h"
#include "runtime/runtime.h"
#include "storage/event_log.h"
#include "tests/support/fake_model.h"
#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"
#include "replay/tcp_fault_proxy.h"

using namespace carapace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "nodes_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CPU time (user + system) of this process: the session host's, without the nodes'.
double cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Node {
  pid_t pid = 0;
  uint16_t port = 0;
};

struct Bench {
  fs::path dir;
  std::vector<Node> nodes;

  void sh(const std::string& cmd) {
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "nodes_bench: failed: %s\n", cmd.c_str());
      std::exit(1);
    }
  }

  void certs(const std::string& who) {
    sh("'" CARAPACE_BIN "' --home '" + (dir / "certhome").string() + "' node certs '" + (dir / ("tls-" + who)).string() +
       "' --ca '" + (dir / "ca").string() + "' --name " + who + " >/dev/null");
  }

  // `exec_log`: the node records each execution there (the detection runs wait for it).
  Node start_node(int i, const std::string& exec_log = "", const std::string& extra = "", uint16_t port = 0) {
    const std::string name = "n" + std::to_string(i);
    const fs::path home = dir / ("home-" + name);
    fs::create_directories(home);
    ::chmod(home.c_str(), 0700);
    const std::string log = (dir / (name + ".log")).string(), pidfile = (dir / (name + ".pid")).string();
    fs::remove(log);  // a node started before under this name said where it listened
    sh("'" CARAPACE_BIN "' --home '" + home.string() + "' node --listen 127.0.0.1:" + std::to_string(port) + " --tls '" +
       (dir / ("tls-" + name)).string() + "' " + (exec_log.empty() ? "" : "--exec-log '" + exec_log + "' ") + extra + " >'" + log + "' 2>&1 </dev/null & echo $! >'" + pidfile + "'");
    Node n{.pid = static_cast<pid_t>(std::stol(slurp(pidfile)))};
    for (int k = 0; k < 3000 && slurp(log).find("listening on") == std::string::npos; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const std::string text = slurp(log);
    if (text.find("listening on") == std::string::npos) {
      std::fprintf(stderr, "nodes_bench: node %s did not start: %s\n", name.c_str(), text.c_str());
      std::exit(1);
    }
    n.port = static_cast<uint16_t>(std::stoi(text.substr(text.find("127.0.0.1:") + 10)));
    nodes.push_back(n);
    return n;
  }

  void stop_all() {
    for (auto& n : nodes) {
      ::kill(n.pid, SIGCONT);
      ::kill(n.pid, SIGKILL);
    }
    nodes.clear();
  }

  // `provider`: the HTTP provider's settings (name, model, base_url), or
  // null for the scripted one; `provider_port`: a provider node's, or 0.
  std::unique_ptr<Runtime> open(const std::string& scenario_json, const std::vector<uint16_t>& ports,
                                const std::string& tool, const std::string& label, const json& provider = nullptr,
                                uint16_t provider_port = 0, uint16_t collector_port = 0) {
    const fs::path run = dir / label;
    fs::create_directories(run / "ws");
    std::ofstream(run / "scenario.json") << scenario_json;
    Config config;
    config.provider.scenario = (run / "scenario.json").string();
    config.workspace = (run / "ws").string();
    config.max_turns = 100000;
    for (size_t i = 0; i < ports.size(); ++i) {
      config.nodes.push_back(NodeRoute{.name = "n" + std::to_string(i + 1),
                                       .address = "127.0.0.1:" + std::to_string(ports[i]),
                                       .tools = {tool}});
    }
    if (!provider.is_null()) {
      config.provider.name = provider["name"];
      config.provider.model = provider["model"];
      config.provider.base_url = provider["base_url"];
      config.provider.base_url_is_explicit = true;
    }
    if (provider_port != 0) {
      config.provider_nodes.push_back(
          NodeRoute{.name = "gw", .address = "127.0.0.1:" + std::to_string(provider_port)});
    }
    if (collector_port != 0) {
      config.collector_nodes.push_back(
          NodeRoute{.name = "c1", .address = "127.0.0.1:" + std::to_string(collector_port)});
    }
    config.node_net.tls_dir = (dir / "tls-host").string();
    std::unique_ptr<Runtime> rt;
    Runtime::Options options{.home = (run / "home").string(), .config = config};
    options.builtin_tools = true;
    check(Runtime::open(std::move(options), &rt), "runtime");
    return rt;
  }
};

std::string list_dir_turns(int turns) {
  json replies = json::array();
  for (int i = 0; i < turns; ++i) {
    replies.push_back({{"tool_calls", {{{"name", "list_dir"}, {"args", {{"path", "."}}}}}}});
  }
  replies.push_back({{"text", "done"}});
  return json{{"replies", replies}}.dump();
}

// Wall time of `sessions` sessions at once.
double run_sessions(Runtime& rt, int sessions) {
  const auto start = Clock::now();
  std::vector<std::string> ids;
  for (int i = 0; i < sessions; ++i) {
    std::string id;
    check(rt.start_session(SessionOptions{.task = "go"}, &id), "start");
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    SessionOutcome o;
    check(rt.wait(id, std::chrono::minutes(10), &o), "wait");
    if (o.final_answer != "done") {
      std::fprintf(stderr, "nodes_bench: session %s ended with '%s' %s\n", id.c_str(), o.final_answer.c_str(),
                   o.error.c_str());
      std::exit(1);
    }
  }
  return ms_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nodes_bench: tools nodes' throughput, cost per call and failure detection"};
  int sessions = 16, turns = 50;
  bool quick = false;
  app.add_option("--sessions", sessions, "Sessions at once (throughput)");
  app.add_option("--turns", turns, "Turns per session, one tool call each");
  app.add_flag("--quick", quick, "A smoke run: 4 sessions of 5 turns, no detection");
  CLI11_PARSE(app, argc, argv);
  if (quick) sessions = 4, turns = 5;
  (void)configure_logging(LogOptions{.stderr_level = "error"});

  Bench b;
  b.dir = fs::temp_directory_path() / ("nodes_bench-" + std::to_string(::getpid()));
  fs::create_directories(b.dir);
  for (const char* who : {"host", "n1", "n2", "n3", "n4"}) b.certs(who);
  json out;

  // (t) throughput, and (c) cost per call.
  std::printf("%-28s %12s %12s %10s\n", "tools", "wall ms", "turns/s", "vs local");
  const std::string scenario = list_dir_turns(turns);
  double local_ms = 0;
  {
    auto rt = b.open(scenario, {}, "list_dir", "local");
    local_ms = run_sessions(*rt, sessions);
  }
  const double total_turns = static_cast<double>(sessions) * turns;
  std::printf("%-28s %12.0f %12.0f %10s\n", "in the host's process", local_ms, total_turns / local_ms * 1000, "1.00x");
  out["local"] = {{"wall_ms", local_ms}, {"turns_per_s", total_turns / local_ms * 1000}};
  for (int n : {1, 2, 4}) {
    std::vector<uint16_t> ports;
    for (int i = 1; i <= n; ++i) ports.push_back(b.start_node(i).port);
    auto rt = b.open(scenario, ports, "list_dir", "nodes" + std::to_string(n));
    const double wall = run_sessions(*rt, sessions);
    rt.reset();
    b.stop_all();
    const std::string label = std::to_string(n) + " tools node" + (n > 1 ? "s" : "");
    std::printf("%-28s %12.0f %12.0f %9.2fx\n", label.c_str(), wall, total_turns / wall * 1000, local_ms / wall);
    out["nodes_" + std::to_string(n)] = {{"wall_ms", wall}, {"turns_per_s", total_turns / wall * 1000},
                                          {"vs_local", local_ms / wall}};
  }
  {
    double local_one = 0, remote_one = 0;
    {
      auto rt = b.open(scenario, {}, "list_dir", "local-one");
      local_one = run_sessions(*rt, 1);
    }
    {
      auto rt = b.open(scenario, {b.start_node(1).port}, "list_dir", "remote-one");
      remote_one = run_sessions(*rt, 1);
      rt.reset();
      b.stop_all();
    }
    const double per_call_us = (remote_one - local_one) / turns * 1000;
    std::printf("\none session, %d turns: local %.0f ms, on a node %.0f ms: %.0f us more per call\n", turns, local_one,
                remote_one, per_call_us);
    out["cost_per_call_us"] = per_call_us;
    out["one_session"] = {{"local_ms", local_one}, {"remote_ms", remote_one}, {"turns", turns}};
  }

  // (p) provider nodes: the cost per model call.
  {
    carapace::testing::MockLlmServer server;
    server.set_handler([turns](const carapace::testing::MockRequest& r, size_t) {
      const auto c = carapace::testing::read_conversation("openai", r.body);
      carapace::testing::WireAnswer a{.input = 100, .output = 10};
      if (c.results < turns) {
        a.calls = {{.id = "call_" + std::to_string(c.results), .name = "list_dir", .arg_pieces = {R"({"path": ".")", "}"}}};
      } else {
        a.text_pieces = {"do", "ne"};
      }
      return carapace::testing::MockReply{.headers = {"Content-Type: text/event-stream"},
                                          .body = carapace::testing::openai_stream(a)};
    });
    const json provider = {{"name", "openai"}, {"model", "gpt-4o-mini"}, {"base_url", server.url() + "/v1"}};
    double host_ms = 0, remote_ms = 0;
    {
      auto rt = b.open("{}", {}, "list_dir", "provider-local", provider);
      host_ms = run_sessions(*rt, 1);
    }
    {
      const fs::path node_config = b.dir / "gw.json";
      std::ofstream(node_config) << json{{"provider", provider}}.dump();
      Node gw = b.start_node(1, "", "--role provider --config '" + node_config.string() + "'");
      auto rt = b.open("{}", {}, "list_dir", "provider-remote", provider, gw.port);
      remote_ms = run_sessions(*rt, 1);
      rt.reset();
      b.stop_all();
    }
    const double calls = turns + 1.0;
    const double per_call_us = (remote_ms - host_ms) / calls * 1000;
    std::printf("\none session, %.0f model calls: provider in the host %.0f ms, on a provider node %.0f ms: %.0f us "
                "more per call\n",
                calls, host_ms, remote_ms, per_call_us);
    out["provider_cost_per_call_us"] = per_call_us;
    out["provider_one_session"] = {{"host_ms", host_ms}, {"remote_ms", remote_ms}, {"calls", calls}};
  }

  // (k) collector nodes.
  {
    double wall_none = 0, wall_shipped = 0, close_ms = 0, cpu_none = 0, cpu_shipped = 0;
    uint64_t shipped_events = 0;
    {
      auto rt = b.open(scenario, {}, "list_dir", "collector-none");
      const double cpu = cpu_ms();
      wall_none = run_sessions(*rt, sessions);
      rt.reset();
      cpu_none = cpu_ms() - cpu;
    }
    {
      Node c = b.start_node(1, "", "--role collector");
      auto rt = b.open(scenario, {}, "list_dir", "collector-up", nullptr, 0, c.port);
      const double cpu = cpu_ms();
      wall_shipped = run_sessions(*rt, sessions);
      const auto at = Clock::now();
      rt.reset();  // waits until the node holds every event
      close_ms = ms_since(at);
      cpu_shipped = cpu_ms() - cpu;
      b.stop_all();
      std::unique_ptr<EventLog> log;
      check(EventLog::open(EventLog::Options{.path = (b.dir / "collector-up" / "home" / "log").string(),
                                             .mode = EventLog::Mode::kReader},
                           &log),
            "log");
      std::vector<SessionMeta> metas;
      check(log->list_sessions(&metas), "sessions");
      for (const auto& m : metas) {
        uint64_t last = 0;
        check(log->last_seq(m.id, &last), "last_seq");
        shipped_events += last;
      }
    }
    // Down while the sessions run: everything waits in the log.
    const uint16_t down_port = [&] {
      Node c = b.start_node(1, "", "--role collector");
      b.stop_all();
      return c.port;
    }();
    {
      auto rt = b.open(scenario, {}, "list_dir", "collector-down", nullptr, 0, down_port);
      (void)run_sessions(*rt, sessions);
    }
    // Back: a shipper on the home's log sends what the node lacks.
    const fs::path home = b.dir / "collector-down" / "home";
    std::unique_ptr<EventLog> log;
    check(EventLog::open(EventLog::Options{.path = (home / "log").string(), .mode = EventLog::Mode::kReader}, &log),
          "log");
    std::vector<SessionMeta> metas;
    check(log->list_sessions(&metas), "sessions");
    uint64_t events = 0;
    for (const auto& m : metas) {
      uint64_t last = 0;
      check(log->last_seq(m.id, &last), "last_seq");
      events += last;
    }
    Node c = b.start_node(1, "", "--role collector", down_port);
    caf::actor_system_config cfg;
    check(configure_node_system(cfg, NodeNetOptions{.tls_dir = (b.dir / "tls-host").string()}), "node system");
    double catch_up_ms = 0;
    bool caught_up = false;
    {
      caf::actor_system system{cfg};
      const auto at = Clock::now();
      CollectorShipper shipper(
          system, CollectorShipperOptions{.nodes = {NodeRoute{.name = "c1",
                                                              .address = "127.0.0.1:" + std::to_string(c.port)}},
                                          .log = log.get(),
                                          .pending_path = (home / "collector-pending").string()});
      for (int k = 0; k < 6000 && !caught_up; ++k) {
        caught_up = shipper.flush(1000);  // false at once while the node is not up yet
        if (!caught_up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      catch_up_ms = ms_since(at);
      shipper.shutdown(0);
    }
    b.stop_all();
    if (!caught_up) {
      std::fprintf(stderr, "nodes_bench: the collector node did not catch up\n");
      std::exit(1);
    }
    std::printf("\n%-28s %12s %12s %10s\n", "collector node", "wall ms", "turns/s", "vs none");
    std::printf("%-28s %12.0f %12.0f %10s\n", "none", wall_none, total_turns / wall_none * 1000, "1.00x");
    std::printf("%-28s %12.0f %12.0f %9.2fx\n", "every event sent", wall_shipped, total_turns / wall_shipped * 1000,
                wall_none / wall_shipped);
    std::printf("close, until the node holds all %12.0f ms\n", close_ms);
    const double host_cpu_us = (cpu_shipped - cpu_none) / static_cast<double>(shipped_events) * 1000;
    std::printf("the host's CPU: %.0f ms without, %.0f ms sending %llu events: %.1f us more per event\n", cpu_none,
                cpu_shipped, static_cast<unsigned long long>(shipped_events), host_cpu_us);
    std::printf("catching up %llu events of %zu sessions from the log: %.0f ms, %.0f events/s\n",
                static_cast<unsigned long long>(events), metas.size(), catch_up_ms, events / catch_up_ms * 1000);
    out["collector"] = {{"none_turns_per_s", total_turns / wall_none * 1000},
                        {"shipped_turns_per_s", total_turns / wall_shipped * 1000},
                        {"vs_none", wall_none / wall_shipped},
                        {"close_ms", close_ms},
                        {"host_cpu_ms_none", cpu_none},
                        {"host_cpu_ms_shipped", cpu_shipped},
                        {"host_cpu_us_per_event", host_cpu_us},
                        {"catch_up_events", events},
                        {"catch_up_ms", catch_up_ms},
                        {"catch_up_events_per_s", events / catch_up_ms * 1000}};
  }

  // (d) detection, with the defaults.
  if (!quick) {
    const std::string sleeper =
        json{{"replies", {{{"tool_calls", {{{"name", "shell"}, {"args", {{"command", "sleep 30"}}}}}}}, {{"text", "done"}}}}}
            .dump();
    std::printf("\n%-40s %12s\n", "a call in flight when its node is", "answered ms");
    for (const std::string how : {"killed (SIGKILL)", "frozen (SIGSTOP)", "cut off (black-holed)"}) {
      const std::string exec_log = (b.dir / ("exec-" + std::to_string(how.size()))).string();
      Node n = b.start_node(1, exec_log);
      std::unique_ptr<carapace::TcpFaultProxy> proxy;
      uint16_t port = n.port;
      if (how.rfind("cut", 0) == 0) {
        proxy = std::make_unique<carapace::TcpFaultProxy>(n.port);
        port = proxy->port();
      }
      auto rt = b.open(sleeper, {port}, "shell", "detect-" + std::to_string(how.size()));
      std::string id;
      check(rt->start_session(SessionOptions{.task = "go"}, &id), "start");
      // The call is running on the node once the node recorded it.
      for (int k = 0; k < 2000 && slurp(exec_log).empty(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto at = Clock::now();
      if (how.rfind("killed", 0) == 0) ::kill(n.pid, SIGKILL);
      if (how.rfind("frozen", 0) == 0) ::kill(n.pid, SIGSTOP);
      if (proxy) proxy->set_mode(carapace::TcpFaultProxy::Mode::kBlackhole);
      SessionOutcome o;
      check(rt->wait(id, std::chrono::minutes(2), &o), "wait");
      const double took = ms_since(at);
      std::printf("%-40s %12.0f\n", how.c_str(), took);
      out["detect_" + how.substr(0, how.find(' '))] = took;
      rt.reset();
      proxy.reset();
      b.stop_all();
    }
  }
  std::error_code ec;
  fs::remove_all(b.dir, ec);
  out["sessions"] = sessions;
  out["turns"] = turns;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
