// What replay_bench and collector_bench record: a session of N turns on the
// scripted provider, each turn a model answer calling a C++ `echo` tool, the
// last a final answer (about 7 events a turn).
#pragma once

#include <errno.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/provider/scripted_provider.h"
#include "actors/tool/tool.h"
#include "runtime/config.h"
#include "runtime/runtime.h"

namespace carapace::bench {

// Exits with the program's name, `what` and the status unless it is ok.
inline void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, s.to_string().c_str());
    std::exit(1);
  }
}

inline ToolDefinition echo_tool() {
  return ToolDefinition{.spec = {.name = "echo",
                                 .description = "Echoes its text.",
                                 .schema = JsonText{R"({"type":"object","properties":{"text":{"type":"string"}}})"},
                                 .idempotent = true},
                        .blocking = false,
                        .run = [](const nlohmann::json& args, const ToolContext&) {
                          return ToolResult{.output = args.value("text", "")};
                        }};
}

// No built-in tools, room for `turns` turns, the workspace under `dir`, no snapshots.
inline Config echo_config(const std::filesystem::path& dir, uint64_t turns) {
  Config config;
  config.tools_enabled = {};
  config.max_turns = turns + 1;
  config.workspace = (dir / "ws").string();
  config.snapshot_every_turns = 0;
  return config;
}

inline Scenario echo_scenario(uint64_t turns) {
  Scenario scenario;
  scenario.source = "bench";
  for (uint64_t t = 1; t < turns; ++t) {
    ScenarioEntry e;
    e.response.text = "turn " + std::to_string(t);
    e.response.tool_calls.push_back(
        ToolCall{.id = "", .name = "echo", .args = JsonText{R"({"text":"result of turn )" + std::to_string(t) + "\"}"}});
    e.response.finish_reason = "tool_calls";
    scenario.entries.push_back(std::move(e));
  }
  ScenarioEntry last;
  last.response.text = "done";
  last.response.finish_reason = "stop";
  scenario.entries.push_back(std::move(last));
  return scenario;
}

// A runtime on dir/home (workspace dir/ws) that plays `scenario` with the
// echo tool registered; `adjust` may change its options first.
inline std::unique_ptr<Runtime> echo_runtime(const std::filesystem::path& dir, uint64_t turns, Scenario scenario,
                                             const std::function<void(Runtime::Options&)>& adjust = {}) {
  std::filesystem::create_directories(dir / "ws");
  Runtime::Options options{.home = (dir / "home").string(),
                           .config = echo_config(dir, turns),
                           .provider = std::make_shared<ScriptedProvider>(std::move(scenario))};
  if (adjust) adjust(options);
  std::unique_ptr<Runtime> rt;
  check(Runtime::open(std::move(options), &rt), "runtime");
  check(rt->register_tool(echo_tool()), "tool");
  return rt;
}

template <class F>
double best_of_three(F f) {
  double best = 1e100;
  for (int i = 0; i < 3; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace carapace::bench
