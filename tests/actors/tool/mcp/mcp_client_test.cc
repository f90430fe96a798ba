// The MCP client against a real child process: the test server
// (mcp_test_server.cc) behaving well and badly.
#define BOOST_TEST_MODULE mcp_client_test
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "actors/tool/mcp/mcp_client.h"
#include "actors/tool/mcp/mcp_result.h"
#include "actors/tool/mcp/mcp_server.h"
#include "tests/support/proc_watch.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::vector<std::string> base_env() {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  return env;
}

McpClientOptions options(const std::string& dir, std::vector<std::string> flags = {}) {
  McpClientOptions o;
  o.name = "test";
  o.process.argv = {MCP_TEST_SERVER};
  for (auto& f : flags) o.process.argv.push_back(f);
  o.process.cwd = dir;
  o.process.env = base_env();
  o.request_timeout = 5000ms;
  o.stop_grace = 300ms;
  return o;
}

// Children of this process that are zombies (not yet reaped).
size_t zombie_children() {
  size_t n = 0;
  pid_t self = ::getpid();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 4 >= line.size()) continue;
    char state = line[paren + 2];
    pid_t ppid = static_cast<pid_t>(std::atol(line.c_str() + paren + 4));
    if (ppid == self && state == 'Z') ++n;
  }
  return n;
}

std::string call_text(McpClient& c, const std::string& tool, json args = json::object(),
                      std::chrono::milliseconds timeout = 5000ms, bool* is_error = nullptr) {
  auto r = c.request("tools/call", {{"name", tool}, {"arguments", args}}, timeout);
  if (r.kind != McpClient::Reply::Kind::kResult) return "ERROR: " + r.error;
  ToolResult t = mcp::call_result(r.result, 64 * 1024);
  if (is_error) *is_error = t.is_error;
  return t.output;
}

}  // namespace

BOOST_AUTO_TEST_CASE(handshake_lists_every_page_and_calls_a_tool) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  Status s = McpClient::start(options(dir.path(), {"--page-size", "3"}), &c);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.to_string());
  BOOST_CHECK_EQUAL(c->protocol_version(), "2025-11-25");
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  BOOST_REQUIRE(c->list_tools(&tools, &skipped).ok());
  BOOST_CHECK_EQUAL(tools.size(), 12u);  // four pages of three
  BOOST_CHECK(skipped.empty());
  BOOST_CHECK(tools[0].read_only);
  BOOST_CHECK(tools[1].idempotent);
  BOOST_CHECK_EQUAL(call_text(*c, "echo", {{"text", "hello"}}), "hello");
  bool err = true;
  BOOST_CHECK_EQUAL(call_text(*c, "add", {{"a", 2}, {"b", 3}}, 5000ms, &err), "5.000000");
  BOOST_CHECK(!err);
  call_text(*c, "fail", json::object(), 5000ms, &err);
  BOOST_CHECK(err);
  std::string rich = call_text(*c, "rich");
  BOOST_CHECK_EQUAL(
      rich,
      "a picture:\n[image: image/png, 8 bytes of base64]\n[resource: file:///a.txt, text/plain]\nA\n"
      "[structured content]\n{\"answer\":42}");
  c->stop();
  BOOST_CHECK_EQUAL(zombie_children(), 0u);
}

BOOST_AUTO_TEST_CASE(server_requests_get_an_answer) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path()), &c).ok());
  BOOST_CHECK_EQUAL(call_text(*c, "ask"), "sampling: error -32601; ping: pong");
}

BOOST_AUTO_TEST_CASE(older_protocols_are_accepted_and_unknown_ones_refused) {
  testing::TempDir dir;
  for (std::string v : {"2025-06-18", "2025-03-26"}) {
    std::unique_ptr<McpClient> c;
    Status s = McpClient::start(options(dir.path(), {"--protocol", v}), &c);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.to_string());
    BOOST_CHECK_EQUAL(c->protocol_version(), v);
  }
  std::unique_ptr<McpClient> c;
  Status s = McpClient::start(options(dir.path(), {"--protocol", "2024-11-05"}), &c);
  BOOST_REQUIRE(!s.ok());
  BOOST_CHECK_MESSAGE(s.message().find("protocol version \"2024-11-05\"") != std::string::npos, s.message());
  BOOST_CHECK(!c);
}

