// `carapace torture` on a user's own agent, following docs/fault-plans.md
// ("Test your own agent") step by step with examples/your-agent/: their
// config, a copy of their workspace per run, their fault plan merged with
// the crashes; a violation named by its first differing event with what it
// usually means and commands that work; every iteration accounted for.
#define BOOST_TEST_MODULE torture_agent_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

using namespace carapace::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kAgent = std::string(PROJECT_DIR) + "/examples/your-agent/";

std::string agent_args(const std::string& mode) {
  return "torture " + kAgent + "scenario.json --task 'Turn debug on in app.conf.' --config " + kAgent +
         "config.json --workspace " + kAgent + "workspace --faults " + kAgent + "faults.json --mode " + mode +
         " --points tool.after_exec --iterations 3 --seed 1";
}

size_t lines(const std::string& path) {
  std::ifstream in(path);
  std::string l;
  size_t n = 0;
  while (std::getline(in, l)) ++n;
  return n;
}

// Every iteration is compared, not compared with a reason, or ended first by another violation.
void accounted(const json& d) {
  uint64_t skipped = 0;
  for (const auto& [why, n] : d["skipped_by_reason"].items()) skipped += n.get<uint64_t>();
  BOOST_TEST(d["compared_with_crash_free_run"].get<uint64_t>() + skipped +
                 d["not_compared_after_a_violation"].get<uint64_t>() ==
             d["iterations"].get<uint64_t>());
}

}  // namespace

