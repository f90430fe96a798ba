// MCP servers through the real `carapace` binary: a whole session calling
// the test server's tools (a hook denying one, a crash and the restart, a
// tool list that changes), a carapace killed with SIGKILL mid-call and
// resumed in step mode, `carapace mcp list`, and the reference filesystem
// server from npm when Node and tests/node/node_modules are there.
#define BOOST_TEST_MODULE mcp_cli_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/child_process.h"
#include "tests/support/proc_watch.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

struct McpFixture {
  testing::TempDir dir;
  std::string ws = dir.sub("ws");

  McpFixture() { fs::create_directories(ws); }

  Result run(const std::string& args) {
    std::string out = dir.sub("out.txt"), err = dir.sub("err.txt");
    std::string cmd = "cd '" + dir.path() + "' && " + std::string(CARAPACE_BIN) + " --home '" +
                      dir.sub("home") + "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
    int status = std::system(cmd.c_str());
    return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir.sub(name)) << text;
    return dir.sub(name);
  }

  // A config with the test server as "t" (flags added), and extra top-level keys.
  std::string config(const std::string& name, const std::string& flags, const std::string& extra = "") {
    json args = json::array();
    std::istringstream in(flags);
    for (std::string f; in >> f;) args.push_back(f);
    json c = {
        {"mcp_servers", {{"t", {{"command", MCP_TEST_SERVER}, {"args", args}, {"timeout_ms", 20000}}}}}};
    if (!extra.empty()) c.update(json::parse(extra));
    return write(name, c.dump());
  }

  json events(const std::string& session, const std::string& type = "") {
    Result r = run("log show " + session + (type.empty() ? "" : " --type " + type) + " --json");
    json j = json::parse(r.out, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!j.is_discarded() && j.contains("data"), r.out + r.err);
    return j["data"]["events"];
  }

  std::vector<std::string> calls() {
    std::vector<std::string> out;
    std::ifstream in(ws + "/calls.txt");
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
};

size_t count(const std::vector<std::string>& v, const std::string& x) {
  return std::count(v.begin(), v.end(), x);
}

std::string output_of(const json& completed, const std::string& call_id) {
  for (const auto& e : completed) {
    if (e["data"]["call_id"] == call_id)
      return e["data"]["output"].get<std::string>() + (e["data"]["is_error"].get<bool>() ? " [error]" : "");
  }
  return "(no tool.completed for " + call_id + ")";
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(mcp, McpFixture)

BOOST_AUTO_TEST_CASE(a_session_calls_mcp_tools_through_hooks_restarts_and_a_changing_list) {
  std::string cfg =
      config("c.json", "--calls calls.txt --list-changed",
             R"({"hooks": [{"name": "no-notes", "event": "PreToolUse", "matcher": "^mcp__t__note$",
                                "command": "cat > /dev/null; echo '{\"decision\":\"deny\",\"reason\":\"notes are off\"}'"}]})");
  std::string scenario = write("s.json", R"({"replies": [
    {"text": "1", "tool_calls": [{"name": "mcp__t__echo", "args": {"text": "hello"}},
                                 {"name": "mcp__t__note", "args": {"text": "never"}},
                                 {"name": "mcp__t__rich", "args": {}}]},
    {"text": "2", "tool_calls": [{"name": "mcp__t__extra", "args": {}}, {"name": "mcp__t__crash", "args": {}}]},
    {"text": "3", "tool_calls": [{"name": "mcp__t__add", "args": {"a": 1, "b": 2}}, {"name": "mcp__t__fail", "args": {}}]},
    {"text": "done"}]})");
  Result r = run("run go --session m1 --workspace " + ws + " --config " + cfg + " --scenario " + scenario);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out + r.err);
  json done = events("m1", "tool.completed");
  BOOST_TEST(output_of(done, "call_1_1") == "hello");
  BOOST_TEST(contains(output_of(done, "call_1_2"), "notes are off"), output_of(done, "call_1_2"));
  BOOST_TEST(contains(output_of(done, "call_1_3"), "[image: image/png, 8 bytes of base64]"));
  // list_changed came with the first call: turn 2's prompt offered "extra".
  BOOST_TEST(output_of(done, "call_2_1") == "extra ran");
  BOOST_TEST(
      contains(output_of(done, "call_2_2"), "MCP server t: the server exited with status 7 during the call"),
      output_of(done, "call_2_2"));
  // Restarted for the next call.
  BOOST_TEST(output_of(done, "call_3_1") == "3.000000");
  BOOST_TEST(output_of(done, "call_3_2") == "it failed on purpose [error]");
  std::vector<std::string> c = calls();
  BOOST_TEST(count(c, "note") == 0u);  // the hook denied it: never sent to the server
  BOOST_TEST(count(c, "echo") == 1u);
  // The tools are recorded with the session, with their schemas and idempotency.
  json configured = events("m1", "session.configured");
  json tools = configured[0]["data"]["tools"];
  bool echo_found = false;
  for (const auto& t : tools) {
    if (t["name"] == "mcp__t__echo") {
      echo_found = true;
      BOOST_TEST(t["idempotent"] == true);
      BOOST_TEST(t["schema"]["required"][0] == "text");
    }
    if (t["name"] == "mcp__t__note") BOOST_TEST(t["idempotent"] == false);
  }
  BOOST_TEST(echo_found, tools.dump());
  // Nothing is left running once carapace has exited.
  BOOST_TEST(testing::survivors({{MCP_TEST_SERVER, "--calls", "calls.txt", "--list-changed"}},
                                std::chrono::milliseconds(2000)) == 0u);
}

