// Tools nodes (docs/scale-out.md), for real: `carapace node` processes on
// 127.0.0.1 with certificates from `carapace node certs`, a session host
// (a Runtime here, or `carapace run`) sending them calls over CAF's io
// middleman with mutual TLS; nodes killed (SIGKILL), frozen (SIGSTOP) and
// cut off (a proxy that black-holes the link), and a host killed mid-call.
// Each node's --exec-log is the record of what really ran there.
#define BOOST_TEST_MODULE node_test
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "replay/fault_plan.h"
#include "replay/replay_report.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "tests/support/cli_runner.h"
#include "tests/support/node_cluster.h"
#include "tests/support/printing.h"
#include "replay/tcp_fault_proxy.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

using testing::contains;
using testing::count_lines;
using testing::NodeProcess;
using testing::wait_for;

struct Fixture : testing::NodeCluster {
  std::unique_ptr<Runtime> rt;

  Fixture() : NodeCluster({"host", "n1", "n2"}) {}
  ~Fixture() { rt.reset(); }

  Config config(const std::string& scenario, const std::vector<NodeRoute>& routes, const std::string& host_tls) {
    Config c;
    c.provider.scenario = file("scenario.json", scenario);
    c.workspace = dir.sub("host-workspace");
    std::filesystem::create_directories(c.workspace);
    c.nodes = routes;
    c.node_net.tls_dir = dir.sub(host_tls);
    c.node_net.heartbeat_ms = 200;
    c.node_net.connection_timeout_ms = 1000;
    return c;
  }

  void open(Config c, std::shared_ptr<FaultPlan> faults = nullptr) {
    Runtime::Options o;
    o.home = dir.sub("host-home");
    o.config = std::move(c);
    o.builtin_tools = true;
    o.faults = std::move(faults);
    CHECK_OK(Runtime::open(std::move(o), &rt));
  }

  // Runs the session `id` to its end.
  SessionOutcome run(const std::string& id) {
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "go"}, nullptr));
    SessionOutcome o;
    CHECK_OK(rt->wait(id, 60s, &o));
    return o;
  }

  std::vector<Event> events(const std::string& id) {
    std::vector<Event> out;
    CHECK_OK(rt->read_events(id, 1, &out));
    return out;
  }
  // Replayed offline with every node gone: where each call ran, and each
  // loss, comes from the log.
  void replays_identically(const std::string& id) {
    for (auto& n : nodes) stop(n, SIGKILL);
    ReplayReport report;
    CHECK_OK(rt->replay(id, 0, &report));
    std::string diffs;
    if (report.divergence) {
      for (const auto& f : report.divergence->fields) diffs += " " + f.field + ": " + f.expected + " / " + f.actual;
    }
    BOOST_TEST(report.identical(),
               "the replay diverged at seq " << (report.divergence ? report.divergence->seq : 0) << ":" << diffs);
    BOOST_TEST(report.events > 10u);
  }

  template <typename T>
  std::vector<T> of_type(const std::string& id) {
    std::vector<T> out;
    for (const auto& e : events(id)) {
      if (const auto* x = get_if<T>(e)) out.push_back(*x);
    }
    return out;
  }
};

NodeRoute route(const std::string& name, uint16_t port, std::vector<std::string> tools = {"shell", "list_dir"}) {
  return NodeRoute{.name = name, .address = "127.0.0.1:" + std::to_string(port), .tools = std::move(tools)};
}

