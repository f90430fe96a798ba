// mcp_bench: what an MCP tool costs against the same work as a built-in C++
// tool, in the same run (rounds interleaved), and how long a server takes to
// start and list its tools.
//
//   build/bench/mcp_bench [--calls N] [--starts N] [--quick]
//
// (c) one call of a tool that returns its argument text:
//       C++ tool        a ToolDefinition run by run_tool (what the tool actor
//                       does for a built-in tool; no process)
//       MCP tool        the same through run_tool on the registered
//                       mcp__t__echo: McpHub -> McpServer -> McpClient, a
//                       JSON-RPC line each way over pipes to the test server
//       client request  McpClient::request alone (no registry, no conversion)
// (s) start + initialize + tools/list + stop of a server, per server:
//       the C++ test server (sandbox off, and in the Landlock sandbox), and
//       the npm filesystem server when node and tests/node/node_modules are there
// Prints a table, then one JSON object as the last line.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "actors/messages.h"
#include "actors/tool/mcp/mcp_client.h"
#include "actors/tool/mcp/mcp_hub.h"
#include "actors/tool/tool_actor.h"

extern char** environ;

using namespace carapace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "mcp_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Variant {
  std::string name;
  std::function<void()> once;
  double seconds = 0;
  uint64_t calls = 0;
  double us() const { return calls ? seconds * 1e6 / static_cast<double>(calls) : 0; }
};

void measure(std::vector<Variant>& variants, uint64_t total, int rounds) {
  const uint64_t per_round = std::max<uint64_t>(1, total / static_cast<uint64_t>(rounds));
  for (auto& v : variants) v.once();  // warm up
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      auto start = Clock::now();
      for (uint64_t i = 0; i < per_round; ++i) v.once();
      v.seconds += std::chrono::duration<double>(Clock::now() - start).count();
      v.calls += per_round;
    }
  }
}

McpServerConfig test_server() { return McpServerConfig{.name = "t", .command = MCP_TEST_SERVER}; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"MCP tool call and server start costs"};
  uint64_t calls = 20000;
  uint64_t starts = 20;
  bool quick = false;
  app.add_option("--calls", calls, "Calls per variant (default 20000)");
  app.add_option("--starts", starts, "Starts per server (default 20)");
  app.add_flag("--quick", quick, "Tiny sizes: proves it runs");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    calls = 200;
    starts = 2;
  }
  spdlog::set_level(spdlog::level::warn);
  fs::path ws = fs::temp_directory_path() / ("mcp-bench-" + std::to_string(::getpid()));
  fs::create_directories(ws);
  std::string workspace = fs::canonical(ws).string();

  // (c) per call.
  auto registry = std::make_shared<ToolRegistry>();
  auto hub = McpHub::make(McpHubOptions{.servers = {test_server()}}, registry);
  for (const Status& s : hub->ensure(workspace)) die(s.to_string());
  auto mcp_tool = registry->find("mcp__t__echo");
  if (!mcp_tool) die("the test server offered no echo tool");
  ToolDefinition cpp_tool{
      .spec = {.name = "echo"}, .blocking = false, .run = [](const json& args, const ToolContext&) {
        return ToolResult{.output = args.value("text", "")};
      }};
  ToolInvocation invocation{
      .session_id = "bench",
      .call = ToolCall{.id = "c1", .name = "echo", .args = JsonText{R"({"text":"hello"})"}},
      .workspace = workspace};
  ToolInvocation mcp_invocation = invocation;
  mcp_invocation.call.name = "mcp__t__echo";
  std::unique_ptr<McpClient> client;
  McpClientOptions co;
  co.name = "raw";
  co.process.argv = {MCP_TEST_SERVER};
  co.process.cwd = workspace;
  for (char** e = environ; *e != nullptr; ++e) co.process.env.push_back(*e);
  if (Status s = McpClient::start(co, &client); !s.ok()) die(s.to_string());
  json params = {{"name", "echo"}, {"arguments", {{"text", "hello"}}}};
  std::vector<Variant> per_call = {
      {"C++ tool (run_tool, inline)",
       [&] {
         if (run_tool(cpp_tool, invocation).output != "hello") die("C++ tool answered wrong");
       }},
      {"MCP tool (run_tool -> hub -> server -> pipes)",
       [&] {
         if (run_tool(*mcp_tool, mcp_invocation).output != "hello") die("MCP tool answered wrong");
       }},
      {"McpClient::request alone",
       [&] {
         if (client->request("tools/call", params, std::chrono::seconds(10)).kind !=
             McpClient::Reply::Kind::kResult)
           die("request failed");
       }},
  };
  measure(per_call, calls, 10);
  client->stop();
  hub->shutdown();

  // (s) start + list + stop.
  struct StartCase {
    std::string name;
    McpServerConfig config;
    SandboxOptions sandbox;
  };
  SandboxOptions off;
  off.mode = "off";
  std::vector<StartCase> cases = {
      {"C++ test server, sandbox off", test_server(), off},
      {"C++ test server, sandbox auto (Landlock)", test_server(), SandboxOptions{}}};
  std::string fs_server = std::string(PROJECT_DIR) + "/tests/node/node_modules/.bin/mcp-server-filesystem";
  if (std::system("command -v node >/dev/null 2>&1") == 0 && fs::exists(fs_server)) {
    cases.push_back({"npm server-filesystem (node), sandbox auto",
                     McpServerConfig{.name = "fs", .command = fs_server, .args = {workspace}},
                     SandboxOptions{}});
  }
  json results = json::object();
  std::printf("%-58s %14s %12s\n", "measurement", "per call [us]", "vs first row");
  std::printf("(c) one call of a tool returning its argument, %llu calls each\n",
              static_cast<unsigned long long>(calls));
  for (const auto& v : per_call) {
    std::printf("    %-54s %14.1f %11.2fx\n", v.name.c_str(), v.us(), v.us() / per_call[0].us());
    results["call_us"][v.name] = v.us();
  }
  std::printf("%-58s %14s %12s\n", "(s) start + initialize + tools/list, then stop", "start [ms]",
              "stop [ms]");
  for (const auto& c : cases) {
    double start_s = 0, stop_s = 0;
    size_t tools = 0;
    for (uint64_t i = 0; i < starts; ++i) {
      McpServer server(McpServerOptions{.config = c.config, .workspace = workspace, .sandbox = c.sandbox});
      auto t0 = Clock::now();
      if (Status s = server.start(); !s.ok()) die(s.to_string());
      auto t1 = Clock::now();
      tools = server.tools().size();
      server.stop();
      auto t2 = Clock::now();
      start_s += std::chrono::duration<double>(t1 - t0).count();
      stop_s += std::chrono::duration<double>(t2 - t1).count();
    }
    double start_ms = start_s * 1e3 / static_cast<double>(starts),
           stop_ms = stop_s * 1e3 / static_cast<double>(starts);
    std::printf("    %-54s %14.1f %12.1f\n", (c.name + " (" + std::to_string(tools) + " tools)").c_str(),
                start_ms, stop_ms);
    results["start_ms"][c.name] = start_ms;
    results["stop_ms"][c.name] = stop_ms;
  }
  std::error_code ec;
  fs::remove_all(ws, ec);
  std::printf("%s\n", results.dump().c_str());
  return 0;
}