BOOST_AUTO_TEST_CASE(a_server_that_never_answers_initialize_times_out) {
  testing::TempDir dir;
  auto o = options(dir.path(), {"--no-initialize", "--stderr", "waiting forever"});
  o.request_timeout = 300ms;
  std::unique_ptr<McpClient> c;
  auto start = std::chrono::steady_clock::now();
  Status s = McpClient::start(o, &c);
  BOOST_REQUIRE(!s.ok());
  BOOST_CHECK_MESSAGE(s.message().find("no answer to initialize within 300 ms") != std::string::npos,
                      s.message());
  BOOST_CHECK_MESSAGE(s.message().find("waiting forever") != std::string::npos, s.message());
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 3s);
  BOOST_CHECK_EQUAL(
      testing::survivors({{MCP_TEST_SERVER, "--no-initialize", "--stderr", "waiting forever"}}, 500ms), 0u);
}

BOOST_AUTO_TEST_CASE(a_server_that_cannot_start_says_why) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  auto o = options(dir.path(), {"--stderr", "missing config", "--exit-at-start", "3"});
  Status s = McpClient::start(o, &c);
  BOOST_REQUIRE(!s.ok());
  BOOST_CHECK_MESSAGE(s.message().find("exited with status 3") != std::string::npos, s.message());
  BOOST_CHECK_MESSAGE(s.message().find("missing config") != std::string::npos, s.message());
  o.process.argv = {"no-such-mcp-server-program"};
  s = McpClient::start(o, &c);
  BOOST_CHECK_MESSAGE(s.message().find("no such program in PATH") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(garbage_on_stdout_is_ignored) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--garbage"}), &c).ok());
  BOOST_CHECK_EQUAL(call_text(*c, "echo", {{"text", "still fine"}}), "still fine");
}

BOOST_AUTO_TEST_CASE(an_answer_with_the_wrong_id_leaves_the_call_to_time_out) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--wrong-id"}), &c).ok());
  BOOST_CHECK_EQUAL(call_text(*c, "echo", {{"text", "x"}}, 300ms),
                    "ERROR: no answer to tools/call within 300 ms");
}

BOOST_AUTO_TEST_CASE(tools_with_invalid_schemas_or_names_are_skipped) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--invalid-schema"}), &c).ok());
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  BOOST_REQUIRE(c->list_tools(&tools, &skipped).ok());
  BOOST_CHECK_EQUAL(tools.size(), 12u);
  BOOST_REQUIRE_EQUAL(skipped.size(), 2u);
  BOOST_CHECK_MESSAGE(
      skipped[0].find("tool \"broken\": its inputSchema's \"type\" must be \"object\"") != std::string::npos,
      skipped[0]);
  BOOST_CHECK_MESSAGE(skipped[1].find("bad name!") != std::string::npos, skipped[1]);
}

BOOST_AUTO_TEST_CASE(list_changed_sets_the_flag) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--list-changed"}), &c).ok());
  BOOST_CHECK(!c->take_tools_changed());
  call_text(*c, "echo", {{"text", "x"}});
  BOOST_CHECK(c->take_tools_changed());
  BOOST_CHECK(!c->take_tools_changed());
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  BOOST_REQUIRE(c->list_tools(&tools, &skipped).ok());
  BOOST_CHECK_EQUAL(tools.back().name, "extra");
}

BOOST_AUTO_TEST_CASE(a_crash_mid_call_answers_the_call_at_once) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path()), &c).ok());
  auto start = std::chrono::steady_clock::now();
  std::string out = call_text(*c, "crash", json::object(), 10000ms);
  BOOST_CHECK_MESSAGE(out == "ERROR: the server exited with status 7", out);
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 3s);
  BOOST_CHECK(!c->alive());
  BOOST_CHECK_EQUAL(c->stderr_tail(), "crashing on purpose");
  BOOST_CHECK_EQUAL(zombie_children(), 0u);
}