std::string shell_then_done(const std::string& command) {
  return json{{"replies",
               {{{"tool_calls", {{{"name", "shell"}, {"args", {{"command", command}}}}}}}, {{"text", "done"}}}}}
      .dump();
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(nodes, Fixture)

BOOST_AUTO_TEST_CASE(a_call_runs_on_its_node_in_the_nodes_workspace) {
  NodeProcess& n1 = start_node("n1");
  open(config(shell_then_done("echo made > here.txt && pwd"), {route("n1", n1.port)}, "tls-host"));
  SessionOutcome o = run("s1");
  BOOST_TEST(o.final_answer == "done");
  auto requested = of_type<ToolRequested>("s1");
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(requested.size() == 1u);
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(requested[0].node == "n1");  // the intent names the node before the call is sent
  BOOST_TEST(completed[0].node == "n1");
  BOOST_TEST(!completed[0].is_error, completed[0].output);
  // The node's own workspace, one directory per session; the host's is untouched.
  BOOST_TEST(contains(completed[0].output, "home-n1/node-workspaces/s1"), completed[0].output);
  BOOST_TEST(std::filesystem::exists(n1.home + "/node-workspaces/s1/here.txt"));
  BOOST_TEST(!std::filesystem::exists(dir.sub("host-workspace/here.txt")));
  BOOST_TEST(count_lines(testing::CliRunner::slurp(n1.exec_log), "s1 ") == 1u);
  replays_identically("s1");
}

BOOST_AUTO_TEST_CASE(the_hosts_fault_plan_reaches_calls_sent_to_nodes) {
  NodeProcess& n1 = start_node("n1");
  const std::string scenario =
      json{{"replies",
            {{{"tool_calls", {{{"name", "shell"}, {"args", {{"command", "echo first"}}}}}}},
             {{"tool_calls", {{{"name", "shell"}, {"args", {{"command", "echo second"}}}}}}},
             {{"text", "done"}}}}}
          .dump();
  std::shared_ptr<FaultPlan> plan;
  CHECK_OK(FaultPlan::parse(R"({"faults": [
      {"point": "tool.before_exec", "action": "error", "nth": 1},
      {"point": "tool.after_exec", "action": "error", "nth": 1, "message": "lost on the way back"}]})",
                            "plan.json", &plan));
  open(config(scenario, {route("n1", n1.port)}, "tls-host"), plan);
  run("s1");
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 2u);
  // Failed before it was sent: the node never ran it.
  BOOST_TEST(completed[0].output == "tool shell failed: injected fault");
  // Ran on the node; the host made its result an error on the way back.
  BOOST_TEST(completed[1].output == "tool shell failed after running: lost on the way back");
  BOOST_TEST(completed[1].node == "n1");
  BOOST_TEST(of_type<FaultInjected>("s1").size() == 2u);
  const std::string ran = testing::CliRunner::slurp(n1.exec_log);
  BOOST_TEST(count_lines(ran, "s1 ") == 1u, ran);
}

BOOST_AUTO_TEST_CASE(a_session_workspace_that_is_a_link_is_refused) {
  NodeProcess& n1 = start_node("n1");
  std::filesystem::create_directories(n1.home + "/node-workspaces");
  std::filesystem::create_directory_symlink("/", n1.home + "/node-workspaces/s1");  // left by someone
  open(config(shell_then_done("pwd"), {route("n1", n1.port)}, "tls-host"));
  run("s1");
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].is_error);
  BOOST_TEST(contains(completed[0].output, "refuses the session's workspace"), completed[0].output);
  BOOST_TEST(testing::CliRunner::slurp(n1.exec_log).empty());  // nothing ran
}

BOOST_AUTO_TEST_CASE(a_node_killed_mid_call_gives_an_unknown_outcome_once_and_the_other_node_goes_on) {
  NodeProcess& n1 = start_node("n1");
  NodeProcess& n2 = start_node("n2");
  const std::string scenario =
      json{{"replies",
            {{{"tool_calls", {{{"name", "shell"}, {"args", {{"command", "sleep 20"}}}}}}},
             {{"tool_calls", {{{"name", "shell"}, {"args", {{"command", "echo after"}}}}}}},
             {{"text", "done"}}}}}
          .dump();
  open(config(scenario, {route("n1", n1.port), route("n2", n2.port)}, "tls-host"));
  CHECK_OK(rt->start_session(SessionOptions{.id = "s1", .task = "go"}, nullptr));
  BOOST_REQUIRE(wait_for([&] { return contains(testing::CliRunner::slurp(n1.exec_log), "s1 "); }));
  const auto killed = Clock::now();
  ::kill(n1.pid, SIGKILL);
  SessionOutcome o;
  CHECK_OK(rt->wait("s1", 60s, &o));
  const auto detected_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count();
  BOOST_TEST_MESSAGE("a killed node's call answered, and the next one run, " << detected_ms << " ms after the kill");
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 2u);
  BOOST_TEST_MESSAGE("the model read: " << completed[0].output);
  BOOST_TEST(completed[0].interrupted);
  BOOST_TEST(completed[0].node == "n1");
  BOOST_TEST(contains(completed[0].output, "the tools node n1"), completed[0].output);
  BOOST_TEST(contains(completed[0].output, "whether it took effect is unknown"), completed[0].output);
  // n1's broken TLS link left n2's alone (CAF's TLS module needs
  // actors/node/openssl_error_queue for that): the next call ran there.
  BOOST_TEST(!completed[1].is_error, completed[1].output);
  BOOST_TEST(completed[1].node == "n2");
  BOOST_TEST(contains(completed[1].output, "after"), completed[1].output);
  // The kernel closes a dead process's connections: noticed at once, far
  // inside the 1000 ms time-out that a silent link needs.
  BOOST_TEST(detected_ms < 1000);
  BOOST_TEST(o.final_answer == "done");  // the model was told, and went on
  BOOST_TEST(of_type<ToolRequested>("s1").size() == 2u);  // the lost call never sent again
  replays_identically("s1");
}