BOOST_AUTO_TEST_CASE(a_config_without_mcp_servers_keeps_its_digest) {
  std::string scenario = write("s.json", R"({"replies": [{"text": "done"}]})");
  std::string plain = write("plain.json", R"({"session": {"max_turns": 3}})");
  // Relative paths: the scenario's path is part of the configuration.
  BOOST_REQUIRE(run("run go --session p1 --workspace ws --config plain.json --scenario s.json").code == 0);
  json started = events("p1", "session.started");
  json configured = events("p1", "session.configured");
  BOOST_TEST(!contains(configured[0]["data"]["config"].dump(), "mcp_servers"));
  // The digest this configuration had before mcp_servers existed (measured
  // with the build before it, the same command), since the provider bounds
  // (provider.max_stream_ms ... max_stored_body_bytes), stored by every one.
  BOOST_TEST(started[0]["data"]["config_digest"] == std::string(PLAIN_CONFIG_DIGEST), started.dump());
}

BOOST_AUTO_TEST_CASE(bad_mcp_config_is_refused_naming_the_key) {
  std::string scenario = write("s.json", R"({"replies": [{"text": "done"}]})");
  struct Case {
    std::string config, expected;
  } cases[] = {
      {R"({"mcp_servers": {"bad name": {"command": "x"}}})",
       "mcp_servers.bad name: server name \"bad name\" must be"},
      {R"({"mcp_servers": {"a__b": {"command": "x"}}})", "must not contain \"__\""},
      {R"({"mcp_servers": {"s": {"args": []}}})", "mcp_servers.s.command: is required"},
      {R"({"mcp_servers": {"s": {"command": "x", "args": [1]}}})", "mcp_servers.s.args[0]: must be a string"},
      {R"({"mcp_servers": {"s": {"command": "x", "env": {"A-B": "1"}}}})",
       "mcp_servers.s.env.A-B: is not a valid"},
      {R"({"mcp_servers": {"s": {"command": "x", "timeout_ms": 0}}})",
       "mcp_servers.s.timeout_ms: must be a whole number"},
      {R"({"mcp_servers": {"s": {"command": "x", "type": "http"}}})",
       "mcp_servers.s.type: only the stdio transport"},
      {R"({"mcp_servers": {"s": {"command": "x", "colour": 1}}})", "mcp_servers.s: unknown key \"colour\""},
      {R"({"mcp_servers": []})", "mcp_servers: must be an object"},
  };
  for (const auto& c : cases) {
    std::string cfg = write("bad.json", c.config);
    Result r = run("run go --workspace " + ws + " --config " + cfg + " --scenario " + scenario);
    BOOST_TEST(r.code != 0, c.config);
    BOOST_TEST(contains(r.err, c.expected), c.config << " -> " << r.err);
  }
}