BOOST_AUTO_TEST_CASE(a_hung_server_is_killed_with_everything_it_started) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--ignore-term", "--child"}), &c).ok());
  for (int i = 0; i < 200 && testing::find_processes({"sleep", "600"}).empty(); ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_CHECK_EQUAL(testing::find_processes({"sleep", "600"}).size(), 1u);
  BOOST_CHECK_EQUAL(call_text(*c, "hang", json::object(), 200ms),
                    "ERROR: no answer to tools/call within 200 ms");
  pid_t pid = c->pid();
  BOOST_REQUIRE(pid > 0);
  auto start = std::chrono::steady_clock::now();
  c->stop();  // stdin closed and SIGTERM are ignored: SIGKILL after two graces
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_CHECK(took >= 550ms);
  BOOST_CHECK(took < 3s);
  BOOST_CHECK(::kill(pid, 0) != 0);
  BOOST_CHECK_EQUAL(
      testing::survivors({{MCP_TEST_SERVER, "--ignore-term", "--child"}, {"sleep", "600"}}, 500ms), 0u);
  BOOST_CHECK_EQUAL(zombie_children(), 0u);
}

BOOST_AUTO_TEST_CASE(calls_are_cancelled_at_their_timeout_and_when_the_client_stops) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--calls", "calls.txt"}), &c).ok());
  BOOST_CHECK_EQUAL(call_text(*c, "hang", json::object(), 200ms),
                    "ERROR: no answer to tools/call within 200 ms");
  std::thread waiting([&] { call_text(*c, "echo", {{"text", "queued behind the hang"}}, 10000ms); });
  std::this_thread::sleep_for(100ms);
  c->stop();
  waiting.join();
  std::ifstream in(dir.sub("calls.txt"));
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_CHECK_EQUAL(all, "hang\ncancelled\ncancelled\n");
}

BOOST_AUTO_TEST_CASE(a_polite_server_stops_when_its_stdin_closes) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  auto o = options(dir.path());
  o.stop_grace = 3000ms;
  BOOST_REQUIRE(McpClient::start(o, &c).ok());
  auto start = std::chrono::steady_clock::now();
  c->stop();
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 2500ms);  // gone before the grace: no SIGTERM needed
  BOOST_CHECK_EQUAL(c->exit_description(), "the server was stopped");
}

BOOST_AUTO_TEST_CASE(a_50_mb_result_is_capped_with_the_shell_marker) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path()), &c).ok());
  auto r = c->request("tools/call", {{"name", "big"}, {"arguments", {{"bytes", 50'000'000}}}}, 30000ms);
  BOOST_REQUIRE_MESSAGE(r.kind == McpClient::Reply::Kind::kResult, r.error);
  ToolResult t = mcp::call_result(r.result, 65536);
  BOOST_CHECK(t.truncated);
  BOOST_CHECK_EQUAL(t.original_bytes, 50'000'000u);
  BOOST_CHECK_MESSAGE(t.output.find("\n[... 49,934,464 bytes truncated: kept 65,536 of 50,000,000 ...]\n") !=
                          std::string::npos,
                      t.output.substr(32760, 100));
  BOOST_CHECK(t.output.size() < 70000);
}

BOOST_AUTO_TEST_CASE(a_message_over_the_limit_ends_the_connection) {
  testing::TempDir dir;
  auto o = options(dir.path());
  o.max_message_bytes = 1 << 20;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(o, &c).ok());
  auto r = c->request("tools/call", {{"name", "big"}, {"arguments", {{"bytes", 4'000'000}}}}, 10000ms);
  BOOST_CHECK(r.kind == McpClient::Reply::Kind::kGone);
  BOOST_CHECK_MESSAGE(r.error.find("longer than 1048576 bytes") != std::string::npos, r.error);
  BOOST_CHECK(!c->alive());
}