BOOST_AUTO_TEST_CASE(a_frozen_node_is_lost_within_the_connection_timeout) {
  NodeProcess& n1 = start_node("n1");
  open(config(shell_then_done("sleep 20"), {route("n1", n1.port)}, "tls-host"));
  CHECK_OK(rt->start_session(SessionOptions{.id = "s1", .task = "go"}, nullptr));
  BOOST_REQUIRE(wait_for([&] { return contains(testing::CliRunner::slurp(n1.exec_log), "s1 "); }));
  const auto frozen = Clock::now();
  ::kill(n1.pid, SIGSTOP);
  SessionOutcome o;
  CHECK_OK(rt->wait("s1", 60s, &o));
  const auto detected_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - frozen).count();
  BOOST_TEST_MESSAGE("a frozen node's call answered after " << detected_ms << " ms");
  // connection_timeout 1000 ms, heartbeat 200 ms: silence is noticed within both, plus scheduling.
  BOOST_TEST(detected_ms >= 800);
  BOOST_TEST(detected_ms < 1000 + 200 + 1000);
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].interrupted);
  BOOST_TEST(completed[0].node == "n1");
}

BOOST_AUTO_TEST_CASE(a_partitioned_nodes_idempotent_call_runs_again_on_another_node) {
  NodeProcess& n1 = start_node("n1");
  NodeProcess& n2 = start_node("n2");
  TcpFaultProxy proxy(n1.port);
  const std::string scenario =
      json{{"replies", {{{"tool_calls", {{{"name", "list_dir"}, {"args", {{"path", "."}}}}}}}, {{"text", "done"}}}}}
          .dump();
  open(config(scenario, {route("n1", proxy.port()), route("n2", n2.port)}, "tls-host"));
  proxy.set_mode(TcpFaultProxy::Mode::kBlackhole);
  const auto cut = Clock::now();
  SessionOutcome o = run("s1");
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cut).count();
  BOOST_TEST_MESSAGE("a partitioned node's idempotent call completed elsewhere after " << took_ms << " ms");
  auto requested = of_type<ToolRequested>("s1");
  BOOST_REQUIRE(requested.size() == 2u);
  BOOST_TEST(requested[0].node == "n1");  // both up and idle: the first in the configuration
  BOOST_TEST(requested[1].node == "n2");
  BOOST_TEST(requested[1].attempt == 2u);
  BOOST_TEST(contains(requested[1].retry_reason, "the tools node n1"), requested[1].retry_reason);
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(!completed[0].is_error, completed[0].output);
  BOOST_TEST(completed[0].node == "n2");
  BOOST_TEST(o.final_answer == "done");
  replays_identically("s1");
}

