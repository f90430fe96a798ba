// The approvals on the command line (docs/approvals.md): `run` parks with
// exit code 3 and the commands that answer; `approvals` lists what waits;
// `approve` records the decision, bound to the arguments' digest, and runs
// the session on; a second answer is refused naming the first; the replay
// is identical.
#define BOOST_TEST_MODULE approvals_cli_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "tests/support/cli_home.h"

using carapace::testing::CliHome;
using carapace::testing::CliResult;

namespace {

struct Home : CliHome {
  std::string scenario = file("s.json", R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "touch ran"}}]},
      {"text": "done"}]})");
  std::string config = file("c.json", R"({"approvals": {"tools": "^shell$"}})");
  std::string workspace() const { return dir.sub("ws"); }
  std::string run_args(const std::string& id) const {
    return "run go --session " + id + " --scenario " + scenario + " --config " + config + " --workspace " + workspace();
  }
  Home() { std::filesystem::create_directories(workspace()); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(run_parks_with_exit_3_and_approve_goes_on_once, Home) {
  CliResult r = run(run_args("s1"));
  BOOST_TEST(r.code == 3, r.err);
  BOOST_TEST(r.err.find("waits for a decision") != std::string::npos, r.err);
  BOOST_TEST(r.err.find(" approve s1 call") != std::string::npos, r.err);
  BOOST_TEST(!std::filesystem::exists(workspace() + "/ran"));

  nlohmann::json listed = run_json("approvals");
  BOOST_REQUIRE(listed["data"].size() == 1u);
  const nlohmann::json& w = listed["data"][0];
  BOOST_TEST(w["session"] == "s1");
  BOOST_TEST(w["tool"] == "shell");
  BOOST_TEST(w["args"]["command"] == "touch ran");
  const std::string call = w["call_id"];
  const std::string digest = w["args_digest"];
  CliResult parked_trace = run("trace show s1");
  BOOST_TEST(parked_trace.out.find("WAITING for a decision on call " + call) != std::string::npos, parked_trace.out);
  BOOST_TEST(parked_trace.out.find("CRASH") == std::string::npos, parked_trace.out);  // it waits, it did not crash
  nlohmann::json sessions = run_json("sessions");
  BOOST_TEST(sessions.dump().find("\"waiting\"") != std::string::npos, sessions.dump());

  CliResult wrong = run("approve s1 " + call + " --digest 00000000000000000000000000000000");
  BOOST_TEST(wrong.code == 1, wrong.err);
  BOOST_TEST(wrong.err.find("waits with arguments") != std::string::npos, wrong.err);
  BOOST_TEST(!std::filesystem::exists(workspace() + "/ran"));

  CliResult ok = run("approve s1 " + call + " --digest " + digest + " --reason looks-fine");
  BOOST_TEST(ok.code == 0, ok.err);
  BOOST_TEST(ok.out.find("done") != std::string::npos, ok.out);
  BOOST_TEST(std::filesystem::exists(workspace() + "/ran"));

  CliResult again = run("deny s1 " + call);
  BOOST_TEST(again.code == 1, again.err);
  BOOST_TEST(again.err.find("already approved by cli") != std::string::npos, again.err);
  BOOST_TEST(run_json("approvals")["data"].empty());

  CliResult log = run("log show s1 --json");
  BOOST_TEST(log.code == 0, log.err);
  BOOST_TEST(log.out.find("approval.decided") != std::string::npos);

  // The wait is a span of its own, and trace stats counts it apart.
  nlohmann::json stats = run_json("trace stats");
  BOOST_TEST(stats.dump().find("\"approvals\":{\"decided\":1") != std::string::npos, stats.dump());
  CliResult trace = run("trace show s1 --full");
  BOOST_TEST(trace.code == 0, trace.err);
  BOOST_TEST(trace.out.find("approval shell  → approved by cli after") != std::string::npos, trace.out);
  BOOST_TEST(trace.out.find("woken while waiting for a decision") != std::string::npos, trace.out);
  BOOST_TEST(trace.out.find("CRASH") == std::string::npos, trace.out);

  CliResult otlp = run("trace export s1 --format otlp");
  BOOST_TEST(otlp.code == 0, otlp.err);
  BOOST_TEST(otlp.out.find("carapace.approval.decision") != std::string::npos);
  BOOST_TEST(otlp.out.find("carapace.approval.wait_ms") != std::string::npos);

  CliResult replay = run("replay s1");
  BOOST_TEST(replay.code == 0, replay.out << replay.err);
}

BOOST_FIXTURE_TEST_CASE(deny_tells_the_model_and_the_call_never_runs, Home) {
  BOOST_TEST(run(run_args("s2")).code == 3);
  const std::string call = run_json("approvals s2")["data"][0]["call_id"];
  CliResult r = run("deny s2 " + call + " --reason not-now");
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(!std::filesystem::exists(workspace() + "/ran"));
  CliResult unknown = run("approve s2 nope");
  BOOST_TEST(unknown.code == 1);
  BOOST_TEST(unknown.err.find("no approval request for call 'nope'") != std::string::npos, unknown.err);
}

// In chat, a person is there: the model may ask (ask_user), and the next
// line answers; a call the policy asks about is decided with y or n.
BOOST_FIXTURE_TEST_CASE(chat_answers_questions_and_approvals_line_by_line, Home) {
  const std::string s = file("chat.json", R"({"replies": [
      {"tool_calls": [{"name": "ask_user", "args": {"question": "Which file?"}}]},
      {"tool_calls": [{"name": "shell", "args": {"command": "touch ran"}}]},
      {"text": "all done"}]})");
  CliResult r = run("chat --session c1 --scenario " + s + " --config " + config + " --workspace " + workspace(),
                    "go\nthe ran file\nmaybe\ny\n/exit\n");
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("agent asks: Which file?") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("approve shell") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("y (approve) or n [reason] (deny)") != std::string::npos, r.out);  // "maybe" decides nothing
  BOOST_TEST(r.out.find("all done") != std::string::npos, r.out);
  BOOST_TEST(std::filesystem::exists(workspace() + "/ran"));
  CliResult log = run("log show c1 --json");
  BOOST_TEST(log.out.find("the ran file") != std::string::npos);  // the answer is the call's result
  BOOST_TEST(log.out.find("\"by\":\"chat\"") != std::string::npos, log.out.substr(0, 400));
}