BOOST_AUTO_TEST_CASE(step_1_turn_mode_runs_a_non_idempotent_shell_call_twice_and_says_where) {
  TempDir dir;
  CliRunner cli(CARAPACE_BIN, dir.sub("home"), dir.path());
  CliResult r = cli.run(agent_args("turn") + " --dir " + dir.sub("t") + " --json");
  BOOST_TEST_REQUIRE(r.code == 1, r.out << r.err);
  json j = json::parse(r.out);
  const json d = j["data"];
  BOOST_TEST(j["success"] == false);
  accounted(d);
  // --points alone: every crash at that point.
  BOOST_TEST(d["crashes_by_point"].size() == 1u);
  BOOST_TEST(d["crashes_by_point"].contains("tool.after_exec"));
  BOOST_REQUIRE(!d["violations"].empty());
  const json v = d["violations"][0];
  BOOST_TEST(v["kind"] == "final_state_differs");
  const std::string detail = v["detail"];
  BOOST_TEST(detail.find("tool.completed (crash-free run: seq ") != std::string::npos, detail);
  // "output is "N\n", not "1\n"": the append ran once more for each crash that cut the turn short.
  BOOST_TEST(detail.find("output is \"") != std::string::npos, detail);
  BOOST_TEST(detail.find("\", not \"1\\n\"") != std::string::npos, detail);
  BOOST_TEST(v["meaning"].get<std::string>().find("the tool `shell` is not idempotent") != std::string::npos);
  // The commands it prints work as pasted, and show the two events.
  BOOST_REQUIRE(v["look"].size() == 2u);
  for (const auto& look : v["look"]) {
    std::string cmd = look.get<std::string>();
    cmd = cmd.substr(0, cmd.find("   #"));
    BOOST_REQUIRE(cmd.rfind("carapace ", 0) == 0);
    const std::string out = dir.sub("look.out");
    int status = std::system((std::string(CARAPACE_BIN) + cmd.substr(8) + " > " + out + " 2>&1").c_str());
    BOOST_TEST(WEXITSTATUS(status) == 0, cmd);
    BOOST_TEST(CliRunner::slurp(out).find("tool.completed") != std::string::npos, cmd);
  }
  // Both homes and workspaces are kept: the append ran twice in the run, once in the crash-free run.
  const std::string home = v["home"];
  const std::string reference = d["crash_free_run_home"];
  BOOST_TEST(lines(reference + "/ws/changes.log") == 1u);
  BOOST_TEST(lines(home + "/ws/changes.log") >= 2u);
  BOOST_TEST(CliRunner::slurp(home + "/ws/app.conf").find("debug = on") != std::string::npos);
  // The user's workspace was copied, never written.
  BOOST_TEST(!fs::exists(kAgent + "workspace/changes.log"));
  BOOST_TEST(CliRunner::slurp(kAgent + "workspace/app.conf") == "debug = off\nport = 8080\n");
  // The user's fault plan acted (once per session: an nth rule fires once however many resumes).
  std::string log = std::string(CARAPACE_BIN) + " --home " + home + " log show torture > " + dir.sub("log.out");
  BOOST_REQUIRE(std::system(log.c_str()) == 0);
  const std::string text = CliRunner::slurp(dir.sub("log.out"));
  size_t faults = 0;
  for (size_t at = text.find("fault.injected"); at != std::string::npos; at = text.find("fault.injected", at + 1)) {
    ++faults;
  }
  BOOST_TEST(faults == 1u, text);
  BOOST_TEST(text.find("HTTP 502") != std::string::npos);
  // The same in words, with what it usually means and where to look.
  CliResult human = cli.run(agent_args("turn") + " --dir " + dir.sub("h"));
  BOOST_TEST(human.code == 1);
  BOOST_TEST(human.out.find("what it usually means: turn mode ran the calls") != std::string::npos, human.out);
  BOOST_TEST(human.out.find("look: carapace --home ") != std::string::npos);
  BOOST_TEST(human.out.find("# the crash-free run") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(step_2_step_mode_passes_and_says_why_runs_were_not_compared) {
  TempDir dir;
  CliRunner cli(CARAPACE_BIN, dir.sub("home"), dir.path());
  CliResult r = cli.run(agent_args("step") + " --dir " + dir.sub("t") + " --json");
  BOOST_TEST_REQUIRE(r.code == 0, r.out << r.err);
  const json d = json::parse(r.out)["data"];
  accounted(d);
  BOOST_TEST(d["violations"].empty());
  for (const auto& [why, n] : d["skipped_by_reason"].items()) {
    BOOST_TEST(why.find("step mode: a call a crash cut short") != std::string::npos, why);
  }
  // Nothing kept when everything passed.
  BOOST_TEST(!fs::exists(dir.sub("t") + "/reference"));
  CliResult human = cli.run(agent_args("step"));
  BOOST_TEST(human.code == 0);
  BOOST_TEST(human.out.find("final state equal to crash-free run") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_workspace_left_different_is_named_by_file_and_line) {
  // The call's output is the same however often it runs (nothing printed);
  // only the file it appends to shows the second run.
  TempDir dir;
  CliRunner cli(CARAPACE_BIN, dir.sub("home"), dir.path());
  fs::create_directories(dir.sub("ws"));
  std::ofstream(dir.sub("quiet.json")) << R"({"replies": [
    {"text": "Noting.", "tool_calls": [{"name": "shell", "args": {"command": "echo noted >> notes.txt"}}]},
    {"text": "Noted."}]})";
  CliResult r = cli.run("torture " + dir.sub("quiet.json") + " --workspace " + dir.sub("ws") +
                        " --mode turn --points tool.after_exec --iterations 2 --seed 3 --dir " + dir.sub("t") +
                        " --json");
  BOOST_TEST_REQUIRE(r.code == 1, r.out << r.err);
  const json v = json::parse(r.out)["data"]["violations"][0];
  BOOST_TEST(v["kind"] == "workspace_differs");
  const std::string detail = v["detail"];
  BOOST_TEST(detail.find("the workspace differs at notes.txt") != std::string::npos, detail);
  BOOST_TEST(detail.find("line 2 \"noted\" here") != std::string::npos, detail);
  BOOST_TEST(v["look"][0].get<std::string>().rfind("diff -r ", 0) == 0);
  BOOST_TEST(std::system((v["look"][0].get<std::string>() + " > /dev/null").c_str()) != 0);  // diff finds it
}

BOOST_AUTO_TEST_CASE(the_harness_refuses_what_it_cannot_honour) {
  TempDir dir;
  CliRunner cli(CARAPACE_BIN, dir.sub("home"), dir.path());
  std::ofstream(dir.sub("crash.json")) << R"({"faults": [{"point": "hook", "action": "crash", "nth": 1}]})";
  CliResult r = cli.run("torture " + kAgent + "scenario.json --faults " + dir.sub("crash.json"));
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err.find("faults[0] crashes: torture makes the crashes itself") != std::string::npos, r.err);
  BOOST_TEST(cli.run("torture " + kAgent + "scenario.json --points bogus").code == 2);
  BOOST_TEST(cli.run("torture " + kAgent + "scenario.json --workspace " + dir.sub("none")).code == 2);
  BOOST_TEST(cli.run("torture " + kAgent + "scenario.json --config " + dir.sub("none.json")).code == 2);
  std::ofstream(dir.sub("bad.json")) << R"({"faults": [{"point": "nowhere", "action": "error"}]})";
  r = cli.run("torture " + kAgent + "scenario.json --faults " + dir.sub("bad.json"));
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err.find("nowhere") != std::string::npos, r.err);
}