BOOST_AUTO_TEST_CASE(a_host_killed_mid_call_gets_the_nodes_recorded_result_on_resume) {
  NodeProcess& n1 = start_node("n1");
  const std::string host_home = dir.sub("cli-host");
  std::filesystem::create_directories(host_home);
  ::chmod(host_home.c_str(), 0700);
  json cfg = {{"provider", {{"name", "scripted"}, {"scenario", file("scenario.json", shell_then_done(
                                                                                  "sleep 1.5; echo ran-once"))}}},
              {"session", {{"workspace", dir.path()}}},
              {"nodes", {{{"name", "n1"}, {"role", "tools"}, {"address", "127.0.0.1:" + std::to_string(n1.port)},
                          {"tools", {"shell"}}}}},
              {"node_options", {{"tls", dir.sub("tls-host")}, {"heartbeat_ms", 200}, {"connection_timeout_ms", 1000}}}};
  const std::string config_path = file("host.json", cfg.dump());
  const std::string pidfile = dir.sub("host.pid"), out = dir.sub("host.out");
  const std::string cmd = "'" + std::string(CARAPACE_BIN) + "' --home '" + host_home + "' --log-level info run --config '" + config_path +
                          "' --session s1 go >'" + out + "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
  BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
  const pid_t host = static_cast<pid_t>(std::stol(testing::CliRunner::slurp(pidfile)));
  BOOST_REQUIRE_MESSAGE(wait_for([&] { return contains(testing::CliRunner::slurp(n1.exec_log), "s1 "); }, 90s),
                        testing::CliRunner::slurp(out) + "\n-- the node --\n" + testing::CliRunner::slurp(n1.log));
  ::kill(host, SIGKILL);  // the host dies with the call running on the node
  BOOST_REQUIRE(wait_for([&] { return ::kill(host, 0) != 0; }, 10s));
  std::this_thread::sleep_for(2500ms);  // the node finishes the call and records it
  auto r = cli(host_home, "resume s1 --config '" + config_path + "'");
  BOOST_TEST(r.code == 0, r.out + r.err);
  auto show = cli(host_home, "log show s1 --json");
  BOOST_REQUIRE(show.code == 0);
  // Ran once, and its real result reached the model: the node's ledger answered.
  BOOST_TEST(count_lines(testing::CliRunner::slurp(n1.exec_log), "s1 ") == 1u);
  BOOST_TEST(contains(show.out, "ran-once"), show.out);
  BOOST_TEST(!contains(show.out, "whether it took effect is unknown"), show.out);
  stop(n1, SIGKILL);
  auto replayed = cli(host_home, "replay s1");
  BOOST_TEST(replayed.code == 0, replayed.out + replayed.err);
  BOOST_TEST(contains(replayed.out, "identical: "), replayed.out);
}

BOOST_AUTO_TEST_CASE(a_node_that_died_mid_call_says_so_after_its_restart_and_never_runs_it_again) {
  NodeProcess* n1 = &start_node("n1");
  const std::string host_home = dir.sub("cli-host");
  std::filesystem::create_directories(host_home);
  ::chmod(host_home.c_str(), 0700);
  auto host_config = [&](uint16_t port) {
    json cfg = {{"provider", {{"name", "scripted"}, {"scenario", dir.sub("scenario.json")}}},
                {"session", {{"workspace", dir.path()}}},
                {"nodes", {{{"name", "n1"}, {"role", "tools"}, {"address", "127.0.0.1:" + std::to_string(port)},
                            {"tools", {"shell"}}}}},
                {"node_options", {{"tls", dir.sub("tls-host")}, {"heartbeat_ms", 200}, {"connection_timeout_ms", 1000}}}};
    return file("host.json", cfg.dump());
  };
  file("scenario.json", shell_then_done("sleep 3; echo ran >> effects"));
  const std::string pidfile = dir.sub("host.pid"), out = dir.sub("host.out");
  const std::string cmd = "'" + std::string(CARAPACE_BIN) + "' --home '" + host_home + "' --log-level info run --config '" +
                          host_config(n1->port) + "' --session s1 go >'" + out + "' 2>&1 </dev/null & echo $! >'" +
                          pidfile + "'";
  BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
  const pid_t host = static_cast<pid_t>(std::stol(testing::CliRunner::slurp(pidfile)));
  BOOST_REQUIRE_MESSAGE(wait_for([&] { return contains(testing::CliRunner::slurp(n1->exec_log), "s1 "); }, 90s),
                        testing::CliRunner::slurp(out) + "\n-- the node --\n" + testing::CliRunner::slurp(n1->log));
  ::kill(host, SIGKILL);  // both die with the call running
  stop(*n1, SIGKILL);
  BOOST_REQUIRE(wait_for([&] { return ::kill(host, 0) != 0; }, 10s));
  n1 = &start_node("n1");  // the same home and ledger, another port
  auto r = cli(host_home, "resume s1 --config '" + host_config(n1->port) + "'");
  BOOST_TEST(r.code == 0, r.out + r.err);
  auto show = cli(host_home, "log show s1 --json");
  BOOST_TEST(contains(show.out, "the tools node n1 stopped while it ran, so whether it took effect is unknown"),
             show.out);
  BOOST_TEST(count_lines(testing::CliRunner::slurp(n1->exec_log), "s1 ") == 1u);
}