BOOST_AUTO_TEST_CASE(a_server_that_fails_to_start_leaves_the_session_running) {
  std::string cfg = config("c.json", "--stderr boom-at-start --exit-at-start 4");
  std::string scenario = write("s.json", R"({"replies": [
    {"text": "1", "tool_calls": [{"name": "mcp__t__echo", "args": {"text": "x"}}]}, {"text": "done"}]})");
  Result r = run("run go --session f1 --workspace " + ws + " --config " + cfg + " --scenario " + scenario);
  BOOST_TEST(r.code == 0, r.out + r.err);
  BOOST_TEST(contains(r.err, "MCP server t: initialize failed: the server exited with status 4"), r.err);
  BOOST_TEST(contains(r.err, "boom-at-start"), r.err);
  std::string out = output_of(events("f1", "tool.completed"), "call_1_1");
  BOOST_TEST(contains(out, "mcp__t__echo"), out);
  BOOST_TEST(contains(out, "[error]"), out);
}

// SIGKILL while an MCP call runs; resumed in step mode: the completed call
// is not run again; the interrupted one is run again only if the server
// marks its tool read-only or idempotent.
BOOST_AUTO_TEST_CASE(sigkill_mid_call_then_step_resume) {
  for (std::string tool : {"slow", "slow_echo"}) {
    std::string session = "k-" + tool;
    fs::remove(ws + "/calls.txt");
    std::string slow_cfg = config("slow.json", "--calls calls.txt");
    std::string fast_cfg = config("fast.json", "--calls calls.txt --fast");
    std::string scenario = write("s.json", R"({"replies": [
      {"text": "1", "tool_calls": [{"name": "mcp__t__echo", "args": {"text": "first"}},
                                   {"name": "mcp__t__)" +
                                               tool + R"(", "args": {"text": "second", "ms": 60000}}]},
      {"text": "done"}]})");
    pid_t pid = spawn_child_process(CARAPACE_BIN,
                                    {"--home", dir.sub("home"), "run", "go", "--session", session,
                                     "--workspace", ws, "--config", slow_cfg, "--scenario", scenario},
                                    dir.sub("kill.log"));
    BOOST_REQUIRE(pid > 0);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (count(calls(), tool) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    BOOST_REQUIRE_MESSAGE(count(calls(), tool) == 1, slurp(dir.sub("kill.log")));
    ::kill(pid, SIGKILL);
    int status = 0;
    BOOST_REQUIRE(wait_child_process(pid, 10000, &status));
    // The server died with carapace (its guard's parent-death signal).
    BOOST_TEST(testing::survivors({{MCP_TEST_SERVER, "--calls", "calls.txt"}},
                                  std::chrono::milliseconds(3000)) == 0u);
    Result r = run("resume " + session + " --config " + fast_cfg + " --scenario " + scenario);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.out + r.err);
    std::vector<std::string> c = calls();
    BOOST_TEST(count(c, "echo") == 1u, tool);  // completed before the crash: kept
    std::string out = output_of(events(session, "tool.completed"), "call_1_2");
    if (tool == "slow") {
      BOOST_TEST(count(c, "slow") == 1u);  // not idempotent: never run twice
      BOOST_TEST(contains(out, "interrupted"), out);
    } else {
      BOOST_TEST(count(c, "slow_echo") == 2u);  // read-only: run again
      BOOST_TEST(out == "second", out);
    }
    // The resume ran with another config: recorded, with the MCP tools its servers offered then.
    json configured = events(session, "session.configured");
    BOOST_REQUIRE(configured.size() == 2u);
    BOOST_TEST(configured[1]["data"]["origin"] == "resume");
    BOOST_TEST(contains(configured[1]["data"]["tools"].dump(), "mcp__t__echo"));
    BOOST_TEST(configured[1]["data"]["tools"] == configured[0]["data"]["tools"]);
    Result replayed = run("replay " + session);
    BOOST_TEST(replayed.code == 0, replayed.out + replayed.err);
  }
}

BOOST_AUTO_TEST_CASE(replay_answers_mcp_calls_without_a_server) {
  std::string cfg = config("c.json", "--calls calls.txt");
  std::string scenario = write("s.json", R"({"replies": [
    {"text": "1", "tool_calls": [{"name": "mcp__t__echo", "args": {"text": "hello"}}]}, {"text": "done"}]})");
  BOOST_REQUIRE(
      run("run go --session rp --workspace " + ws + " --config " + cfg + " --scenario " + scenario).code ==
      0);
  BOOST_REQUIRE(count(calls(), "echo") == 1u);
  Result r = run("replay rp");
  BOOST_TEST(r.code == 0, r.out + r.err);
  BOOST_TEST(contains(r.out, "identical"), r.out);
  BOOST_TEST(count(calls(), "echo") == 1u);  // no server ran
}

