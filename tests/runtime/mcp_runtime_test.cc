// MCP servers in an embedded Runtime: a C++ hook denying an MCP call, the
// servers of two workspaces, and what a destroyed runtime leaves behind
// (nothing: no server, no zombie, even with a call in flight).
#define BOOST_TEST_MODULE mcp_runtime_test
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "replay/replayer.h"
#include "runtime/runtime.h"
#include "tests/support/printing.h"
#include "tests/support/proc_watch.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Children of this process that are zombies (exited, not reaped).
size_t zombie_children() {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 4 >= line.size()) continue;
    if (line[paren + 2] == 'Z' && std::atol(line.c_str() + paren + 4) == ::getpid()) ++n;
  }
  return n;
}

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<Runtime> rt;

  void open(const std::string& scenario_json, const std::string& server_flag) {
    std::ofstream(dir.sub("scenario.json")) << scenario_json;
    Config config;
    config.provider.scenario = dir.sub("scenario.json");
    config.tools_enabled = {};
    config.mcp_servers = {
        McpServerConfig{.name = "t", .command = MCP_TEST_SERVER, .args = {server_flag}, .timeout_ms = 30000}};
    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
  }

  std::string start(const std::string& ws, const std::string& id) {
    fs::create_directories(ws);
    std::string sid;
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "go", .workspace = ws}, &sid));
    return sid;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(mcp_runtime, Fixture)

BOOST_AUTO_TEST_CASE(a_cpp_hook_denies_one_mcp_call_and_each_workspace_has_its_server) {
  open(R"({"replies": [{"text": "1", "tool_calls": [{"name": "mcp__t__note", "args": {"text": "kept"}},
                                                     {"name": "mcp__t__note", "args": {"text": "secret"}}]},
                       {"text": "done"}]})",
       "--page-size=0");
  CHECK_OK(rt->register_hook(HookDefinition{.name = "no-secrets",
                                            .event = HookEvent::kPreToolUse,
                                            .matcher = "^mcp__",
                                            .function = [](const HookInput& in) {
                                              HookDecision d;
                                              if (in.args.text.find("secret") != std::string::npos) {
                                                d.decision = Decision::kDeny;
                                                d.reason = "no secrets in notes";
                                              }
                                              return d;
                                            }}));
  for (std::string ws : {dir.sub("a"), dir.sub("b")}) {
    std::string id = start(ws, "s-" + ws.substr(ws.size() - 1));
    SessionOutcome out;
    CHECK_OK(rt->wait(id, 60s, &out));
    BOOST_TEST((out.status == SessionStatus::kCompleted));
    // The server ran in the session's own workspace.
    std::ifstream notes(ws + "/notes.txt");
    std::string all((std::istreambuf_iterator<char>(notes)), std::istreambuf_iterator<char>());
    BOOST_TEST(all == "kept\n");
  }
  BOOST_TEST(testing::find_processes({MCP_TEST_SERVER, "--page-size=0"}).size() == 2u);
  rt.reset();
  BOOST_TEST(testing::survivors({{MCP_TEST_SERVER, "--page-size=0"}}, 2000ms) == 0u);
  BOOST_TEST(zombie_children() == 0u);
}

BOOST_AUTO_TEST_CASE(destroying_the_runtime_mid_call_stops_everything) {
  open(
      R"({"replies": [{"text": "1", "tool_calls": [{"name": "mcp__t__hang", "args": {}}]}, {"text": "done"}]})",
      "--child");
  start(dir.sub("ws"), "hung");
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (testing::find_processes({"sleep", "600"}).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  std::this_thread::sleep_for(200ms);  // the call is in flight
  auto t0 = std::chrono::steady_clock::now();
  rt.reset();
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
  BOOST_TEST(testing::survivors({{MCP_TEST_SERVER, "--child"}, {"sleep", "600"}}, 2000ms) == 0u);
  BOOST_TEST(zombie_children() == 0u);
}

BOOST_AUTO_TEST_CASE(a_fresh_runtime_replays_an_mcp_session_without_starting_a_server) {
  open(
      R"({"replies": [{"text": "1", "tool_calls": [{"name": "mcp__t__echo", "args": {"text": "hi"}}]}, {"text": "done"}]})",
      "--replay-me");
  std::string id = start(dir.sub("ws"), "r1");
  SessionOutcome out;
  CHECK_OK(rt->wait(id, 60s, &out));
  rt.reset();
  open(R"({"replies": [{"text": "unused"}]})",
       "--replay-me");  // a new runtime: no session started, no server
  ReplayReport report;
  CHECK_OK(rt->replay("r1", 0, &report));
  BOOST_TEST(report.identical());
  BOOST_TEST(testing::find_processes({MCP_TEST_SERVER, "--replay-me"}).empty());
}

BOOST_AUTO_TEST_SUITE_END()