BOOST_AUTO_TEST_CASE(a_host_with_a_certificate_from_another_ca_is_refused) {
  NodeProcess& n1 = start_node("n1");
  certs("stranger", dir.sub("other-ca"));
  open(config(shell_then_done("echo should-not-run"), {route("n1", n1.port)}, "tls-stranger"));
  run("s1");
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].is_error);
  BOOST_TEST(contains(completed[0].output, "no tools node that runs shell is up"), completed[0].output);
  BOOST_TEST(of_type<ToolRequested>("s1").empty());  // refused before any intent
  BOOST_TEST(testing::CliRunner::slurp(n1.exec_log).empty());
}

BOOST_AUTO_TEST_CASE(a_client_without_a_valid_certificate_cannot_complete_a_handshake) {
  NodeProcess& n1 = start_node("n1");
  certs("stranger", dir.sub("other-ca"));
  const std::string to = "-connect 127.0.0.1:" + std::to_string(n1.port) + " -CAfile '" + dir.sub("tls-n1/ca.crt") + "'";
  auto handshake = [&](const std::string& client) {
    const std::string o = dir.sub("sclient.out");
    // Input held open a second: a refused client reads the server's alert
    // (TLS 1.3 sends it after the client's Finished), an accepted one the
    // middleman's first bytes.
    std::system(("sleep 1 | timeout 10 openssl s_client " + to + " " + client + " >'" + o + "' 2>&1").c_str());
    return testing::CliRunner::slurp(o);
  };
  const std::string good = handshake("-cert '" + dir.sub("tls-host/node.crt") + "' -key '" + dir.sub("tls-host/node.key") + "'");
  BOOST_TEST(contains(good, "Verify return code: 0"), good);
  BOOST_TEST(!contains(good, "alert"), good);
  const std::string none = handshake("");
  BOOST_TEST(contains(none, "alert"), none);  // certificate required
  const std::string other = handshake("-cert '" + dir.sub("tls-stranger/node.crt") + "' -key '" + dir.sub("tls-stranger/node.key") + "'");
  BOOST_TEST(contains(other, "alert"), other);  // unknown ca
  BOOST_TEST(testing::CliRunner::slurp(n1.exec_log).empty());
}