// A message nested deeper than the JSON depth bound (60,000 deep crashed
// the client through recursion) ends the connection at once, as an
// oversized one does: the request waiting for it fails now, not at its
// timeout, and nothing deep is ever built.
BOOST_AUTO_TEST_CASE(a_message_nested_past_the_depth_bound_ends_the_connection_at_once) {
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--deep-result"}), &c).ok());
  std::string nested;
  for (int k = 0; k < 100; ++k) nested += "{\"a\":";
  nested += "1" + std::string(100, '}');
  BOOST_CHECK_EQUAL(call_text(*c, "deep_result", {{"depth", 100}}), "deep\n[structured content]\n" + nested);
  auto start = std::chrono::steady_clock::now();
  auto r = c->request("tools/call", {{"name", "deep_result"}, {"arguments", {{"depth", 400000}}}}, 5000ms);
  BOOST_CHECK(r.kind == McpClient::Reply::Kind::kGone);
  BOOST_CHECK_MESSAGE(
      r.error.find("nested past the bound: JSON nested deeper than 128 levels") != std::string::npos,
      r.error);
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 3s);
  BOOST_CHECK(!c->alive());

  // A tools/list answer with a schema 60,000 deep: listing fails, and says why.
  std::unique_ptr<McpClient> listed;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--deep-schema", "60000"}), &listed).ok());
  std::vector<mcp::ToolInfo> tools;
  std::vector<std::string> skipped;
  start = std::chrono::steady_clock::now();
  Status s = listed->list_tools(&tools, &skipped);
  BOOST_CHECK(!s.ok());
  BOOST_CHECK_MESSAGE(s.message().find("JSON nested deeper than 128 levels") != std::string::npos,
                      s.message());
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 3s);
  // 100 deep is fine: the tool is listed with its schema.
  std::unique_ptr<McpClient> shallow;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--deep-schema", "100"}), &shallow).ok());
  BOOST_REQUIRE(shallow->list_tools(&tools, &skipped).ok());
  BOOST_CHECK(
      std::any_of(tools.begin(), tools.end(), [](const mcp::ToolInfo& t) { return t.name == "deep"; }));
}

// McpServer: the supervision around a client.
BOOST_AUTO_TEST_CASE(a_crashed_server_is_restarted_with_a_growing_backoff) {
  testing::TempDir dir;
  SandboxOptions off;
  off.mode = "off";
  McpServer server(
      McpServerOptions{.config = McpServerConfig{.name = "t", .command = MCP_TEST_SERVER, .timeout_ms = 5000},
                       .workspace = dir.path(),
                       .sandbox = off,
                       .stop_grace = 300ms});
  BOOST_REQUIRE(server.start().ok());
  BOOST_CHECK_EQUAL(server.tools().size(), 12u);
  ToolResult r = server.call("crash", json::object());
  BOOST_CHECK(r.is_error);
  BOOST_CHECK_MESSAGE(r.output.find("the server exited with status 7 during the call") != std::string::npos,
                      r.output);
  auto t0 = std::chrono::steady_clock::now();
  r = server.call("echo", {{"text", "back"}});
  auto first_wait = std::chrono::steady_clock::now() - t0;
  BOOST_CHECK_EQUAL(r.output, "back");
  BOOST_CHECK_EQUAL(server.starts(), 2u);
  BOOST_CHECK(first_wait >= 90ms);
  // Crashes in a row (no call succeeding between them) double the wait:
  // 100, 200, 400, then 800 ms before the next start.
  for (int i = 0; i < 4; ++i) server.call("crash", json::object());
  t0 = std::chrono::steady_clock::now();
  r = server.call("echo", {{"text", "again"}});
  auto last_wait = std::chrono::steady_clock::now() - t0;
  BOOST_CHECK_EQUAL(r.output, "again");
  BOOST_CHECK(last_wait >= 750ms);
  BOOST_CHECK_EQUAL(server.starts(), 6u);
  server.stop();
  BOOST_CHECK(server.call("echo", {{"text", "x"}}).is_error);
  BOOST_CHECK_EQUAL(zombie_children(), 0u);
}

BOOST_AUTO_TEST_CASE(a_hung_call_times_out_and_kills_the_server) {
  testing::TempDir dir;
  SandboxOptions off;
  off.mode = "off";
  McpServer server(McpServerOptions{
      .config =
          McpServerConfig{.name = "t", .command = MCP_TEST_SERVER, .args = {"--child"}, .timeout_ms = 300},
      .workspace = dir.path(),
      .sandbox = off,
      .stop_grace = 300ms});
  BOOST_REQUIRE(server.start().ok());
  ToolResult r = server.call("hang", json::object());
  BOOST_CHECK(r.is_error);
  BOOST_CHECK(r.timed_out);
  BOOST_CHECK_MESSAGE(r.output.find("gave no answer within 300 ms") != std::string::npos, r.output);
  BOOST_CHECK(!server.running());
  BOOST_CHECK_EQUAL(testing::survivors({{"sleep", "600"}}, 1000ms), 0u);  // what it started died with it
  BOOST_CHECK_EQUAL(server.call("echo", {{"text", "fresh"}}).output, "fresh");
  BOOST_CHECK_EQUAL(server.starts(), 2u);
}

