// Fault injection and replay on each other's output: every run a fault plan
// shaped — each point with each action it supports, the crashes resumed in
// step and in turn mode — replays identically with the real binary, one at
// a time and all together (`replay --all`). Before, a 502 or a 429 injected
// before the request replayed as a divergence (`llm.failed differs in
// provider_answered`).
#define BOOST_TEST_MODULE fault_replay_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace carapace::testing;
using nlohmann::json;
namespace data = boost::unit_test::data;

namespace {

struct Case {
  std::string point;
  std::string action;
  std::string mode;  // how a run the fault stopped is resumed: step or turn

  std::string id() const {
    std::string s = point + "-" + action + "-" + mode;
    for (char& c : s) {
      if (c == '.' || c == '_') c = '-';
    }
    return s;
  }
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.point << " " << c.action << " " << c.mode;
}

// Every point with every action docs/fault-plans.md says it supports; the
// ones that can stop a run, in both resume modes.
std::vector<Case> all_cases() {
  const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"provider.before_request", {"crash", "error", "delay", "hang", "malformed_stream"}},
      {"provider.after_response", {"crash", "error", "delay", "hang", "malformed_stream"}},
      {"tool.before_exec", {"crash", "error", "delay", "hang"}},
      {"tool.after_exec", {"crash", "error", "delay"}},
      {"log.before_append", {"crash", "error", "delay"}},
      {"log.after_append", {"crash", "delay"}},
      {"commit.before", {"crash", "error", "delay"}},
      {"commit.after", {"crash", "delay"}},
      {"hook", {"crash", "error", "delay", "hang"}},
      {"session.actor", {"crash", "error"}},
  };
  std::vector<Case> out;
  for (const auto& [point, actions] : table) {
    for (const auto& action : actions) {
      bool stops = action == "crash" ||
                   (action == "error" && (point == "log.before_append" || point == "commit.before"));
      out.push_back(Case{point, action, "step"});
      if (stops) out.push_back(Case{point, action, "turn"});
    }
  }
  return out;
}

// One home for the whole suite, so that `replay --all` sees every run.
struct Home {
  TempDir dir;
  CliRunner cli{CARAPACE_BIN, dir.sub("home"), dir.path()};
  std::string config = dir.sub("config.json");
  const std::string scenario = std::string(PROJECT_DIR) + "/examples/scenarios/quickstart.json";
  std::vector<std::string> recorded;

  Home() {
    // Short timeouts and backoff, so that hangs and retries take a moment;
    // a command hook, so that the hook point has something to act on.
    json hook = {{"name", "guard"},
                 {"event", "PreToolUse"},
                 {"matcher", ""},
                 {"command", json::array({"/bin/sh", "-c", "echo '{\"decision\": \"allow\"}'"})},
                 {"timeout_ms", 1000}};
    std::ofstream(config) << json{
        {"retry", {{"base_delay_ms", 5}, {"max_delay_ms", 50}}},
        {"provider", {{"timeout_ms", 1000}}},
        {"tools", {{"call_timeout_ms", 1000}}},
        {"hooks",
         json::array({hook})}}.dump();
  }
  static Home& get() {
    static Home home;
    return home;
  }
};

}  // namespace

BOOST_DATA_TEST_CASE(a_run_each_fault_shaped_replays_identically, data::make(all_cases()), c) {
  Home& home = Home::get();
  const std::string id = c.id();
  const std::string ws = home.dir.sub("ws-" + id);
  std::filesystem::create_directories(ws);
  // The first checkpoint is the session's opening: a crash or an error there
  // leaves no session to resume, so those act on the second (turn 1's). A
  // delay acts on the opening, which must still come after session.started.
  const int nth = c.point.starts_with("commit.") && c.action != "delay" ? 2 : 1;
  json rule = {{"point", c.point}, {"action", c.action}, {"nth", nth}};
  if (c.action == "error" && c.point.starts_with("provider.")) rule["status"] = 502;
  if (c.action == "delay") rule["delay_ms"] = 30;
  std::string plan = home.dir.sub("plan-" + id + ".json");
  std::ofstream(plan) << json{{"faults", json::array({rule})}}.dump();

  CliResult run = home.cli.run("run go --session " + id + " --config " + home.config + " --scenario " +
                               home.scenario + " --workspace " + ws + " --faults " + plan);
  // Resumed (without the plan) until it completes; a crash or a storage
  // error stops a run, a handled fault does not.
  for (int attempt = 0; run.code != 0 && attempt < 3; ++attempt) {
    run = home.cli.run("resume " + id + " --mode " + c.mode + " --config " + home.config);
  }
  BOOST_REQUIRE_MESSAGE(run.code == 0, c << ": the run did not complete: " << run.out << run.err);
  home.recorded.push_back(id);

  CliResult replay = home.cli.run("replay " + id);
  BOOST_TEST(replay.code == 0, c << ":\n" << replay.out << replay.err);
  BOOST_TEST(replay.out.starts_with("identical"), c << ":\n" << replay.out);
}

BOOST_AUTO_TEST_CASE(replay_all_on_the_home_that_holds_them_all) {
  Home& home = Home::get();
  BOOST_REQUIRE(home.recorded.size() == all_cases().size());
  CliResult all = home.cli.run("replay --all");
  BOOST_TEST(all.code == 0, all.out << all.err);
  BOOST_TEST(all.out.find("DIVERGED") == std::string::npos, all.out);
  BOOST_TEST(all.out.find(std::to_string(all_cases().size()) + " identical") != std::string::npos, all.out);
}