BOOST_AUTO_TEST_CASE(a_node_that_comes_up_later_is_connected_to_within_about_a_second) {
  const uint16_t port = testing::free_loopback_port();
  open(config(shell_then_done("echo reached"), {route("n1", port)}, "tls-host"));  // nothing listens yet
  const auto started = Clock::now();
  start_node("n1", "", "", port);
  // Each try is a session whose call is refused until the router has the node.
  int tries = 0;
  std::string ran_in;
  while (Clock::now() - started < 15s && ran_in.empty()) {
    const std::string id = "try" + std::to_string(++tries);
    run(id);
    auto completed = of_type<ToolCompleted>(id);
    BOOST_REQUIRE(completed.size() == 1u);
    if (!completed[0].is_error) {
      ran_in = id;
      BOOST_TEST(completed[0].node == "n1");
      BOOST_TEST(contains(completed[0].output, "reached"), completed[0].output);
    } else {
      BOOST_TEST(contains(completed[0].output, "not run"), completed[0].output);
      std::this_thread::sleep_for(50ms);
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  BOOST_TEST_MESSAGE("a node started after its host was reached after " << ms << " ms, " << tries << " tries");
  BOOST_REQUIRE(!ran_in.empty());
  BOOST_TEST(ms < 4000);  // started, then one reconnection a second
}

BOOST_AUTO_TEST_CASE(a_call_a_node_that_is_up_never_answers_times_out_at_its_deadline) {
  NodeProcess& n1 = start_node("n1", "--test-mutation silent");  // heartbeats on, calls never answered
  Config c = config(shell_then_done("echo hi"), {route("n1", n1.port)}, "tls-host");
  c.tool_timeout_ms = 1000;  // the call's deadline: 1 s + the 2 s grace + 5 s for the trip
  open(c);
  const auto start = Clock::now();
  SessionOutcome o = run("s1");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].timed_out);
  BOOST_TEST(!completed[0].interrupted);
  BOOST_TEST(completed[0].node == "n1");
  BOOST_TEST(contains(completed[0].output, "gave no answer within 8000 ms; the call may still be running there"),
             completed[0].output);
  BOOST_TEST(ms >= 8000);
  BOOST_TEST(ms < 12'000);  // the router's deadline, not the session's backstop (13 s)
  BOOST_TEST(o.final_answer == "done");
}

BOOST_AUTO_TEST_CASE(without_a_node_up_a_routed_call_is_refused_not_run_here) {
  // A port nothing listens on.
  open(config(shell_then_done("echo here > ran-on-host"), {route("n1", 1)}, "tls-host"));
  run("s1");
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(contains(completed[0].output, "The call was not run: no tools node that runs shell is up: n1"),
             completed[0].output);
  BOOST_TEST(!std::filesystem::exists(dir.sub("host-workspace/ran-on-host")));
}

BOOST_AUTO_TEST_CASE(a_nodes_mcp_tools_are_declared_to_the_model_and_run_on_the_node) {
  // The node has an MCP server; the host has none and routes mcp__t__* there.
  const std::string node_config = file(
      "n1-mcp.json",
      json{{"mcp_servers", {{"t", {{"command", MCP_TEST_SERVER}, {"timeout_ms", 20000}}}}}}.dump());
  NodeProcess& n1 = start_node("n1", "--config '" + node_config + "'");
  const std::string scenario =
      json{{"replies",
            {{{"tool_calls", {{{"name", "mcp__t__note"}, {"args", {{"text", "from the model"}}}}}}}, {{"text", "done"}}}}}
          .dump();
  open(config(scenario, {route("n1", n1.port, {"mcp__t__*"})}, "tls-host"));
  SessionOutcome o = run("s1");
  BOOST_TEST(o.final_answer == "done", o.error);
  // Declared to the model as the node describes it.
  auto configured = of_type<SessionConfigured>("s1");
  BOOST_REQUIRE(!configured.empty());
  BOOST_TEST(contains(configured[0].tools.text, "mcp__t__note"), configured[0].tools.text);
  // Run on the node, in the session's workspace there; not here.
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].node == "n1");
  BOOST_TEST(!completed[0].is_error, completed[0].output);
  BOOST_TEST(contains(testing::CliRunner::slurp(n1.home + "/node-workspaces/s1/notes.txt"), "from the model"));
  BOOST_TEST(!std::filesystem::exists(dir.sub("host-workspace/notes.txt")));
  replays_identically("s1");
}

BOOST_AUTO_TEST_CASE(a_node_confined_to_its_own_paths_cannot_read_the_hosts_home) {
  // On one machine the node's sandbox is what keeps it out of the host's
  // home: its config lets its commands read the system and its own home only.
  const std::string host_home = dir.sub("host-home");
  std::filesystem::create_directories(host_home);
  std::ofstream(host_home + "/secret.txt") << "host-secret-4b1d";
  json readable = json::array();
  for (const char* p : {"/usr", "/bin", "/lib", "/lib64", "/etc"}) {
    if (std::filesystem::exists(p)) readable.push_back(p);
  }
  readable.push_back(dir.sub("home-n1"));
  std::filesystem::create_directories(dir.sub("home-n1"));
  const std::string node_config =
      file("n1-confined.json", json{{"tools", {{"sandbox", "workspace-write"}, {"sandbox_readable", readable}}}}.dump());
  NodeProcess& n1 = start_node("n1", "--config '" + node_config + "'");
  open(config(shell_then_done("cat '" + host_home + "/secret.txt'; echo status=$?"), {route("n1", n1.port)},
              "tls-host"));
  SessionOutcome o = run("s1");
  BOOST_TEST(o.final_answer == "done", o.error);
  auto completed = of_type<ToolCompleted>("s1");
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].node == "n1");
  BOOST_TEST(!contains(completed[0].output, "host-secret-4b1d"), completed[0].output);
  BOOST_TEST(contains(completed[0].output, "Permission denied"), completed[0].output);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(node_config)