BOOST_AUTO_TEST_CASE(the_server_environment_has_no_secrets_but_its_own) {
  const char* environment[] = {"PATH=/usr/bin", "OPENAI_API_KEY=sk-x", "GITHUB_TOKEN=ghp-x", "HOME=/h",
                               nullptr};
  ::setenv("CARAPACE_MCP_TEST_PASS", "from-carapace", 1);
  McpServerConfig config{.name = "t",
                         .command = "x",
                         .env = {{"GITHUB_TOKEN", std::string("given")},
                                 {"CARAPACE_MCP_TEST_PASS", std::nullopt},
                                 {"UNSET_ONE", std::nullopt},
                                 {"HOME", std::string("/other")}}};
  std::vector<std::string> env = mcp_server_environment(config, ToolEnvOptions{}, environment);
  std::vector<std::string> expected = {"PATH=/usr/bin", "GITHUB_TOKEN=given",
                                       "CARAPACE_MCP_TEST_PASS=from-carapace", "HOME=/other"};
  BOOST_CHECK_EQUAL_COLLECTIONS(env.begin(), env.end(), expected.begin(), expected.end());
}

BOOST_AUTO_TEST_CASE(a_list_change_between_calls_is_acted_on_at_once) {
  testing::TempDir dir;
  SandboxOptions off;
  off.mode = "off";
  std::atomic<size_t> published{0};
  McpServer server(McpServerOptions{
      .config =
          McpServerConfig{.name = "t", .command = MCP_TEST_SERVER, .args = {"--list-changed-after-list"}},
      .workspace = dir.path(),
      .sandbox = off,
      .on_tools = [&](const std::vector<mcp::ToolInfo>& tools) { published = tools.size(); }});
  BOOST_REQUIRE(server.start().ok());
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (published != 13u && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  BOOST_CHECK_EQUAL(published.load(), 13u);  // no call was made
  BOOST_CHECK_EQUAL(server.tools().back().name, "extra");
}

// Last in this file: it makes the test process a child subreaper, as the
// runtime is, so that orphans come to it and must be reaped.
BOOST_AUTO_TEST_CASE(a_guard_killed_from_outside_leaves_nothing) {
  BOOST_REQUIRE(become_child_subreaper(nullptr));
  testing::TempDir dir;
  std::unique_ptr<McpClient> c;
  BOOST_REQUIRE(McpClient::start(options(dir.path(), {"--child", "--ignore-term"}), &c).ok());
  // On a loaded machine the server and its child take a while to be there.
  for (int i = 0; i < 1000 && testing::find_processes({"sleep", "600"}).empty(); ++i)
    std::this_thread::sleep_for(10ms);
  // The server's parent is its guard.
  std::string line;
  pid_t guard = 0;
  for (int i = 0; i < 500 && guard <= 1; ++i) {
    std::ifstream stat("/proc/" + std::to_string(c->pid()) + "/stat");
    line.clear();
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 4 < line.size()) guard = static_cast<pid_t>(std::atol(line.c_str() + paren + 4));
    if (guard <= 1) std::this_thread::sleep_for(10ms);
  }
  BOOST_REQUIRE_MESSAGE(guard > 1, "server " << c->pid() << ": /proc/PID/stat reads '" << line << "'");
  ::kill(guard, SIGKILL);
  std::string out = call_text(*c, "echo", {{"text", "x"}}, 5000ms);
  // Gone, or stopped as it went; on a loaded machine the call can still reach
  // the server before its parent-death signal does. Either way nothing is left.
  BOOST_CHECK_MESSAGE(out == "x" || out.find("ERROR: the server") == 0, out);
  c->stop();
  BOOST_CHECK_EQUAL(
      testing::survivors({{MCP_TEST_SERVER, "--child", "--ignore-term"}, {"sleep", "600"}}, 2000ms), 0u);
  BOOST_CHECK_EQUAL(zombie_children(), 0u);
}