BOOST_AUTO_TEST_CASE(the_filesystem_reference_server_reads_and_writes_through_carapace) {
  std::string server = std::string(PROJECT_DIR) + "/tests/node/node_modules/.bin/mcp-server-filesystem";
  bool node = std::system("command -v node >/dev/null 2>&1") == 0;
  if (!node || !fs::exists(server)) {
    BOOST_TEST_MESSAGE(
        "skipped: needs node and tests/node/node_modules (scripts/bootstrap.sh installs them)");
    return;
  }
  std::string real_ws = fs::canonical(ws).string();
  std::ofstream(real_ws + "/in.txt") << "from the test\n";
  std::string cfg =
      write("fs.json", json{{"mcp_servers", {{"fs", {{"command", server}, {"args", {real_ws}}}}}}}.dump());
  std::string scenario = write("s.json", R"({"replies": [
    {"text": "1", "tool_calls": [{"name": "mcp__fs__write_file", "args": {"path": ")" +
                                             real_ws + R"(/out.txt", "content": "written by mcp"}},
                                 {"name": "mcp__fs__read_text_file", "args": {"path": ")" +
                                             real_ws + R"(/in.txt"}},
                                 {"name": "mcp__fs__read_text_file", "args": {"path": "/etc/hostname"}}]},
    {"text": "done"}]})");
  Result r = run("run go --session fs --workspace " + ws + " --config " + cfg + " --scenario " + scenario);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out + r.err);
  BOOST_TEST(slurp(real_ws + "/out.txt") == "written by mcp");
  json done = events("fs", "tool.completed");
  BOOST_TEST(contains(output_of(done, "call_1_2"), "from the test"), output_of(done, "call_1_2"));
  BOOST_TEST(contains(output_of(done, "call_1_3"), "Access denied"), output_of(done, "call_1_3"));
  BOOST_TEST(contains(output_of(done, "call_1_3"), "[error]"));
}

BOOST_AUTO_TEST_CASE(mcp_list_reports_tools_and_failures) {
  json c = {{"mcp_servers",
             {{"t", {{"command", MCP_TEST_SERVER}, {"args", {"--invalid-schema", "--page-size", "5"}}}},
              {"bad",
               {{"command", MCP_TEST_SERVER},
                {"args",
                 {"--stderr", "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789 rejected", "--exit-at-start",
                  "2"}}}}}}};
  std::string cfg = write("list.json", c.dump());
  Result r = run("mcp list --config " + cfg + " --workspace " + ws);
  BOOST_TEST(r.code == 1, r.out + r.err);
  BOOST_TEST(contains(r.out, "t: 12 tools (protocol 2025-11-25)"), r.out);
  BOOST_TEST(contains(r.out, "mcp__t__echo"), r.out);
  BOOST_TEST(contains(r.out, "skipped: tool \"broken\""), r.out);
  BOOST_TEST(
      contains(r.out,
               "bad: failed to start: MCP server bad: initialize failed: the server exited with status 2"),
      r.out);
  BOOST_TEST(contains(r.out, "rejected"), r.out);  // its stderr, redacted
  BOOST_TEST(!contains(r.out, "ghp_abcdefghijklmnopqrstuvwxyz0123456789"), r.out);
  BOOST_TEST(contains(r.out, "2 servers, 12 tools; 1 failed to start"), r.out);
  r = run("mcp list --json --config " + cfg + " --workspace " + ws);
  json j = json::parse(r.out, nullptr, false);
  BOOST_REQUIRE_MESSAGE(!j.is_discarded(), r.out);
  BOOST_TEST(j["success"] == false);
  BOOST_TEST(j["data"]["servers"].size() == 2u);
  for (const auto& s : j["data"]["servers"]) {
    if (s["name"] == "t") {
      BOOST_TEST(s["tools"].size() == 12u);
      BOOST_TEST(s["tools"][0]["read_only"] == true);
    } else {
      BOOST_TEST(s["ok"] == false);
      BOOST_TEST(!contains(s["error"].get<std::string>(), "ghp_abcdefghijklmnopqrstuvwxyz0123456789"));
    }
  }
  BOOST_TEST(run("mcp list --help").code == 0);
  BOOST_TEST(testing::survivors({{MCP_TEST_SERVER, "--invalid-schema", "--page-size", "5"}},
                                std::chrono::milliseconds(1000)) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