BOOST_AUTO_TEST_CASE(bad_node_settings_are_refused_with_the_key_named) {
  struct Case {
    const char* json;
    const char* says;
  } cases[] = {
      {R"({"nodes": [{"role": "tools", "address": "127.0.0.1:7001", "tools": ["shell"]}]})", "node_options.tls: is required"},
      {R"({"nodes": [{"role": "collector", "address": "127.0.0.1:7001", "tools": ["shell"]}],
          "node_options": {"tls": "x"}})",
       "a collector node gets every session's events"},
      {R"({"nodes": [{"role": 7, "address": "127.0.0.1:7001"}], "node_options": {"tls": "x"}})",
       "must be \"tools\", \"provider\" or \"collector\""},
      {R"({"provider": {"name": "openai"}, "nodes": [{"role": "provider", "address": "127.0.0.1:7001",
          "tools": ["shell"]}], "node_options": {"tls": "x"}})",
       "nodes[0].tools: is for tools nodes"},
      {R"({"nodes": [{"role": "provider", "address": "127.0.0.1:7001"}], "node_options": {"tls": "x"}})",
       "provider nodes answer for \"openai\" or \"anthropic\""},
      {R"({"provider": {"name": "openai"}, "nodes": [{"name": "a", "role": "provider", "address": "127.0.0.1:7001"},
          {"name": "a", "role": "tools", "address": "127.0.0.1:7002", "tools": ["shell"]}], "node_options": {"tls": "x"}})",
       "names two nodes"},
      {R"({"nodes": [{"role": "tools", "address": "127.0.0.1", "tools": ["shell"]}], "node_options": {"tls": "x"}})",
       "nodes[0].address"},
      {R"({"nodes": [{"role": "tools", "address": "127.0.0.1:70000", "tools": ["shell"]}], "node_options": {"tls": "x"}})",
       "1 to 65535"},
      {R"({"nodes": [{"role": "tools", "address": "127.0.0.1:7001"}], "node_options": {"tls": "x"}})", "nodes[0].tools"},
      {R"({"nodes": [{"name": "a", "role": "tools", "address": "127.0.0.1:7001", "tools": ["shell"]},
                     {"name": "a", "role": "tools", "address": "127.0.0.1:7002", "tools": ["shell"]}],
          "node_options": {"tls": "x"}})",
       "names two nodes"},
      {R"({"nodes": [{"role": "tools", "address": "10.0.0.5:7001", "tools": ["shell"]}],
          "node_options": {"insecure_loopback": true}})",
       "127.0.0.1 only"},
      {R"({"node_options": {"tls": "x", "heartbeat_ms": 1000, "connection_timeout_ms": 1500}})", "two heartbeats"},
      {R"({"node_options": {"tls": "x", "fallback": "maybe"}})", "node_options.fallback"},
  };
  for (const auto& c : cases) {
    Config config;
    std::vector<std::string> warnings;
    Status s = parse_config(c.json, "config.json", &config, &warnings);
    BOOST_TEST(!s.ok(), c.json);
    BOOST_TEST(contains(s.message(), c.says), s.message());
  }
  Config ok;
  std::vector<std::string> warnings;
  CHECK_OK(parse_config(R"({"nodes": [{"name": "sandbox-1", "role": "tools", "address": "10.0.0.5:7001",
                                       "tools": ["shell", "mcp:*"]}],
                            "node_options": {"tls": "/etc/carapace/tls", "fallback": "local"}})",
                        "config.json", &ok, &warnings));
  BOOST_REQUIRE(ok.nodes.size() == 1u);
  BOOST_TEST(ok.nodes[0].name == "sandbox-1");
  BOOST_TEST(ok.node_net.heartbeat_ms == 1000u);
  BOOST_TEST(ok.node_net.connection_timeout_ms == 5000u);
  BOOST_TEST((ok.node_net.fallback == NodeFallback::kLocal));
  Config gateway;
  CHECK_OK(parse_config(R"({"provider": {"name": "anthropic"},
                            "nodes": [{"name": "gw", "role": "provider", "address": "10.0.0.9:7402"}],
                            "node_options": {"tls": "/etc/carapace/tls"}})",
                        "config.json", &gateway, &warnings));
  BOOST_TEST(gateway.nodes.empty());
  BOOST_REQUIRE(gateway.provider_nodes.size() == 1u);
  BOOST_TEST(gateway.provider_nodes[0].name == "gw");
}

BOOST_AUTO_TEST_SUITE_END()
