// Runs the real `carapace` binary against a temp home and checks its output
// and exit codes, including after records are damaged behind its back.
#define BOOST_TEST_MODULE cli_test
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <poll.h>
#include <pty.h>

#include <chrono>
#include <thread>

#include "base/redactor.h"
#include "base/child_process.h"
#include "storage/event_log.h"
#include "storage/keys.h"
#include "storage/body_store.h"
#include "storage/trace_store.h"
#include "tests/support/cli_home.h"
#include "tests/support/fake_model.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/proc_watch.h"
#include "tests/support/pty_process.h"
#include "tests/support/raw_db.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using nlohmann::json;

namespace {

using testing::CliResult;
using testing::contains;
using testing::slurp;
using Result = testing::CliResult;

// The home on a 2 MB tmpfs, unmounted at the end. Needs the right to mount
// (root with CAP_SYS_ADMIN); without it, `mounted` is false and the test says so.
struct SmallTmpfs {
  std::string at;
  bool mounted = false;
  explicit SmallTmpfs(std::string where) : at(std::move(where)) {
    std::filesystem::create_directories(at);
    mounted = ::mount("tmpfs", at.c_str(), "tmpfs", 0, "size=2m,mode=0700") == 0;
    if (!mounted) BOOST_TEST_MESSAGE("skipped: cannot mount a tmpfs here (needs CAP_SYS_ADMIN)");
  }
  ~SmallTmpfs() {
    if (mounted) ::umount2(at.c_str(), MNT_DETACH);
  }
};

struct CliFixture : testing::CliHome {
  void corrupt(const std::string& id, uint64_t seq) {
    testing::RawDb raw(dir.sub("home") + "/log");
    std::string key = keys::seq_key(id, seq);
    std::string value = raw.get(kEventsFamily, key);
    value[value.size() - 1] ^= 0x04;
    raw.put(kEventsFamily, key, value);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cli, CliFixture)

BOOST_AUTO_TEST_CASE(help_is_everywhere) {
  Result r = run("--help");
  BOOST_TEST(r.code == 0);
  for (const char* cmd : {"log", "sessions", "verify"}) BOOST_TEST(contains(r.out, cmd), cmd);
  BOOST_TEST(run("log --help").code == 0);
  for (const char* args : {"log synth --help", "log show --help", "sessions --help", "verify --help"}) {
    Result sub = run(args);
    BOOST_TEST(sub.code == 0, args);
    BOOST_TEST(contains(sub.out, "--json"), args);
  }
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2) {
  BOOST_TEST(run("").code == 2);
  BOOST_TEST(run("log synth").code == 2);  // --turns is required
  BOOST_TEST(run("log synth --turns zero").code == 2);
  Result unknown = run("frobnicate");
  BOOST_TEST(unknown.code == 2);
  BOOST_TEST(contains(unknown.err, "'frobnicate' is not a command of carapace"), unknown.err);
  Result unknown_sub = run("log frob");
  BOOST_TEST(unknown_sub.code == 2);
  BOOST_TEST(contains(unknown_sub.err, "'frob' is not a command of carapace log"), unknown_sub.err);
  BOOST_TEST(run("resume s --mode bogus").code == 2);
  BOOST_TEST(run("run x --resume s --mode bogus").code == 2);
  BOOST_TEST(run("torture x.json --mode bogus").code == 2);
  Result negative = run("fork s --at-turn -1");
  BOOST_TEST(negative.code == 2);
  BOOST_TEST(!contains(negative.err, "18446744073709551615"), negative.err);
  BOOST_TEST(contains(negative.err, "--at-turn: \"-1\" is not a whole number from 0"), negative.err);
  Result zero = run("replay s --until-turn 0");
  BOOST_TEST(contains(zero.err, "--until-turn: \"0\" is not a whole number from 1"), zero.err);
}

// One contract for the command line: --version; a typo gets "did you
// mean"; a wrong command line exits 2, as JSON under --json too; no option
// is silently ignored; a printed hint works as pasted (it carries --home).
BOOST_AUTO_TEST_CASE(the_command_line_contract) {
  for (const char* v : {"--version", "-V", "version"}) {
    Result r = run(v);
    BOOST_TEST(r.code == 0, v);
    BOOST_TEST(r.out.rfind("carapace 0.", 0) == 0u, v << ": " << r.out);
  }
  // The program runs on the allocator it was built with (tools/allocator.h).
  json version = run_json("version");
#if CARAPACE_WITH_MIMALLOC
  BOOST_TEST(version["data"]["allocator"].get<std::string>().rfind("mimalloc 2.", 0) == 0u, version.dump());
#else
  BOOST_TEST(version["data"]["allocator"] == "system", version.dump());
#endif
  Result typo = run("sesions");
  BOOST_TEST(typo.code == 2);
  BOOST_TEST(contains(typo.err, "did you mean `carapace sessions`?"), typo.err);
  Result sub_typo = run("trace shwo x");
  BOOST_TEST(sub_typo.code == 2);
  BOOST_TEST(contains(sub_typo.err, "did you mean `carapace trace show`?"), sub_typo.err);
  BOOST_TEST(!contains(run("zzzzzzzz").err, "did you mean"));

  // Usage errors found after parsing exit 2 too.
  BOOST_TEST(run("gc --max-age banana").code == 2);
  BOOST_TEST(run("gc --max-body-bytes lots").code == 2);
  Result no_task = run("run");
  BOOST_TEST(no_task.code == 2, no_task.err);
  BOOST_TEST(contains(no_task.err, "run needs a task"), no_task.err);
  Result mode = run("run hello --mode turn --scenario x.json");
  BOOST_TEST(mode.code == 2);
  BOOST_TEST(contains(mode.err, "--mode is for --resume"), mode.err);
  BOOST_TEST(run("trace analyze").code == 2);
  BOOST_TEST(run("trace span s 1 --body neither").code == 2);

  // --json is honoured by usage errors, from the parser or after it.
  for (const std::string args : {"gc --max-age banana --json", "log synth --turns zero --json", "sesions --json",
                                  "run --json", "log show --json"}) {
    Result r = run(args);
    BOOST_TEST(r.code == 2, args);
    json j = json::parse(r.out, nullptr, false);
    BOOST_TEST_REQUIRE(j.is_object(), args << ": " << r.out << r.err);
    BOOST_TEST(j["success"] == false, args);
    BOOST_TEST(j["error"]["code"] == "usage", args);
    BOOST_TEST(!j["error"]["message"].get<std::string>().empty(), args);
  }

  // The demo honours --home: a new directory is its home; one with things in it is refused.
  std::filesystem::create_directories(dir.sub("full"));
  std::ofstream(dir.sub("full/keep.txt")) << "mine";
  Result full = run_in(dir.sub("full"), "demo");
  BOOST_TEST(full.code == 2);
  BOOST_TEST(contains(full.err, "is not empty"), full.err);
  BOOST_TEST(slurp(dir.sub("full/keep.txt")) == "mine");
  Result demo = run_in(dir.sub("demo-home"), "demo --scenario " + std::string(PROJECT_DIR) + "/examples/scenarios/demo.json");
  BOOST_TEST(demo.code == 0, demo.out << demo.err);
  BOOST_TEST(std::filesystem::exists(dir.sub("demo-home") + "/log"));
  BOOST_TEST(contains(demo.out, "carapace --home " + dir.sub("demo-home") + " log show demo"), demo.out);

  // A hint printed with --home works as pasted.
  std::string ws = dir.sub("ws-hint");
  std::filesystem::create_directories(ws);
  Result ran = run("run 'Summarize the workspace' --session h1 --scenario " + std::string(PROJECT_DIR) +
                   "/examples/scenarios/quickstart.json --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(ran.code == 0, ran.err);
  size_t at = ran.err.find("its events: ");
  BOOST_REQUIRE(at != std::string::npos);
  std::string hint = ran.err.substr(at + 12, ran.err.find('\n', at) - at - 12);
  BOOST_TEST(contains(hint, "--home "), hint);
  BOOST_REQUIRE(hint.rfind("carapace ", 0) == 0);
  int status = std::system((std::string(CARAPACE_BIN) + hint.substr(8) + " > /dev/null 2>&1").c_str());
  BOOST_TEST(WEXITSTATUS(status) == 0, hint);

  // `trace tail` on a session that has not started says so (once), rather than wait in silence.
  const std::string tail_cmd = "(" + std::string(CARAPACE_BIN) + " --home '" + dir.sub("home") +
                               "' trace tail nope --interval-ms 50 > /dev/null 2>'" + dir.sub("tail.err") +
                               "' & p=$!; sleep 1; kill $p; wait $p)";
  (void)std::system(tail_cmd.c_str());
  const std::string tail = slurp(dir.sub("tail.err"));
  BOOST_TEST(contains(tail, "no session nope in"), tail);
  BOOST_TEST(contains(tail, "waiting for it to start"), tail);
}

// The subcommands of `help` (carapace --help, or a group's): the names under "Subcommands:".
std::vector<std::string> subcommands_in(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream lines(help);
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list && !line.empty() && line[0] != ' ') {
      in_list = false;
    }
  }
  return names;
}

// What every --json answer must be: one JSON document on one line, either
// {"success": true, "data", "summary"} with exit 0, or {"success": false,
// "error": {"code", "message", "hint"}} (each a non-empty string) with exit
// 1, or exit 2 and code "usage" for a wrong command line.
void check_envelope(const std::string& args, const Result& r, int expected_code) {
  BOOST_TEST(r.code == expected_code, args << ": exit " << r.code << "\n" << r.out << r.err);
  BOOST_TEST(std::count(r.out.begin(), r.out.end(), '\n') == 1, args << ": " << r.out);
  const json j = json::parse(r.out, nullptr, false);
  BOOST_TEST_REQUIRE(j.is_object(), args << ": not one JSON object: " << r.out << r.err);
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  if (r.code == 0) {
    BOOST_TEST((keys == std::set<std::string>{"success", "data", "summary"}), args << ": " << r.out);
    BOOST_TEST(j["success"] == true, args);
    BOOST_TEST((j["summary"].is_string() && !j["summary"].get<std::string>().empty()), args);
    return;
  }
  BOOST_TEST((keys == std::set<std::string>{"success", "error"}), args << ": " << r.out);
  BOOST_TEST(j["success"] == false, args);
  const json& error = j["error"];
  BOOST_TEST_REQUIRE(error.is_object(), args << ": " << r.out);
  std::set<std::string> error_keys;
  for (const auto& [key, value] : error.items()) {
    error_keys.insert(key);
    BOOST_TEST((value.is_string() && !value.get<std::string>().empty()), args << ": error." << key << " " << r.out);
  }
  BOOST_TEST((error_keys == std::set<std::string>{"code", "message", "hint"}), args << ": " << r.out);
  BOOST_TEST((error.value("code", std::string()) == "usage") == (r.code == 2), args << ": " << r.out);
}

// Every subcommand with --json answers in the one envelope, for a success,
// a failure and a usage error; and no subcommand is left out of this list.
BOOST_AUTO_TEST_CASE(every_subcommand_answers_json_in_one_envelope) {
  const std::string quickstart = std::string(PROJECT_DIR) + "/examples/scenarios/quickstart.json";
  const std::string ws = dir.sub("ws-envelope");
  std::filesystem::create_directories(ws);
  const std::string bundle = dir.sub("s1.bundle"), exported = dir.sub("s1.md");
  struct Case {
    std::string args;
    int code;
  };
  const std::vector<Case> cases = {
      {"run 'Write a note' --scenario " + quickstart + " --workspace " + ws + " --session s1", 0},
      {"run", 2},
      {"run x --mode turn --scenario " + quickstart, 2},
      {"log show s1", 0},
      {"log show nope", 1},
      {"log show s1 --from x", 2},
      {"log synth --turns 2 --session syn", 0},
      {"log synth", 2},
      {"sessions", 0},
      {"sessions --status bogus", 2},
      {"verify s1", 0},
      {"verify --all", 0},
      {"verify nope", 1},
      {"resume s1", 1},  // completed: nothing to resume
      {"resume nope", 1},
      {"resume s1 --mode bogus", 2},
      {"fork s1 --at-turn 1 --session f1 --scenario " + quickstart, 0},
      {"fork nope --at-turn 1 --scenario " + quickstart, 1},
      {"fork s1 --at-turn -1", 2},
      {"replay s1", 0},
      {"replay nope", 1},
      {"replay s1 --until-turn 0", 2},
      {"bundle s1 -o " + bundle, 0},
      {"bundle nope -o " + dir.sub("nope.bundle"), 1},
      {"bundle s1 --out " + bundle, 2},
      {"bundle import " + bundle + " --as b1", 0},
      {"bundle import " + dir.sub("missing.bundle"), 2},
      {"bundle import " + bundle + " --as b1", 1},  // there already
      {"trace show s1", 0},
      {"trace show nope", 1},
      {"trace span s1 5", 0},
      {"trace span s1 99999", 1},
      {"trace span s1 1 --body neither", 2},
      {"trace stats", 0},
      {"trace stats --since banana", 2},
      {"trace analyze s1", 0},
      {"trace analyze nope", 1},
      {"trace analyze", 2},
      {"trace diff s1 f1", 0},
      {"trace diff s1 nope", 1},
      {"trace tail", 2},
      {"trace export s1 --format md -o " + exported, 0},
      {"trace export nope --format md -o " + exported, 1},
      {"trace export s1 --format md", 2},
      {"trace export s1 --format bogus", 2},
      {"collector --once", 0},
      {"collector --interval-ms 1", 2},
      {"gc --dry-run", 0},
      {"gc --max-age banana", 2},
      {"gc --config " + dir.sub("missing.json"), 1},
      {"node certs " + dir.sub("tls-n1") + " --ca " + dir.sub("ca") + " --name n1", 0},
      {"node certs " + dir.sub("tls-n1") + " --ca " + dir.sub("ca") + " --name n1", 1},  // never overwrites a key
      {"node certs " + dir.sub("tls-x") + " --ca " + dir.sub("ca") + " --name 'a b'", 1},
      {"node --listen 127.0.0.1:0", 1},  // no certificates, and not --insecure-loopback
      {"node --listen 127.0.0.1:0 --tls " + dir.sub("missing"), 1},
      {"node --listen 10.1.2.3:0 --insecure-loopback", 2},
      {"node --role gateway --listen 127.0.0.1:0", 2},
      {"node --role collector --listen 127.0.0.1:0", 1},  // no certificates
      {"node --role provider --listen 127.0.0.1:0 --insecure-loopback", 1},  // the scripted provider has no key to hold
      {"mcp list", 0},
      {"mcp list --config " + dir.sub("missing.json"), 1},
      {"torture " + quickstart + " --iterations 1 --seed 3 --dir " + dir.sub("torture"), 0},
      {"torture " + quickstart + " --points nowhere", 2},
      {"approvals", 0},
      {"approvals nope", 1},
      {"approve s1 call_1", 1},
      {"deny nope call_1", 1},
      {"answer s1 call_1 blue", 1},
      {"schedule add nightly --cron '0 3 * * *' --task report", 0},
      {"schedule add nightly --cron '0 3 * * *' --task report", 1},  // there already
      {"schedule add bad --cron '0 24 * * *' --task report", 2},
      {"schedule list", 0},
      {"schedule show nightly", 0},
      {"schedule show nope", 1},
      {"schedule pause nightly --reason holidays", 0},
      {"schedule pause nightly", 1},  // paused already
      {"schedule resume nightly", 0},
      {"schedule trigger nightly", 1},  // no server runs the home
      {"schedule backfill nightly --from 2026-11-01 --to 2026-11-02", 1},
      {"schedule rm nightly", 0},
      {"schedule rm nightly", 1},
      {"sessions rm syn --yes", 0},
      {"sessions rm nope --yes", 1},
      {"repair", 0},
      {"version", 0},
      {"version extra", 2},
      {"frobnicate", 2},
  };
  for (const Case& c : cases) check_envelope(c.args, run(c.args + " --json"), c.code);

  // trace tail streams: one event per line, each a JSON object; its errors are the envelope.
  Result tail = run("trace tail s1 --exit-when-done --json");
  BOOST_TEST(tail.code == 0, tail.err);
  std::istringstream lines(tail.out);
  size_t events = 0;
  for (std::string line; std::getline(lines, line); ++events) {
    const json e = json::parse(line, nullptr, false);
    BOOST_TEST_REQUIRE(e.is_object(), line);
    BOOST_TEST((e.contains("seq") && e.contains("type") && e.contains("data")), line);
  }
  BOOST_TEST(events > 10u);

  // Every subcommand is in the list above, or here with the reason it has no --json.
  const std::map<std::string, std::string> without_json = {
      {"demo", "a show narrated for a person"},
      {"chat", "a conversation at a terminal"},
      {"serve", "a server: its API answers in this envelope (serve_test)"},
      {"trace tail", "a stream of events, checked above"},
  };
  std::set<std::string> covered;
  for (const Case& c : cases) {
    std::istringstream words(c.args);
    std::string first, second;
    words >> first >> second;
    covered.insert(first);
    covered.insert(first + " " + second);
  }
  const std::vector<std::string> top = subcommands_in(run("--help").out);
  BOOST_TEST(top.size() > 15u);
  for (const std::string& name : top) {
    std::vector<std::string> paths = {name};
    for (const std::string& sub : subcommands_in(run(name + " --help").out)) paths.push_back(name + " " + sub);
    for (const std::string& path : paths) {
      BOOST_TEST((covered.count(path) == 1 || without_json.count(path) == 1),
                 "`carapace " << path << " --json` is not checked by this test");
      if (without_json.count(path) == 1 && path != "trace tail") {
        BOOST_TEST(!contains(run(path + " --help").out, "--json"), path << " has --json: check it above");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(sessions_newest_first_with_cost_and_filters) {
  BOOST_REQUIRE(run("log synth --session a-old --turns 2").code == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string ws = dir.sub("ws-sessions");
  std::filesystem::create_directories(ws);
  Result ran = run("run 'Summarize the workspace' --session b-new --json --scenario " + std::string(PROJECT_DIR) +
                   "/examples/scenarios/quickstart.json --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(ran.code == 0, ran.err);
  const double cost = json::parse(ran.out)["data"]["cost_usd"];
  BOOST_TEST(cost > 0.0);

  json all = run_json("sessions");
  BOOST_REQUIRE(all["data"]["sessions"].size() == 2u);
  BOOST_TEST(all["data"]["sessions"][0]["id"] == "b-new");  // newest first, though "a-old" sorts first by id
  BOOST_TEST(all["data"]["sessions"][1]["id"] == "a-old");
  BOOST_TEST(std::abs(all["data"]["sessions"][0]["cost_usd"].get<double>() - cost) < 1e-9);

  json limited = run_json("sessions --limit 1");
  BOOST_REQUIRE(limited["data"]["sessions"].size() == 1u);
  BOOST_TEST(limited["data"]["sessions"][0]["id"] == "b-new");
  BOOST_TEST(contains(limited["summary"].get<std::string>(), "1 session shown of 2 sessions"), limited["summary"]);
  json completed = run_json("sessions --status completed");
  for (const auto& row : completed["data"]["sessions"]) BOOST_TEST(row["status"] == "completed");
  BOOST_TEST(run_json("sessions --status failed")["data"]["sessions"].empty());
  BOOST_TEST(run_json("sessions --since 1h")["data"]["sessions"].size() == 2u);
  BOOST_TEST(run("sessions --since banana").code == 2);
  BOOST_TEST(run("sessions --status sleeping").code == 2);
  BOOST_TEST(run("sessions --limit 0").code == 2);
  Result human = run("sessions");
  BOOST_TEST(contains(human.out, "COST"), human.out);
  BOOST_TEST(human.out.find("b-new") < human.out.find("a-old"), human.out);
}

// Many sessions from one `log synth`, dated back a day apart: `sessions`
// reads only the ones it shows, newest first, and its filters still hold.
BOOST_AUTO_TEST_CASE(many_synthetic_sessions_spread_over_a_month) {
  json wrote = run_json("log synth --sessions 30 --spread 30d --turns 1 --tool-calls 1 --session m");
  BOOST_TEST(wrote["data"]["sessions"] == 30);
  BOOST_TEST(wrote["data"]["turns"] == 30);
  json newest = run_json("sessions --limit 5");
  BOOST_REQUIRE(newest["data"]["sessions"].size() == 5u);
  for (int k = 0; k < 5; ++k) BOOST_TEST(newest["data"]["sessions"][k]["id"] == "m-" + std::to_string(30 - k));
  BOOST_TEST(contains(newest["summary"].get<std::string>(), "5 sessions shown of 30 sessions"), newest["summary"]);
  // m-30 began a day ago, m-29 two days ago, m-28 three.
  json recent = run_json("sessions --since 60h");
  BOOST_REQUIRE(recent["data"]["sessions"].size() == 2u);
  BOOST_TEST(recent["data"]["sessions"][1]["id"] == "m-29");
  BOOST_TEST(run_json("sessions --since 60h --limit 1")["data"]["sessions"].size() == 1u);
  BOOST_TEST(run_json("sessions --status completed --limit 3")["data"]["sessions"][2]["id"] == "m-28");
  BOOST_TEST(run_json("sessions --status failed --limit 3")["data"]["sessions"].empty());
  BOOST_TEST(run_json("sessions")["data"]["sessions"].size() == 30u);
  json stats = run_json("trace stats --since 60h");
  BOOST_TEST(stats["data"]["totals"]["sessions"] == 2, stats.dump());
  BOOST_TEST(run("log synth --sessions 2 --spread soon --turns 1").code == 2);
}

// With no --workspace, the tools work in the session's own directory under
// the home, never in the directory the command was typed in.
BOOST_AUTO_TEST_CASE(the_default_workspace_is_the_sessions_own) {
  const std::string here = dir.sub("standing-here");
  std::filesystem::create_directories(here);
  const std::string cmd = "cd '" + here + "' && " + std::string(CARAPACE_BIN) + " --home '" + dir.sub("home") +
                          "' run 'Summarize the workspace' --session w1 --scenario " + std::string(PROJECT_DIR) +
                          "/examples/scenarios/quickstart.json > /dev/null 2>'" + dir.sub("w.err") + "'";
  BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, slurp(dir.sub("w.err")));
  BOOST_TEST(std::filesystem::is_empty(here));  // nothing written where the user stood
  const std::string own = dir.sub("home") + "/workspaces/w1";
  BOOST_TEST(slurp(own + "/notes/summary.txt") == "Carapace was here.\n");
  BOOST_TEST(((std::filesystem::status(own).permissions() & std::filesystem::perms::all) ==
              std::filesystem::perms::owner_all));
  BOOST_TEST(contains(slurp(dir.sub("w.err")), "workspace: " + own), slurp(dir.sub("w.err")));
  // A resume works in the same directory (recorded in session.started).
  json started = run_json("log show w1 --type session.started");
  BOOST_TEST(started["data"]["events"][0]["data"]["workspace"] == own);
}

BOOST_AUTO_TEST_CASE(an_empty_home_says_what_to_do) {
  Result r = run("sessions");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "carapace --home " + dir.sub("home") + " log synth --turns 5"), r.err);
  json j = run_json("log show nobody", 1);
  BOOST_TEST(j["success"] == false);
  BOOST_TEST(j["error"]["code"] == "not found");
}

BOOST_AUTO_TEST_CASE(synth_show_sessions_verify) {
  Result w = run("log synth --session s1 --turns 6 --seed 3");
  BOOST_TEST(w.code == 0, w.err);
  BOOST_TEST(contains(w.out, "wrote session s1"));
  BOOST_TEST(contains(w.out, "carapace --home " + dir.sub("home") + " log show s1"), w.out);

  Result show = run("log show s1");
  BOOST_TEST(show.code == 0);
  BOOST_TEST(contains(show.out, "session.started"));
  BOOST_TEST(contains(show.out, "turn.committed"));
  BOOST_TEST(contains(show.out, "session.completed"));

  json events = run_json("log show s1 --type tool.completed");
  BOOST_TEST(events["success"] == true);
  BOOST_TEST(events["data"]["events"].size() == 10u);  // 5 turns with 2 calls; the 6th answers
  BOOST_TEST(events["data"]["events"][0]["type"] == "tool.completed");

  json synth = run_json("log synth --session s2 --turns 3");
  BOOST_TEST(synth["data"]["turns"] == 3);

  json sessions = run_json("sessions");
  BOOST_REQUIRE(sessions["data"]["sessions"].size() == 2u);
  BOOST_TEST(sessions["data"]["sessions"][0]["id"] == "s2");  // newest first
  BOOST_TEST(sessions["data"]["sessions"][1]["id"] == "s1");
  BOOST_TEST(sessions["data"]["sessions"][1]["status"] == "completed");
  BOOST_TEST(sessions["data"]["sessions"][1]["turns"] == 6);

  Result verify = run("verify");
  BOOST_TEST(verify.code == 0);
  BOOST_TEST(contains(verify.out, "all 2 sessions verified"));
  json v = run_json("verify s1");
  BOOST_TEST(v["success"] == true);
  BOOST_TEST(v["data"]["sessions"][0]["checkpoints_verified"] == 7);
}

BOOST_AUTO_TEST_CASE(a_session_is_written_once) {
  BOOST_TEST(run("log synth --session s1 --turns 2").code == 0);
  Result again = run("log synth --session s1 --turns 2");
  BOOST_TEST(again.code == 1);
  BOOST_TEST(contains(again.err, "already exists"));
  Result bad = run("log synth --session 'a b' --turns 2");
  BOOST_TEST(bad.code == 1);
  BOOST_TEST(contains(bad.err, "has character 32"));
}

// The spans of a session long enough to be read in several batches (the
// reader runs ahead of the builder, tools/trace_load.cc) are those of a
// one-by-one fold; a damaged record ends them there, with a warning.
BOOST_AUTO_TEST_CASE(a_long_trace_is_read_in_batches_up_to_a_damaged_record) {
  BOOST_TEST(run("log synth --session long --turns 400").code == 0);
  json whole = run_json("trace show long");
  BOOST_TEST(whole["data"]["source"] == "log");
  uint64_t last = whole["data"]["last_seq"].get<uint64_t>();
  BOOST_REQUIRE(last > 4000u);                       // more than the reader's queue holds at once
  std::map<uint64_t, std::set<std::string>> opened;  // span ids by their opening seq
  for (const auto& sp : whole["data"]["spans"]) opened[sp["open_seq"].get<uint64_t>()].insert(sp["span_id"]);
  // Every span the events open is there, the session's last included.
  BOOST_TEST(whole["data"]["spans"].size() > 2000u);
  BOOST_TEST(opened.rbegin()->first > last - 20);

  const uint64_t damaged = 3001;
  corrupt("long", damaged);
  json cut = run_json("trace show long");
  BOOST_TEST(contains(cut["data"].value("warning", ""), "seq 3001"), cut.dump().substr(0, 300));
  std::set<std::string> expected, got;
  for (const auto& [seq, ids] : opened) {
    if (seq < damaged) expected.insert(ids.begin(), ids.end());
  }
  for (const auto& sp : cut["data"]["spans"]) got.insert(sp["span_id"].get<std::string>());
  BOOST_TEST((got == expected), got.size() << " spans, expected " << expected.size());
}

BOOST_AUTO_TEST_CASE(verify_names_the_damaged_record) {
  BOOST_TEST(run("log synth --session good --turns 4").code == 0);
  BOOST_TEST(run("log synth --session bad --turns 4").code == 0);
  corrupt("bad", 17);

  Result r = run("verify --all");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.out, "ok    good"));
  BOOST_TEST(contains(r.out, "FAIL  bad"));
  BOOST_TEST(contains(r.out, "seq 17  checksum: checksum mismatch"), r.out);

  json j = run_json("verify", 1);
  BOOST_TEST(j["success"] == false);
  BOOST_REQUIRE(j["data"]["issues"].size() == 1u);
  BOOST_TEST(j["data"]["issues"][0]["session"] == "bad");
  BOOST_TEST(j["data"]["issues"][0]["seq"] == 17);
  BOOST_TEST(j["data"]["issues"][0]["kind"] == "checksum");

  Result show = run("log show bad");
  BOOST_TEST(show.code == 1);
  BOOST_TEST(contains(show.out, "    16 "));  // the records before the damage are shown
  BOOST_TEST(!contains(show.out, "    17 "));
  BOOST_TEST(contains(show.err, "session bad seq 17: checksum mismatch"));

  BOOST_TEST(run("verify good").code == 0);
}

BOOST_AUTO_TEST_CASE(log_show_reports_a_missing_record_where_it_was) {
  BOOST_TEST(run("log synth --session s --turns 3").code == 0);
  {
    testing::RawDb raw(dir.sub("home") + "/log");
    raw.erase(kEventsFamily, keys::seq_key("s", 5));
  }
  Result show = run("log show s");
  BOOST_TEST(show.code == 1);
  BOOST_TEST(contains(show.out, "(gap)"), show.out);
  BOOST_TEST(contains(show.out, "seq 5 is missing"), show.out);
  BOOST_TEST(contains(show.out, "     6 "));  // the records after it are still shown
  BOOST_TEST(contains(show.err, "session s: seq 5 is missing"), show.err);
  json j = run_json("log show s", 1);
  BOOST_TEST(j["success"] == false);
  BOOST_REQUIRE(j["data"]["gaps"].size() == 1u);
  BOOST_TEST(j["data"]["gaps"][0]["from"] == 5);
  BOOST_TEST(j["data"]["gaps"][0]["to"] == 5);
  BOOST_TEST(j["data"]["events"].size() > 5u);
}

BOOST_AUTO_TEST_CASE(a_garbage_session_index_entry_is_named_and_the_rest_still_listed_and_verified) {
  BOOST_TEST(run("log synth --session good --turns 2").code == 0);
  BOOST_TEST(run("log synth --session spoiled --turns 2").code == 0);
  {
    testing::RawDb raw(dir.sub("home") + "/log");
    raw.put(kSessionsFamily, "spoiled", "\xff\xff garbage");
  }
  Result sessions = run("sessions");
  BOOST_TEST(sessions.code == 0, sessions.err);
  BOOST_TEST(contains(sessions.out, "good"));
  BOOST_TEST(contains(sessions.err, "'spoiled'"), sessions.err);
  json j = run_json("sessions");
  BOOST_TEST(j["data"]["sessions"].size() == 1u);
  BOOST_TEST(j["data"]["unreadable"].size() == 1u);
  Result verify = run("verify --all");
  BOOST_TEST(verify.code == 1);
  BOOST_TEST(contains(verify.out, "ok    good"), verify.out);
  BOOST_TEST(contains(verify.out, "FAIL  spoiled"), verify.out);
  BOOST_TEST(contains(verify.out, "does not decode"), verify.out);
}

BOOST_AUTO_TEST_CASE(repair_rebuilds_a_log_that_lost_its_current_file_and_says_what_it_kept) {
  BOOST_TEST(run("log synth --session a --turns 3").code == 0);
  BOOST_TEST(run("log synth --session b --turns 2").code == 0);
  std::filesystem::remove(dir.sub("home") + "/log/CURRENT");
  Result broken = run("sessions");
  BOOST_TEST(broken.code == 1);
  BOOST_TEST(contains(broken.err, "CURRENT"), broken.err);
  BOOST_TEST(contains(broken.err, "carapace --home " + dir.sub("home") + " repair"), broken.err);
  BOOST_TEST(!contains(broken.err, "log synth"), broken.err);  // never the hint that would write over it
  Result synth = run("log synth --session c --turns 1");
  BOOST_TEST(synth.code == 1);
  Result repair = run("repair");
  BOOST_TEST(repair.code == 0, repair.err);
  BOOST_TEST(contains(repair.out, "whole     a: kept seq 1-"), repair.out);
  BOOST_TEST(contains(repair.out, "whole     b: kept seq 1-"), repair.out);
  BOOST_TEST(contains(repair.out, "verify passes"), repair.out);
  BOOST_TEST(contains(repair.out, ".before-repair-"), repair.out);
  BOOST_TEST(run("verify --all").code == 0);
  json again = run_json("repair");
  BOOST_TEST(again["data"]["repaired"] == false);
}

// A real full disk: the home on a 2 MB tmpfs. Needs the right to mount
// (root with CAP_SYS_ADMIN); says so and checks nothing without it.
BOOST_AUTO_TEST_CASE(a_full_disk_is_a_clean_error_and_writing_goes_on_once_there_is_room) {
  std::string home = dir.sub("home");
  SmallTmpfs tmpfs(home);
  if (!tmpfs.mounted) return;
  Result big = run("log synth --session big --turns 2000 --output-bytes 2000");
  BOOST_TEST(big.code == 1, big.err);  // not 134: RocksDB's info log once aborted on a full disk
  BOOST_TEST(contains(big.err, "No space left on device"), big.err);
  BOOST_TEST(contains(big.err, "is full"), big.err);
  Result more = run("log synth --session more --turns 50");
  BOOST_TEST(more.code == 1, more.err);
  BOOST_TEST(contains(more.err, "is full"), more.err);
  BOOST_REQUIRE(::mount(nullptr, home.c_str(), nullptr, MS_REMOUNT, "size=64m,mode=0700") == 0);
  Result verify = run("verify --all");
  BOOST_TEST(verify.code == 0, verify.out << verify.err);
  Result after = run("log synth --session more --turns 50");
  BOOST_TEST(after.code == 0, after.err);
}

// A session that fills the disk: a clean error (it used to abort, exit 134,
// on an assertion RocksDB's info log tripped as the trace store closed),
// nothing committed lost, and a resume goes on once there is room.
BOOST_AUTO_TEST_CASE(a_session_that_fills_the_disk_stops_cleanly_and_resumes_later) {
  std::string home = dir.sub("home");
  SmallTmpfs tmpfs(home);
  if (!tmpfs.mounted) return;
  json replies = json::array();
  // Small replies (the scenario is stored with the session), large results.
  for (int i = 0; i < 600; ++i) {
    replies.push_back(
        {{"text", "step " + std::to_string(i)},
         {"tool_calls",
          {{{"name", "shell"}, {"args", {{"command", "head -c 6000 /dev/zero | tr '\\0' x"}}}}}}});
  }
  replies.push_back({{"text", "done"}});
  std::ofstream(dir.sub("long.json")) << json{{"replies", replies}}.dump();
  std::string ws = dir.sub("ws-full");
  std::filesystem::create_directories(ws);
  Result full =
      run("run go --session big --max-turns 1000 --scenario " + dir.sub("long.json") + " --workspace " + ws);
  BOOST_TEST(full.code == 1,
             full.code << ": " << full.err.substr(full.err.size() > 3000 ? full.err.size() - 3000 : 0));
  BOOST_TEST(contains(full.err, "No space left on device"), full.err.substr(0, 2000));
  BOOST_REQUIRE(::mount(nullptr, home.c_str(), nullptr, MS_REMOUNT, "size=256m,mode=0700") == 0);
  Result verify = run("verify big");
  BOOST_TEST(verify.code == 0, verify.out << verify.err);
  Result resumed = run("resume big");
  BOOST_TEST(resumed.code == 0, resumed.err.substr(0, 2000));
  BOOST_TEST(contains(resumed.out, "done"), resumed.out.substr(0, 500));
  BOOST_TEST(run("trace show big").code == 0);
}

BOOST_AUTO_TEST_CASE(a_home_is_created_owner_only_whatever_the_umask) {
  std::string home = dir.sub("home");
  std::string cmd = "umask 000; " + std::string(CARAPACE_BIN) + " --home '" + home +
                    "' log synth --session s --turns 1 >/dev/null 2>&1";
  BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
  for (const std::string& d : {home, home + "/log"}) {
    struct stat st;
    BOOST_REQUIRE(::stat(d.c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 0777) == 0700u, d);
  }
}

BOOST_AUTO_TEST_CASE(a_home_or_config_or_hook_program_others_can_write_is_refused) {
  BOOST_TEST(run("log synth --session s --turns 1").code == 0);
  std::string home = dir.sub("home");
  ::chmod(home.c_str(), 0777);
  Result open_home = run("sessions");
  BOOST_TEST(open_home.code == 1);
  BOOST_TEST(contains(open_home.err, "can be written by other users (mode 0777)"), open_home.err);
  BOOST_TEST(contains(open_home.err, "chmod 700 " + home), open_home.err);
  ::chmod(home.c_str(), 0700);
  BOOST_TEST(run("sessions").code == 0);

  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("scenario.json")) << R"({"replies": [{"text": "done"}]})";
  std::string hook = dir.sub("hook.sh");
  std::ofstream(hook) << "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n";
  ::chmod(hook.c_str(), 0755);
  std::ofstream(home + "/config.json")
      << R"({"hooks": [{"name": "h", "event": "AgentStart", "command": ")" << hook << R"("}]})";
  std::string args = "run hi --workspace " + ws + " --scenario " + dir.sub("scenario.json");
  Result fine = run(args);
  BOOST_TEST(fine.code == 0, fine.err);
  ::chmod((home + "/config.json").c_str(), 0666);
  Result planted = run(args);
  BOOST_TEST(planted.code == 1);
  BOOST_TEST(contains(planted.err, "config file " + home + "/config.json can be written by other users"), planted.err);
  ::chmod((home + "/config.json").c_str(), 0600);
  ::chmod(hook.c_str(), 0777);
  Result program = run(args);
  BOOST_TEST(program.code == 1);
  BOOST_TEST(contains(program.err, "hook program " + hook), program.err);
  BOOST_TEST(contains(program.err, "hook 'h'"), program.err);
}

// Root running carapace in a home another user owns (who could have planted
// its config): refused. Needs root to set the scene.
BOOST_AUTO_TEST_CASE(a_home_that_belongs_to_another_user_is_refused) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: needs root to give a home to another user");
    return;
  }
  BOOST_TEST(run("log synth --session s --turns 1").code == 0);
  std::string home = dir.sub("home");
  BOOST_REQUIRE(::chown(home.c_str(), 65534, 65534) == 0);
  Result r = run("sessions");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "belongs to"), r.err);
  BOOST_TEST(contains(r.err, "not to you"), r.err);
  BOOST_TEST(::chown(home.c_str(), 0, 0) == 0);
}

// A log the user may not read (root's, in a home the user owns): a clear
// error with the path and the reason, from every command; never an
// exception. Needs root to set the scene.
BOOST_AUTO_TEST_CASE(a_log_the_user_cannot_read_is_a_clear_error) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: needs root to set up another user's view");
    return;
  }
  BOOST_TEST(run("log synth --session s --turns 1").code == 0);
  std::string home = dir.sub("home");
  BOOST_REQUIRE(::chown(home.c_str(), 65534, 65534) == 0);
  BOOST_REQUIRE(::chmod(dir.sub("").c_str(), 0711) == 0);
  std::ofstream(dir.sub("scenario.json")) << R"({"replies": [{"text": "done"}]})";
  ::chmod(dir.sub("scenario.json").c_str(), 0644);
  std::vector<std::string> commands = {"sessions", "verify --all", "log show s",
                                       "run hi --workspace /tmp --scenario " + dir.sub("scenario.json")};
  for (const std::string& args : commands) {
    std::string err = dir.sub("nobody.err");
    std::string cmd = "setpriv --reuid=65534 --regid=65534 --clear-groups " + std::string(CARAPACE_BIN) +
                      " --home '" + home + "' " + args + " >/dev/null 2>'" + err + "'";
    int status = std::system(cmd.c_str());
    std::string said = slurp(err);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 1), args << ": " << said);
    BOOST_TEST(contains(said, home + "/log"), args << ": " << said);
    BOOST_TEST(contains(said, "Permission denied"), args << ": " << said);
    BOOST_TEST(!contains(said, "terminate"), args << ": " << said);
  }
}

BOOST_AUTO_TEST_CASE(run_prints_the_answer_and_logs_the_session) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::string scenario = std::string(PROJECT_DIR) + "/examples/scenarios/quickstart.json";
  Result r = run("run 'Summarize the workspace' --session q1 --scenario " + scenario + " --workspace " + ws);
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out == "I wrote notes/summary.txt (19 bytes) and checked its content with wc and cat.\n");
  BOOST_TEST(contains(r.err, "retrying in 0.3 s (429, attempt 2)"), r.err);
  BOOST_TEST(contains(r.err, "session q1 completed after 3 turns"));
  BOOST_TEST(contains(r.err, "its events: carapace --home " + dir.sub("home") + " log show q1"), r.err);
  BOOST_TEST(slurp(ws + "/notes/summary.txt") == "Carapace was here.\n");

  Result show = run("log show q1");
  BOOST_TEST(show.code == 0);
  BOOST_TEST(contains(show.out, "llm.failed"));
  BOOST_TEST(contains(show.out, "HTTP 429 (transient), retry in 300 ms"));
  BOOST_TEST(contains(show.out, "session.completed"));
  BOOST_TEST(run("verify q1").code == 0);

  std::filesystem::remove_all(ws + "/notes");
  json j = run_json("run 'again' --session q2 --scenario " + scenario + " --workspace " + ws);
  BOOST_TEST(j["success"] == true);
  BOOST_TEST(j["data"]["session"] == "q2");
  BOOST_TEST(j["data"]["turns"] == 3);
  BOOST_TEST(j["data"]["status"] == "completed");
  BOOST_TEST(j["data"]["tokens"]["input"].get<int>() > 0);
  BOOST_TEST(j["data"]["cost_usd"].get<double>() > 0);
}

BOOST_AUTO_TEST_CASE(run_reports_provider_failures_and_bad_input_clearly) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("401.json"))
      << R"({"replies": [{"error": {"status": 401, "message": "invalid api key"}}]})";
  Result denied = run("run 'x' --scenario " + dir.sub("401.json") + " --workspace " + ws);
  BOOST_TEST(denied.code == 1);
  BOOST_TEST(contains(denied.err, "HTTP 401: invalid api key"), denied.err);

  std::ofstream(dir.sub("bad.json")) << R"({"replies": [{"text": "a"}, {"tool_calls": [{"args": {}}]}]})";
  Result bad = run("run 'x' --scenario " + dir.sub("bad.json") + " --workspace " + ws);
  BOOST_TEST(bad.code == 1);
  BOOST_TEST(contains(bad.err, "bad.json: replies[1].tool_calls[0].name: must be a non-empty string"),
             bad.err);

  Result none = run("run 'x' --workspace " + ws);
  BOOST_TEST(none.code == 1);
  BOOST_TEST(contains(none.err, "--scenario FILE"));

  std::ofstream(dir.sub("config.json")) << R"({"retry": {"max_retries": -1}})";
  Result config = run("run 'x' --config " + dir.sub("config.json") + " --scenario " + dir.sub("401.json"));
  BOOST_TEST(config.code == 1);
  BOOST_TEST(contains(config.err, "retry.max_retries: must be a whole number from 0 to 100, got -1"),
             config.err);

  std::ofstream(dir.sub("typo.json")) << R"({"retyr": {}})";
  Result typo = run("run 'x' --config " + dir.sub("typo.json") + " --scenario " + dir.sub("401.json") +
                    " --workspace " + ws);
  BOOST_TEST(contains(typo.err, "warning: " + dir.sub("typo.json") + ": unknown key retyr (ignored)"),
             typo.err);

  Result workspace = run("run 'x' --scenario " + dir.sub("401.json") + " --workspace " + dir.sub("nope"));
  BOOST_TEST(workspace.code == 1);
  BOOST_TEST(contains(workspace.err, dir.sub("nope")));
}

BOOST_AUTO_TEST_CASE(chat_talks_resumes_and_forks) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("chat.json")) << R"({"replies": [{"text": "hello, human"}, {"text": "second answer"},
                                                           {"text": "answer in the fork"}, {"text": "after resume"}]})";
  std::string common = "--scenario " + dir.sub("chat.json") + " --workspace " + ws;
  Result first =
      run("chat --session c1 " + common, "hi there\n/sessions\nand again\n/fork 1\nin the fork\n/bogus\n/exit\n");
  BOOST_TEST(first.code == 0, first.err);
  BOOST_TEST(contains(first.out, "session c1\nagent> hello, human\n"), first.out);
  BOOST_TEST(contains(first.out, "* c1  completed, 1 turns"));
  BOOST_TEST(contains(first.out, "agent> second answer"));
  BOOST_TEST(contains(first.out, "forking c1 at turn 1: type the fork's first message"), first.out);
  BOOST_TEST(contains(first.out, "forked c1 at turn 1 as "));
  BOOST_TEST(contains(first.out, "! unknown command /bogus"));
  // The fork waited for its first message, and starts from it.
  const size_t named = first.out.find("forked c1 at turn 1 as ");
  BOOST_REQUIRE(named != std::string::npos);
  const std::string fork_id = first.out.substr(named + 23, first.out.find('\n', named) - named - 23);
  const json fork_events = run_json("log show " + fork_id)["data"]["events"];
  std::vector<std::string> said;
  for (const auto& e : fork_events) {
    if (e["type"] == "user.message") said.push_back(e["data"]["text"]);
  }
  BOOST_TEST((said == std::vector<std::string>{"hi there", "in the fork"}), fork_events.dump());
  Result help = run("chat " + common, "/help\n/resume\n/fork 2\n");
  BOOST_TEST(contains(help.out, "/resume <id>"));
  BOOST_TEST(contains(help.out, "! usage: /resume <id>"));
  BOOST_TEST(contains(help.out, "! no session yet"));
  Result again = run("chat " + common, "/resume c1\nstill there?\n/resume nobody\n");
  BOOST_TEST(contains(again.out, "resumed c1"), again.out);
  BOOST_TEST(contains(again.out, "agent> answer in the fork"));  // the scenario's next answer for c1
  BOOST_TEST(contains(again.out, "no session 'nobody'"));
  json sessions = run_json("sessions");
  BOOST_TEST(sessions["data"]["sessions"].size() == 2u);  // c1 and its fork

  // Both replay offline as they ran: several runs, a wake-up by /resume, a fork.
  Result replayed = run("replay c1");
  BOOST_TEST(replayed.code == 0, replayed.out << replayed.err);
  BOOST_TEST(contains(replayed.out, "identical: "), replayed.out);
  Result all = run("replay --all");
  BOOST_TEST(all.code == 0, all.out);
  BOOST_TEST(contains(all.out, "2 sessions: 2 identical, 0 diverged, 0 could not be replayed"), all.out);
  // A changed configuration: the first prompt differs, exit 1, named.
  std::ofstream(dir.sub("other.json")) << R"({"prompt": {"identity": "You are someone else."}})";
  Result diverged = run("replay c1 --config " + dir.sub("other.json"));
  BOOST_TEST(diverged.code == 1);
  BOOST_TEST(contains(diverged.out, "DIVERGED at seq 6 (turn 1): prompt.assembled differs in digest"), diverged.out);
  BOOST_TEST(contains(diverged.out, "  field digest\n"), diverged.out);
  json j = run_json("replay c1 --config " + dir.sub("other.json"), 1);
  BOOST_TEST(j["success"] == false);
  BOOST_TEST(j["data"]["divergence"]["seq"] == 6);
  BOOST_TEST(j["data"]["divergence"]["expected"]["type"] == "prompt.assembled");
  BOOST_TEST(run("replay c1 --until-turn 1").code == 0);
  Result nobody = run("replay nobody");
  BOOST_TEST(nobody.code == 1);
  BOOST_TEST(contains(nobody.err, "no session 'nobody'"), nobody.err);
  BOOST_TEST(run("replay").code == 2);
  BOOST_TEST(run("replay c1 --until-turn 0").code == 2);
  BOOST_TEST(run("replay c1 --all").code == 2);
}

BOOST_AUTO_TEST_CASE(a_session_remembers_how_it_was_run) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("s.json")) << R"({"replies": [
      {"text": "looking", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
      {"text": "first answer"}, {"text": "forked answer"}]})";
  std::ofstream(dir.sub("c.json")) << R"({"prompt": {"identity": "You are the recorded agent."}, "max_turns": 5})";
  Result r = run("run go --session r1 --scenario " + dir.sub("s.json") + " --config " + dir.sub("c.json") +
                 " --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  json events = run_json("log show r1");
  BOOST_TEST(events["data"]["events"][1]["type"] == "session.configured");
  BOOST_TEST(events["data"]["events"][1]["data"]["config"]["prompt"]["identity"] == "You are the recorded agent.");
  // The scenario and the config files are gone, and the home has another
  // config: fork and replay need only the session's id.
  std::filesystem::remove(dir.sub("s.json"));
  std::filesystem::remove(dir.sub("c.json"));
  std::ofstream(dir.sub("home") + "/config.json") << R"({"prompt": {"identity": "Someone else."}})";
  Result fork = run("fork r1 --at-turn 1 --session r2");
  BOOST_TEST(fork.code == 0, fork.err);
  BOOST_TEST(contains(fork.out, "first answer"), fork.out);  // the stored scenario answers it
  Result all = run("replay --all");
  BOOST_TEST(all.code == 0, all.out);
  BOOST_TEST(contains(all.out, "2 sessions: 2 identical"), all.out);
  // The home's config given again overrides the stored one.
  Result other = run("replay r1 --config " + dir.sub("home") + "/config.json");
  BOOST_TEST(other.code == 1);
  BOOST_TEST(contains(other.out, "prompt.assembled differs in digest"), other.out);
  // Replayed up to turn 1, then live from there: a new session forked at 1.
  Result live = run("replay r1 --live-after 1 --task 'and now?'");
  BOOST_TEST(live.code == 0, live.out << live.err);
  BOOST_TEST(contains(live.err, "identical: "), live.err);
  BOOST_TEST(contains(live.err, "live from turn 1 of r1 as "), live.err);
  json sessions = run_json("sessions");
  BOOST_TEST(sessions["data"]["sessions"].size() == 3u);
  BOOST_TEST(run("replay r1 --live-after 7").code == 1);  // past its end
  BOOST_TEST(run("replay --all --live-after 1").code == 2);
}

// The configurations a session ran with: one record per change, the latest
// used by the next resume or fork, and followed by a replay.
BOOST_AUTO_TEST_CASE(a_resume_or_fork_that_changes_the_configuration_records_it_and_replay_follows) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream s(dir.sub("s.json"));
  s << R"({"replies": [)";
  for (int i = 1; i <= 6; ++i) s << R"({"text": "step )" << i << R"(", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},)";
  s << R"({"text": "done"}]})";
  s.close();
  std::ofstream(dir.sub("c1.json")) << R"({"prompt": {"identity": "You are the first agent."}})";
  std::ofstream(dir.sub("c2.json")) << R"({"prompt": {"identity": "You are the second agent."}})";
  // Before the third turn of each run starts: where a run stands when it
  // crashes does not depend on how far its turns ran ahead of their syncs.
  std::ofstream(dir.sub("crash.json"))
      << R"({"faults": [{"point": "log.before_append", "event": "turn.started", "action": "crash", "nth": 3}]})";
  auto configured = [&](const std::string& id) {
    std::vector<json> records;
    json shown = run_json("log show " + id);
    for (const auto& e : shown["data"]["events"])
      if (e["type"] == "session.configured") records.push_back(e);
    return records;
  };
  Result r = run("run go --session z1 --scenario " + dir.sub("s.json") + " --config " + dir.sub("c1.json") +
                 " --workspace " + ws + " --faults " + dir.sub("crash.json"));
  BOOST_REQUIRE_MESSAGE(r.code == 137, r.code << r.err);
  // Resumed with another configuration (and crashed again): recorded after session.resumed.
  r = run("resume z1 --config " + dir.sub("c2.json") + " --faults " + dir.sub("crash.json"));
  BOOST_REQUIRE_MESSAGE(r.code == 137, r.code << r.err);
  auto records = configured("z1");
  BOOST_REQUIRE(records.size() == 2u);
  BOOST_TEST(records[0]["data"]["origin"] == "start");
  BOOST_TEST(records[1]["data"]["origin"] == "resume");
  BOOST_TEST(records[1]["data"]["config"]["prompt"]["identity"] == "You are the second agent.");
  // A bare resume runs as the latest record says: nothing changed, nothing recorded.
  std::filesystem::remove(dir.sub("c2.json"));
  r = run("resume z1");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  BOOST_TEST(contains(r.out, "done"), r.out);
  BOOST_TEST(configured("z1").size() == 2u);
  // The replay starts as the session started and changes where it changed.
  Result replayed = run("replay z1");
  BOOST_TEST(replayed.code == 0, replayed.out);
  BOOST_TEST(contains(replayed.out, "identical: "), replayed.out);
  Result first_only = run("replay z1 --config " + dir.sub("c1.json"));
  BOOST_TEST(first_only.code == 1, first_only.out);
  BOOST_TEST(contains(first_only.out, "prompt.assembled differs in digest"), first_only.out);
  // A fork from before the change runs as the session runs now, and says so.
  Result fork = run("fork z1 --at-turn 1 --session z2");
  BOOST_REQUIRE_MESSAGE(fork.code == 0, fork.err);
  auto forked = configured("z2");
  BOOST_REQUIRE(forked.size() == 2u);
  BOOST_TEST(forked[1]["data"]["origin"] == "fork");
  BOOST_TEST(forked[1]["data"]["config"]["prompt"]["identity"] == "You are the second agent.");
  // One from after it copies the record with its history, and needs no other.
  fork = run("fork z1 --at-turn 5 --session z3 --task 'one more'");
  BOOST_REQUIRE_MESSAGE(fork.code == 0, fork.err);
  BOOST_TEST(configured("z3").size() == 2u);
  // A fork given another scenario records it.
  std::ofstream(dir.sub("s2.json")) << R"({"replies": [{"text": "-"}, {"text": "-"}, {"text": "other ending"}]})";
  fork = run("fork z1 --at-turn 2 --session z4 --scenario " + dir.sub("s2.json"));
  BOOST_REQUIRE_MESSAGE(fork.code == 0, fork.err);
  BOOST_TEST(contains(fork.out, "other ending"), fork.out);
  BOOST_TEST(contains(configured("z4").back()["data"]["scenario"].get<std::string>(), "other ending"));
  // A finished session woken for a new message by a runtime configured otherwise.
  std::ofstream s3(dir.sub("s3.json"));
  s3 << R"({"replies": [)";
  for (int i = 1; i <= 7; ++i) s3 << R"({"text": "-"},)";
  s3 << R"({"text": "encore"}]})";
  s3.close();
  Result chat = run("chat --config " + dir.sub("c1.json") + " --scenario " + dir.sub("s3.json") + " --workspace " + ws,
                    "/resume z1\nonce more\n/exit\n");
  BOOST_TEST(chat.code == 0, chat.err);
  BOOST_TEST(contains(chat.out, "agent> encore"), chat.out);
  records = configured("z1");
  BOOST_REQUIRE(records.size() == 3u);
  BOOST_TEST(records[2]["data"]["config"]["prompt"]["identity"] == "You are the first agent.");
  Result all = run("replay --all");
  BOOST_TEST(all.code == 0, all.out);
  BOOST_TEST(contains(all.out, "4 sessions: 4 identical"), all.out);
}

BOOST_AUTO_TEST_CASE(log_show_masks_secrets_in_what_it_shows) {
  const std::string key = "sk-proj-Canary7Qw2Er4Ty6Ui8Op0As";
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("leak.json")) << R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "echo token=)" << key << R"("}}]},
      {"text": "The key is )" << key << R"(."}]})";
  Result r = run("run 'remember " + key + "' --session leak --scenario " + dir.sub("leak.json") +
                 " --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  Result shown = run("log show leak");
  BOOST_TEST(shown.code == 0, shown.err);
  BOOST_TEST(!contains(shown.out, key), shown.out);
  BOOST_TEST(contains(shown.out, "sk-" + std::string(Redactor::kMarker) + "0As"), shown.out);
  json j = run_json("log show leak");
  BOOST_TEST(!contains(j.dump(), key));
  BOOST_TEST(contains(j.dump(), "token=sk-"));
  // Our own digests are not taken for secrets.
  bool hashed = false;
  for (const auto& e : j["data"]["events"]) {
    if (e["type"] == "turn.committed") hashed = e["data"]["state_hash"].get<std::string>().size() == 32;
  }
  BOOST_TEST(hashed);
  // Every trace command masks it too: the skeleton, each span with its attributes, the
  // patterns, the stats, the diff and the tail, in both forms.
  json trace = run_json("trace show leak");
  BOOST_TEST(!contains(trace.dump(), key));
  BOOST_REQUIRE(trace["data"]["spans"].size() > 3u);
  std::vector<std::string> outputs = {run("trace show leak --full").out, run("trace analyze leak").out,
                                      run("trace stats leak").out, run("trace diff leak leak").out,
                                      run("trace tail leak --exit-when-done").out,
                                      run("trace tail leak --exit-when-done --json").out};
  for (const auto& sp : trace["data"]["spans"]) {
    std::string span_id = sp["span_id"].get<std::string>();
    outputs.push_back(run("trace span leak " + span_id).out);
    outputs.push_back(run("trace span leak " + span_id + " --raw").out);
    outputs.push_back(run("trace span leak " + span_id + " --json").out);
  }
  for (const auto& out : outputs) BOOST_TEST(!contains(out, key), out);
  BOOST_TEST(contains(run("trace show leak --full").out + run("trace span leak " +
                      trace["data"]["spans"][0]["span_id"].get<std::string>()).out, "leak"));
  // So does every other --json answer: a run's final answer, a replay, the session index.
  Result as_json = run("run 'again " + key + "' --session leak2 --json --scenario " + dir.sub("leak.json") +
                       " --workspace " + ws);
  BOOST_TEST(as_json.code == 0, as_json.err);
  BOOST_TEST(contains(as_json.out, "The key is sk-"), as_json.out);
  for (const std::string command : {"run x --session leak2", "replay leak", "sessions", "verify leak"}) {
    Result r2 = run(command + " --json");
    BOOST_TEST(!contains(r2.out + r2.err, key), command << ": " << r2.out);
  }
  BOOST_TEST(!contains(as_json.out, key));
  // The log itself keeps what the model saw.
  BOOST_TEST(run("replay leak").code == 0);
}

// The home config's own patterns and path replacements join the built-in
// ones, in every output and in the log files.
BOOST_AUTO_TEST_CASE(redaction_rules_from_the_home_config_apply_everywhere) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("orders.json")) << R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "echo order ORDER-482913 in $PWD"}}]},
      {"text": "Found ORDER-482913."}]})";
  BOOST_REQUIRE(run("run warm-up --session w0 --scenario " + dir.sub("orders.json") + " --workspace " + ws).code == 0);
  std::ofstream(dir.sub("home") + "/config.json")
      << R"({"redaction": {"patterns": ["ORDER-[0-9]{6}"], "paths": {")" << ws << R"(": "<ws>"}}})";
  Result r = run("run 'find the order' --session o1 --scenario " + dir.sub("orders.json") + " --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<std::string> outputs = {run("log show o1").out, run("log show o1 --json").out,
                                      run("trace show o1 --full").out, run("trace analyze o1").out,
                                      run("run 'again' --session o1 --json").out, run("sessions --json").out};
  // The log lines written since the rules were configured (the warm-up run,
  // which made the home, logged before them).
  std::string logs;
  for (const auto& e : std::filesystem::directory_iterator(dir.sub("home") + "/logs")) {
    std::istringstream lines(slurp(e.path().string()));
    for (std::string line; std::getline(lines, line);) {
      if (!contains(line, "session w0")) logs += line + "\n";
    }
  }
  BOOST_TEST(contains(logs, "session o1: session.completed"), logs);
  outputs.push_back(logs);
  for (const auto& out : outputs) {
    BOOST_TEST(!contains(out, "ORDER-482913"), out);
    BOOST_TEST(!contains(out, ws), out);
  }
  BOOST_TEST(contains(run("log show o1 --json").out, "order OR"), "the rest of the line stays");
  BOOST_TEST(contains(run("log show o1 --json").out, "<ws>"));
  // A pattern that is not a regular expression is named.
  std::ofstream(dir.sub("home") + "/config.json") << R"({"redaction": {"patterns": ["ORDER-[0-9"]}})";
  Result bad = run("run x --session o2 --scenario " + dir.sub("orders.json") + " --workspace " + ws);
  BOOST_TEST(bad.code == 1);
  BOOST_TEST(contains(bad.err, "redaction.patterns"), bad.err);
  BOOST_TEST(contains(bad.err, "is not a valid regular expression"), bad.err);
  Result shown = run("log show o1");  // a command that needs no config warns and goes on
  BOOST_TEST(shown.code == 0, shown.err);
  BOOST_TEST(contains(shown.err, "only the built-in redaction rules apply"), shown.err);
}

BOOST_AUTO_TEST_CASE(log_lines_go_to_the_home_and_with_v_to_stderr_masked) {
  const std::string key = "sk-proj-Canary7Qw2Er4Ty6Ui8Op0As";
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::string scenario = std::string(PROJECT_DIR) + "/examples/scenarios/quickstart.json";
  BOOST_REQUIRE(run("log synth --session first --turns 1").code == 0);  // the home exists
  Result quiet = run("run 'remember " + key + "' --session q1 --scenario " + scenario + " --workspace " + ws);
  BOOST_TEST(quiet.code == 0, quiet.err);
  BOOST_TEST(!contains(quiet.err, "turn.committed"), quiet.err);  // warn and above by default
  Result verbose = run("-vv run 'remember " + key + "' --session q2 --scenario " + scenario + " --workspace " + ws);
  BOOST_TEST(verbose.code == 0, verbose.err);
  BOOST_TEST(contains(verbose.err, "session q2: turn.committed turn 1"), verbose.err);
  BOOST_TEST(contains(verbose.err, "session q2: llm.failed turn 2 attempt 1: HTTP 429"), verbose.err);
  BOOST_TEST(contains(verbose.err, "session q2: user.message"), verbose.err);  // -vv: debug, every event
  BOOST_TEST(!contains(verbose.err, key));
  std::string files;
  for (const auto& f : std::filesystem::directory_iterator(dir.sub("home") + "/logs")) files += slurp(f.path());
  BOOST_TEST(contains(files, "session q1: session.started"), files);
  BOOST_TEST(contains(files, "session q2: session.completed"), files);
  BOOST_TEST(!contains(files, key));
  BOOST_TEST(run("--log-level loud sessions").code == 2);
}

// The first command on a new home creates it: it logs into it too (its
// session was never logged before).
BOOST_AUTO_TEST_CASE(the_command_that_creates_the_home_logs_into_it) {
  std::string ws = dir.sub("ws-first");
  std::filesystem::create_directories(ws);
  const std::string home = dir.sub("new-home");
  BOOST_REQUIRE(!std::filesystem::exists(home));
  Result r = run_in(home, "run go --session first1 --scenario " + std::string(PROJECT_DIR) +
                              "/examples/scenarios/quickstart.json --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  std::string files;
  BOOST_REQUIRE(std::filesystem::is_directory(home + "/logs"));
  for (const auto& f : std::filesystem::directory_iterator(home + "/logs")) files += slurp(f.path());
  BOOST_TEST(contains(files, "session first1: session.started"), files);
  BOOST_TEST(contains(files, "session first1: session.completed"), files);
}

// `run --then`: the follow-up is recorded with the task, before the first
// turn, so a crash before it is sent loses nothing (it used to be sent only
// once the first run had completed: a crash before that lost it). The
// resume sends it when its turn comes, and the whole replays.
BOOST_AUTO_TEST_CASE(a_follow_up_survives_a_crash_before_it_is_sent) {
  std::string ws = dir.sub("ws-then");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("then.json")) << R"({"replies": [
      {"text": "Looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
      {"text": "First answer."},
      {"text": "Verbose is on."},
      {"text": "One more done."}]})";
  std::ofstream(dir.sub("crash.json"))
      << R"({"faults": [{"point": "tool.after_exec", "action": "crash", "nth": 1}]})";
  Result crashed = run("run go --session then1 --scenario " + dir.sub("then.json") + " --workspace " + ws +
                       " --then 'Now turn verbose on too.' --faults " + dir.sub("crash.json"));
  BOOST_TEST(crashed.code != 0, crashed.err);
  auto follow_ups = [&](const char* flag) {
    size_t n = 0;
    const json shown = run_json("log show then1 --type user.message");
    for (const auto& e : shown["data"]["events"]) {
      if (e["data"].value(flag, false) && e["data"]["text"] == "Now turn verbose on too.") ++n;
    }
    return n;
  };
  BOOST_TEST(follow_ups("follow_up") == 1u);
  BOOST_TEST(follow_ups("from_follow_ups") == 0u);
  Result resumed = run("resume then1");
  BOOST_TEST(resumed.code == 0, resumed.err);
  BOOST_TEST(contains(resumed.out, "Verbose is on."), resumed.out);
  BOOST_TEST(follow_ups("follow_up") == 1u);
  BOOST_TEST(follow_ups("from_follow_ups") == 1u);
  const json listed = run_json("sessions");
  for (const auto& row : listed["data"]["sessions"]) {
    if (row["id"] == "then1") BOOST_TEST(row["status"] == "completed", row.dump());
  }
  Result replayed = run("replay then1");
  BOOST_TEST(replayed.code == 0, replayed.out << replayed.err);
  // A resume's own --then is recorded before it goes on, and sent after.
  Result more = run("resume then1 --then 'And one more.'");
  BOOST_TEST(more.code == 0, more.err);
  BOOST_TEST(contains(more.out, "One more done."), more.out);
  // The task, the follow-up recorded and sent, the resume's recorded and sent.
  BOOST_TEST(run_json("log show then1 --type user.message")["data"]["events"].size() == 5u);
}

// A reader that goes away early (`carapace run ... 2>&1 | head -2`) used to
// kill the session with SIGPIPE (exit 141, then listed as crashed): it runs
// to its end.
BOOST_AUTO_TEST_CASE(a_closed_pipe_does_not_kill_the_session) {
  std::string ws = dir.sub("ws-pipe");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("slow.json")) << R"({"replies": [
      {"text": "Looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}], "latency_ms": 300},
      {"text": "Still looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}], "latency_ms": 300},
      {"text": "Done.", "latency_ms": 300}]})";
  for (const std::string verbosity : {"", "-vv "}) {
    const std::string id = verbosity.empty() ? "pipe1" : "pipe2";
    std::string cmd = "bash -c \"'" + std::string(CARAPACE_BIN) + "' --home '" + dir.sub("home") + "' " +
                      verbosity + "run go --session " + id + " --scenario '" + dir.sub("slow.json") +
                      "' --workspace '" + ws + "' 2>&1 | head -2 >/dev/null; echo \\${PIPESTATUS[0]} >'" +
                      dir.sub("rc") + "'\"";
    BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
    BOOST_TEST(slurp(dir.sub("rc")) == "0\n", id << ": exit " << slurp(dir.sub("rc")));
    json events = run_json("log show " + id)["data"]["events"];
    bool completed = false;
    for (const auto& e : events) completed = completed || e["type"] == "session.completed";
    BOOST_TEST(completed, id << ": " << events.dump());
    const json listed = run_json("sessions");
    for (const auto& row : listed["data"]["sessions"]) {
      if (row["id"] == id) BOOST_TEST(row["status"] == "completed", row.dump());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_bundle_replays_and_imports_on_a_fresh_home_and_refuses_damage) {
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  Result r = run("run go --session b1 --scenario " + std::string(PROJECT_DIR) +
                 "/examples/scenarios/quickstart.json --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  std::string file = dir.sub("b1.bundle");
  Result written = run("bundle b1 -o " + file);
  BOOST_TEST(written.code == 0, written.err);
  BOOST_TEST(contains(written.out, "wrote 28 events of b1"), written.out);
  // Another machine: a home with nothing in it, no scenario file.
  std::string fresh = dir.sub("fresh");
  Result replayed = run_in(fresh, "replay " + file);
  BOOST_TEST(replayed.code == 0, replayed.out << replayed.err);
  BOOST_TEST(contains(replayed.out, "identical: 28 events, 3 turns"), replayed.out);
  BOOST_TEST(!std::filesystem::exists(fresh + "/log"));  // a bundle replays without touching the home
  Result imported = run_in(fresh, "bundle import " + file);
  BOOST_TEST(imported.code == 0, imported.err);
  BOOST_TEST(run_in(fresh, "verify b1").code == 0);
  BOOST_TEST(run_in(fresh, "replay b1").code == 0);
  Result forked = run_in(fresh, "fork b1 --at-turn 1 --session b2 --trust-bundle-config");  // its stored scenario
  BOOST_TEST(forked.code == 0, forked.err);
  Result again = run_in(fresh, "bundle import " + file);
  BOOST_TEST(again.code == 1);
  BOOST_TEST(contains(again.err, "already exists"), again.err);
  BOOST_TEST(run_in(fresh, "bundle import " + file + " --as b3").code == 0);
  // Damage is refused, naming it.
  std::string text = slurp(file);
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir.sub(name)) << content;
    return dir.sub(name);
  };
  size_t last_line = text.rfind('\n', text.size() - 2);
  Result cut = run_in(fresh, "replay " + write("cut.bundle", text.substr(0, last_line + 1)));
  BOOST_TEST(cut.code == 1);
  BOOST_TEST(contains(cut.err, "is truncated"), cut.err);
  Result torn = run_in(fresh, "replay " + write("torn.bundle", text.substr(0, text.size() / 2)));
  BOOST_TEST(torn.code == 1);
  BOOST_TEST(contains(torn.err, "it was not used"), torn.err);
  std::string edited = text;
  size_t at = edited.find("\"payload\":\"", edited.find('\n')) + 20;
  edited[at] = edited[at] == '0' ? '1' : '0';
  Result changed = run_in(fresh, "bundle import " + write("edited.bundle", edited) + " --as b4");
  BOOST_TEST(changed.code == 1);
  BOOST_TEST(contains(changed.err, "digest mismatch"), changed.err);
  std::string future = text;
  future.replace(future.find("\"version\":1"), 11, "\"version\":9");
  Result newer = run_in(fresh, "replay " + write("future.bundle", future));
  BOOST_TEST(newer.code == 1);
  BOOST_TEST(contains(newer.err, "version 9"), newer.err);
  BOOST_TEST(run("bundle b1").code == 2);  // no -o
  BOOST_TEST(run("bundle nobody -o " + dir.sub("x.bundle")).code == 1);
}

BOOST_AUTO_TEST_CASE(replay_reenacts_crashes_and_resumes_in_both_modes) {
  std::string homes = dir.sub("torture");
  Result t = run("torture " + std::string(PROJECT_DIR) + "/examples/scenarios/torture.json --iterations 6 --seed 5 " +
                 "--mode both --random-moments 0 --resume-crash-probability 0.5 --dir " + homes + " --keep");
  BOOST_REQUIRE_MESSAGE(t.code == 0, t.out << t.err);
  int iterations = 0, resumes = 0;
  for (const auto& e : std::filesystem::directory_iterator(homes)) {
    if (!std::filesystem::exists(e.path() / "log") || e.path().filename() == "reference") continue;
    ++iterations;
    std::string home = e.path().string();
    Result r = run_in(home, "replay --all");  // with the configuration stored with the session
    BOOST_TEST(r.code == 0, home << ": " << r.out << r.err);
    BOOST_TEST(contains(r.out, "1 session: 1 identical"), r.out);
    if (contains(r.out, "re-enacted")) ++resumes;
  }
  BOOST_TEST(iterations == 6);
  BOOST_TEST(resumes == 6);  // every crash is at a fault point: every iteration resumed
}

// A provider key in carapace's environment: a model that runs `env` through
// the shell tool sees no key, nor does one that reads the runtime's (or its
// guard's) environment in /proc; and neither do the output and the log.
BOOST_AUTO_TEST_CASE(provider_keys_and_secrets_stay_out_of_tool_output_and_the_log) {
  const std::string canary = "sk-canary-4b1d9e7a0c2f";
  std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("env.json")) << R"({"replies": [
      {"text": "Looking.", "tool_calls": [{"name": "shell", "args": {"command": "env; echo keys:$OPENAI_API_KEY:$DEPLOY_TOKEN; rt=$(awk '/^PPid/ {print $2}' /proc/$PPID/status); echo runtime:$rt; tr '\\0' '\\n' < /proc/$PPID/environ; tr '\\0' '\\n' < /proc/$rt/environ"}}]},
      {"text": "done"}]})";
  ::setenv("OPENAI_API_KEY", canary.c_str(), 1);
  ::setenv("DEPLOY_TOKEN", (canary + "-deploy").c_str(), 1);
  ::setenv("CARAPACE_TEST_PLAIN", "visible", 1);
  Result r = run("run go --session envs --workspace " + ws + " --scenario " + dir.sub("env.json"));
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("DEPLOY_TOKEN");
  ::unsetenv("CARAPACE_TEST_PLAIN");
  BOOST_TEST(r.code == 0, r.err);
  json log = run_json("log show envs --type tool.completed");
  std::string text = log.dump();
  BOOST_TEST(contains(text, "CARAPACE_TEST_PLAIN=visible"), text);  // the command did run `env`
  BOOST_TEST(contains(text, "keys::"), text);
  BOOST_TEST(contains(text, "runtime:"), text);  // it looked for the runtime's environment in /proc
  BOOST_TEST(!contains(text, canary), text);
  BOOST_TEST(!contains(r.out + r.err, canary));
  // Nor anywhere on disk under the home (log files, WAL, bodies).
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.sub("home"))) {
    if (entry.is_regular_file()) BOOST_TEST(!contains(slurp(entry.path().string()), canary), entry.path());
  }
}

// `carapace run` whose session is in the middle of a shell call that started
// a detached process: stopped by `sig`, or killed. Returns the wait status of
// carapace; afterwards nothing the call started may be running, and the
// call's side effect must never land.
int stop_a_run_mid_call(CliFixture& fx, int sig, const std::string& marker, pid_t* run_pid = nullptr) {
  const std::string ws = fx.dir.sub("ws-" + marker);
  std::filesystem::create_directories(ws);
  const std::string scenario = fx.dir.sub("stop-" + marker + ".json");
  std::ofstream(scenario) << R"({"replies": [
      {"text": "Working.", "tool_calls": [{"name": "shell", "args": {"command": "setsid sleep 2)" << marker
                          << R"( & nohup sleep 3)" << marker << R"( >/dev/null 2>&1 & sleep 1)" << marker
                          << R"(; echo finished > f", "timeout_ms": 600000}}]},
      {"text": "done"}]})";
  pid_t pid = spawn_child_process(CARAPACE_BIN,
                                  {"--home", fx.dir.sub("home"), "run", "go", "--session", "stop-" + marker,
                                   "--workspace", ws, "--scenario", scenario},
                                  fx.dir.sub("stop-" + marker + ".log"));
  BOOST_REQUIRE(pid > 0);
  if (run_pid) *run_pid = pid;
  const std::vector<std::vector<std::string>> sleeps = {
      {"sleep", "1" + marker}, {"sleep", "2" + marker}, {"sleep", "3" + marker}};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto all_running = [&] {
    for (const auto& argv : sleeps) {
      if (testing::find_processes(argv).empty()) return false;
    }
    return true;
  };
  while (!all_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_REQUIRE_MESSAGE(all_running(), slurp(fx.dir.sub("stop-" + marker + ".log")));
  ::kill(pid, sig);
  int status = -1;
  bool ended = wait_child_process(pid, 10000, &status);
  BOOST_TEST(ended);
  if (!ended) {  // leave nothing behind a failed test
    ::kill(pid, SIGKILL);
    wait_child_process(pid, 10000, &status);
  }
  BOOST_TEST(testing::survivors(sleeps) == 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(!std::filesystem::exists(ws + "/f"));
  return status;
}

BOOST_AUTO_TEST_CASE(sigterm_stops_a_run_and_kills_its_tools) {
  pid_t run_pid = 0;
  int status = stop_a_run_mid_call(*this, SIGTERM, "031", &run_pid);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM), status);
  std::string log = slurp(dir.sub("stop-031.log"));
  BOOST_TEST(contains(log, "carapace: SIGTERM: stopping session stop-031 and killing its tool processes"), log);
  // The log tells the truth: the call was requested and never completed.
  json j = run_json("log show stop-031");
  std::string events = j.dump();
  BOOST_TEST(contains(events, "tool.requested"));
  BOOST_TEST(!contains(events, "tool.completed"));
  // ... and records the stop, last: the session was stopped, not crashed.
  const json& last = j["data"]["events"].back();
  BOOST_TEST(last["type"] == "session.stopped", last.dump());
  BOOST_TEST(last["data"]["reason"] == "SIGTERM", last.dump());
  BOOST_TEST(last["data"]["pid"] == run_pid, last.dump());
  Result shown = run("trace show stop-031");
  BOOST_TEST(contains(shown.out, "STOPPED (SIGTERM), resumable"), shown.out);
  json listed = run_json("sessions");
  BOOST_REQUIRE(!listed["data"]["sessions"].empty());
  for (const auto& row : listed["data"]["sessions"])
    if (row["id"] == "stop-031") BOOST_TEST(row["status"] == "stopped", row.dump());
  BOOST_TEST(!contains(shown.out, "CRASHED"), shown.out);
  BOOST_TEST(run("verify stop-031").code == 0);
  // Resumed, the model hears that the call was interrupted, not that it ran.
  Result resumed = run("resume stop-031 --scenario " + dir.sub("stop-031.json"));
  BOOST_TEST(resumed.code == 0, resumed.err);
  std::string after = run_json("log show stop-031 --type tool.completed").dump();
  BOOST_TEST(contains(after, "This call was interrupted"), after);
  // The stopped and resumed run replays offline as it ran.
  Result replayed = run("replay stop-031");
  BOOST_TEST(replayed.code == 0, replayed.out + replayed.err);
  BOOST_TEST(contains(replayed.out, "identical: "), replayed.out);
  json spans = run_json("trace show stop-031");
  bool resumed_after_stop = false;
  for (const auto& sp : spans["data"]["spans"]) {
    if (sp["kind"] == "resume") resumed_after_stop = sp["attrs"].value("after_stop", false) && !sp["attrs"]["after_crash"];
  }
  BOOST_TEST(resumed_after_stop, spans.dump());
  BOOST_TEST(spans["data"]["spans"][0]["status"] == "completed");
  BOOST_TEST(testing::survivors({{"sleep", "1031"}, {"sleep", "2031"}, {"sleep", "3031"}}) == 0u);
}

BOOST_AUTO_TEST_CASE(sigint_stops_a_run_and_kills_its_tools) {
  int status = stop_a_run_mid_call(*this, SIGINT, "032");
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT), status);
  const json last = run_json("log show stop-032")["data"]["events"].back();
  BOOST_TEST(last["type"] == "session.stopped", last.dump());
  BOOST_TEST(last["data"]["reason"] == "SIGINT", last.dump());
  // Down for a while, then resumed: the call the stop cut short is shown as
  // stopped, never as a crash, and ends at the stop, not at the resume.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Result resumed = run("resume stop-032 --scenario " + dir.sub("stop-032.json"));
  BOOST_TEST(resumed.code == 0, resumed.err);
  Result shown = run("trace show stop-032");
  BOOST_TEST(contains(shown.out, "STOPPED (SIGINT), outcome unknown"), shown.out);
  BOOST_TEST(!contains(shown.out, "crash"), shown.out);
  BOOST_TEST(!contains(shown.out, "CRASH"), shown.out);
  Result logged = run("log show stop-032");
  BOOST_TEST(!contains(logged.out, "crash"), logged.out);
  const json* tool = nullptr;
  json spans = run_json("trace show stop-032");
  for (const auto& sp : spans["data"]["spans"]) {
    if (sp["kind"] == "tool") tool = &sp;
  }
  BOOST_REQUIRE(tool != nullptr);
  BOOST_TEST((*tool)["status"] == "stopped", tool->dump());
  BOOST_TEST((*tool)["attrs"]["interrupted_by"] == "stop", tool->dump());
  BOOST_TEST((*tool)["attrs"]["stop_reason"] == "SIGINT", tool->dump());
  int64_t took_us = (*tool)["end_us"].get<int64_t>() - (*tool)["start_us"].get<int64_t>();
  BOOST_TEST(took_us < 1'400'000, took_us << " us: the time the session was down counted");
  Result replayed = run("replay stop-032");
  BOOST_TEST(replayed.code == 0, replayed.out + replayed.err);
}

// Whether the file at `path` holds `text` within 10 s.
bool wait_for_text(const std::string& path, const std::string& text) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!contains(slurp(path), text)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// chat stops a turn on SIGINT as run does (the stop recorded, the tools
// killed) and goes on reading; at the end of its input it leaves with 0.
BOOST_AUTO_TEST_CASE(sigint_stops_a_chat_turn_as_run_does) {
  const std::string ws = dir.sub("ws-chat");
  std::filesystem::create_directories(ws);
  std::ofstream(dir.sub("chat-stop.json")) << R"({"replies": [
      {"text": "Working.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 1035", "timeout_ms": 600000}}]},
      {"text": "done"}]})";
  const std::string fifo = dir.sub("chat-in");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The shell opens the pipe as chat's stdin and becomes chat (exec): its pid is chat's.
  pid_t pid = spawn_child_process("/bin/sh",
                                  {"-c", "exec '" + std::string(CARAPACE_BIN) + "' --home '" + dir.sub("home") +
                                             "' chat --session chat-stop --workspace '" + ws + "' --scenario '" +
                                             dir.sub("chat-stop.json") + "' < '" + fifo + "'"},
                                  dir.sub("chat-stop.log"));
  BOOST_REQUIRE(pid > 0);
  std::ofstream in(fifo);  // stays open: chat waits for more, as at a terminal
  in << "go\n" << std::flush;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (testing::find_processes({"sleep", "1035"}).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_REQUIRE_MESSAGE(!testing::find_processes({"sleep", "1035"}).empty(), slurp(dir.sub("chat-stop.log")));
  ::kill(pid, SIGINT);
  BOOST_TEST(wait_for_text(dir.sub("chat-stop.log"), "stopped turn 1 of chat-stop"), slurp(dir.sub("chat-stop.log")));
  BOOST_TEST(testing::survivors({{"sleep", "1035"}}) == 0u);
  BOOST_TEST(::kill(pid, 0) == 0);  // still reading
  const json last = run_json("log show chat-stop")["data"]["events"].back();
  BOOST_TEST(last["type"] == "session.stopped", last.dump());
  BOOST_TEST(last["data"]["reason"] == "SIGINT", last.dump());
  in.close();  // the end of its input
  int status = -1;
  bool ended = wait_child_process(pid, 10000, &status);
  BOOST_TEST(ended);
  if (!ended) {
    ::kill(pid, SIGKILL);
    wait_child_process(pid, 10000, &status);
  }
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), status);
  BOOST_TEST(contains(slurp(dir.sub("chat-stop.log")), "bye: the session stays in the log"));
}

// No handler runs: the guards' parent-death signal does the killing.
BOOST_AUTO_TEST_CASE(sigkill_of_a_run_kills_its_tools_through_the_parent_death_signal) {
  int status = stop_a_run_mid_call(*this, SIGKILL, "033");
  BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL), status);
  // A crash records nothing: it is taken for one.
  BOOST_TEST(run_json("log show stop-033")["data"]["events"].back()["type"] == "tool.requested");
  Result shown = run("trace show stop-033");
  BOOST_TEST(!contains(shown.out, "STOPPED"), shown.out);
  // With no process holding the home, the list says so.
  bool listed = false;
  const json sessions = run_json("sessions");
  for (const auto& row : sessions["data"]["sessions"]) {
    if (row["id"] != "stop-033") continue;
    listed = true;
    BOOST_TEST(row["status"] == "crashed", row.dump());
  }
  BOOST_TEST(listed, sessions.dump());
}

BOOST_AUTO_TEST_SUITE_END()

// ---- the HTTP providers from the command line --------------------------------

namespace {

const std::string kOpenAiKey = "sk-proj-cli0canary0Zx81Qw7Er4Ty2Ui9Op3As6Df";
const std::string kAnthropicKey = "sk-ant-api03-cli0canary0Lk5Jh8Gf1Ds4Az7Xc";

// The environment of this process without the providers' variables, plus `set`.
std::vector<std::string> clean_env(const std::vector<std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string v = *e;
    bool provider_var = false;
    for (const char* name : {"OPENAI_", "ANTHROPIC_", "CARAPACE_HOME="}) {
      if (v.rfind(name, 0) == 0) provider_var = true;
    }
    if (!provider_var) env.push_back(v);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

struct ProviderCliFixture : CliFixture {
  testing::MockLlmServer server;
  std::string ws = dir.sub("ws");

  ProviderCliFixture() { std::filesystem::create_directories(ws); }

  void play(const std::string& format) {
    server.set_handler([format](const testing::MockRequest& r, size_t) {
      return testing::FakeModel{.format = format}.reply(r);
    });
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cli_providers, ProviderCliFixture)

// libcurl (26 shared libraries with its own) is opened by the first request,
// not at every start (base/curl_lib.h): the loader's own account says which.
BOOST_AUTO_TEST_CASE(libcurl_is_loaded_only_by_a_command_that_speaks_http) {
  BOOST_REQUIRE(run("log synth --session quiet --turns 1").code == 0);
  for (const char* quiet : {"--help", "sessions", "log show quiet"}) {
    Result r = run_env({"LD_DEBUG=libs"}, quiet);
    BOOST_TEST(r.code == 0, r.err);
    BOOST_TEST(contains(r.err, "libstdc++"), quiet);  // the loader did report
    BOOST_TEST(!contains(r.err, "libcurl"), quiet);
  }
  play("openai");
  Result r = run_env({"LD_DEBUG=libs", "OPENAI_API_KEY=" + kOpenAiKey, "OPENAI_BASE_URL=" + server.url() + "/v1"},
                     "run 'remember pears' --provider openai --model gpt-4o-mini --session curl1 --workspace " + ws);
  BOOST_TEST(r.code == 0, r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0));
  BOOST_TEST(contains(r.err, "libcurl.so.4"));
  BOOST_TEST(server.requests().size() == 3u);
}

BOOST_AUTO_TEST_CASE(run_with_openai_needs_only_the_key) {
  play("openai");
  // $OPENAI_BASE_URL points the provider at the server (a compatible one).
  Result r =
      run_env({"OPENAI_API_KEY=" + kOpenAiKey, "OPENAI_BASE_URL=" + server.url() + "/v1"},
              "run 'remember apples' --provider openai --model gpt-4o-mini --session o1 --workspace " + ws);
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out == "Done: remember apples\n");  // not a terminal: the answer once, at the end
  BOOST_TEST(contains(r.err, "session o1 completed after 3 turns"), r.err);
  BOOST_TEST(slurp(ws + "/note.txt") == "remember apples");
  auto requests = server.requests();
  BOOST_REQUIRE(requests.size() == 3u);
  for (const auto& q : requests) {
    BOOST_TEST(q.path == "/v1/chat/completions");
    BOOST_TEST(q.header("Authorization") == "Bearer " + kOpenAiKey);
    BOOST_TEST(json::parse(q.body)["model"] == "gpt-4o-mini");
  }
  // The bodies: each request as the server got it, each response as it was sent.
  Result show = run("log show o1 --bodies");
  BOOST_TEST(show.code == 0, show.err);
  BOOST_TEST(contains(show.out, "        | " + requests[0].body + "\n"), show.out);
  BOOST_TEST(contains(show.out, "        | data: [DONE]\n"));
  json j = run_json("log show o1 --bodies --type llm.requested");
  BOOST_REQUIRE(j["data"]["events"].size() == 3u);
  for (size_t i = 0; i < 3; ++i) BOOST_TEST(j["data"]["events"][i]["body"] == requests[i].body);
  for (const Result* x : {&r, &show}) {
    BOOST_TEST(!contains(x->out + x->err, kOpenAiKey));
  }
  BOOST_TEST(!contains(j.dump(), kOpenAiKey));
  // A body reference reads the same in `log show --json` and `trace show --json`, not taken for a secret.
  const json shown_spans = run_json("trace show o1");
  size_t referenced = 0;
  for (size_t i = 0; i < 3; ++i) {
    const std::string ref = j["data"]["events"][i]["data"]["body_ref"];
    BOOST_TEST(ref.size() >= 32u, ref);
    for (const auto& sp : shown_spans["data"]["spans"]) referenced += sp["attrs"].value("request_body", "") == ref;
  }
  BOOST_TEST(referenced == 3u, shown_spans.dump());
  // Without --bodies, no body.
  BOOST_TEST(!contains(run("log show o1").out, "data: [DONE]"));
  // It replays offline, answered from its log: no request is made.
  Result replayed = run("replay o1");
  BOOST_TEST(replayed.code == 0, replayed.out << replayed.err);
  BOOST_TEST(contains(replayed.out, "identical: "), replayed.out);
  BOOST_TEST(server.request_count() == 3u);
  // --base-url wins over the environment.
  Result flag = run_env({"OPENAI_API_KEY=" + kOpenAiKey, "OPENAI_BASE_URL=http://127.0.0.1:1/v1"},
                        "run 'remember pears' --provider openai --model gpt-4o-mini --workspace " + ws +
                            " --base-url " + server.url() + "/v1");
  BOOST_TEST(flag.code == 0, flag.err);
  BOOST_TEST(flag.out == "Done: remember pears\n");
}

// carapace gc: bodies go oldest first down to the size limit, spans of old
// sessions go (and are built from the log again), events stay.
BOOST_AUTO_TEST_CASE(gc_prunes_bodies_oldest_first_and_spans_and_never_events) {
  play("openai");
  Result r = run_env({"OPENAI_API_KEY=" + kOpenAiKey},
                     "run 'remember figs' --provider openai --model gpt-4o-mini --session g1 --base-url " +
                         server.url() + "/v1 --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  json before = run_json("log show g1");
  const size_t events = before["data"]["events"].size();
  std::string first_request;  // the body referenced longest ago
  for (const auto& e : before["data"]["events"])
    if (first_request.empty() && e["type"] == "llm.requested") first_request = e["data"]["body_ref"];
  BOOST_REQUIRE(!first_request.empty());
  const std::string trace_before = run("trace show g1 --full").out;
  BOOST_TEST(run_json("trace show g1")["data"]["source"] == "store");

  // The default policy (30 days): nothing here is old.
  json kept = run_json("gc --dry-run");
  BOOST_TEST(kept["data"]["bodies_removed"].size() == 0u);
  const uint64_t total = kept["data"]["body_bytes_kept"];
  BOOST_REQUIRE(total > 0u);
  // One byte under the total: the oldest goes, and only what must.
  json one = run_json("gc --max-body-bytes " + std::to_string(total - 1));
  BOOST_REQUIRE(one["data"]["bodies_removed"].size() >= 1u);
  BOOST_TEST(one["data"]["bodies_removed"][0]["ref"] == first_request);
  BOOST_TEST(one["data"]["body_bytes_kept"].get<uint64_t>() <= total - 1);
  BOOST_TEST(one["data"]["body_bytes_kept"].get<uint64_t>() + one["data"]["bodies_removed"].back()["bytes"].get<uint64_t>() > total - 1);
  Result shown = run("log show g1 --bodies");
  BOOST_TEST(shown.code == 0, shown.err);
  BOOST_TEST(contains(shown.out + shown.err, "gc`, or never stored"), shown.out);
  // While a collector holds the trace store, or a process writes the log,
  // gc says so and removes nothing.
  const uint64_t kept_bytes = run_json("gc --dry-run")["data"]["body_bytes_kept"];
  {
    std::unique_ptr<TraceStore> held;
    BOOST_REQUIRE(TraceStore::open(dir.sub("home") + "/traces", TraceStore::Mode::kWriter, &held).ok());
    Result busy = run("gc --max-body-bytes 1");
    BOOST_TEST(busy.code == 1);
    BOOST_TEST(contains(busy.err, "stop it, then run gc again"), busy.err);
  }
  {
    std::unique_ptr<EventLog> writer;
    BOOST_REQUIRE(EventLog::open(EventLog::Options{.path = dir.sub("home") + "/log"}, &writer).ok());
    Result busy = run("gc --max-body-bytes 1");
    BOOST_TEST(busy.code == 1);
    BOOST_TEST(contains(busy.err, "another carapace process is writing"), busy.err);
  }
  BOOST_TEST(run_json("gc --dry-run")["data"]["body_bytes_kept"] == kept_bytes);
  // Everything, with the spans of every session (last updated more than a second ago).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  json all = run_json("gc --max-age 1s --max-body-bytes 1");
  BOOST_TEST(all["data"]["body_bytes_kept"] == 0);
  BOOST_TEST(all["data"]["span_sessions"] == json::array({"g1"}));
  BOOST_TEST(all["data"]["spans_removed"].get<uint64_t>() > 0u);
  BOOST_TEST(run_json("log show g1")["data"]["events"].size() == events);
  BOOST_TEST(run("verify g1").code == 0);
  BOOST_TEST(run("replay g1").code == 0);
  BOOST_TEST(run("trace show g1 --full").out == trace_before);
  BOOST_TEST(run_json("trace show g1")["data"]["source"] == "log");  // built again from the log
  // Bad limits are named; nothing is removed.
  Result bad = run("gc --max-age 3weeks");
  BOOST_TEST(bad.code == 2);
  BOOST_TEST(contains(bad.err, "--max-age '3weeks' is not a duration"), bad.err);
  bad = run("gc --max-body-bytes -5");
  BOOST_TEST(bad.code != 0);
}

BOOST_AUTO_TEST_CASE(a_bundle_with_bodies_carries_them_to_a_fresh_home) {
  play("openai");
  Result r = run_env({"OPENAI_API_KEY=" + kOpenAiKey},
                     "run 'remember figs' --provider openai --model gpt-4o-mini --session w1 --base-url " +
                         server.url() + "/v1 --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  auto requests = server.requests();
  BOOST_REQUIRE(requests.size() == 3u);
  // Without --with-bodies: events only, a version 1 bundle as before.
  std::string plain = dir.sub("plain.bundle");
  BOOST_TEST(run("bundle w1 -o " + plain).code == 0);
  BOOST_TEST(contains(slurp(plain), "\"version\":1"));
  BOOST_TEST(!contains(slurp(plain), "\"body\""));
  std::string file = dir.sub("w1.bundle");
  json written = run_json("bundle w1 -o " + file + " --with-bodies");
  BOOST_TEST(written["data"]["bodies"] == 6);  // 3 requests, 3 responses
  BOOST_TEST(written["data"]["missing_bodies"] == 0);
  BOOST_TEST(!contains(slurp(file), kOpenAiKey));
  std::string fresh = dir.sub("fresh");
  Result imported = run_in(fresh, "bundle import " + file);
  BOOST_TEST(imported.code == 0, imported.err);
  BOOST_TEST(contains(imported.out, "imported w1 (" ), imported.out);
  BOOST_TEST(contains(imported.out, "6 bodies"), imported.out);
  json shown = json::parse(run_in(fresh, "log show w1 --bodies --type llm.requested --json").out);
  BOOST_REQUIRE(shown["data"]["events"].size() == 3u);
  for (size_t i = 0; i < 3; ++i) BOOST_TEST(shown["data"]["events"][i]["body"] == requests[i].body);
  BOOST_TEST(contains(run_in(fresh, "log show w1 --bodies").out, "        | data: [DONE]\n"));
  BOOST_TEST(run_in(fresh, "verify w1").code == 0);
  // A body changed in the file is refused (with the digest recomputed too, its key would not match).
  std::string text = slurp(file);
  size_t at = text.find("{\"body\":");
  BOOST_REQUIRE(at != std::string::npos);
  size_t bytes = text.find("\"bytes\":\"", at) + 9;
  text[bytes] = text[bytes] == '7' ? '6' : '7';
  std::string edited = dir.sub("edited.bundle");
  std::ofstream(edited) << text;
  Result refused = run_in(dir.sub("fresh2"), "bundle import " + edited);
  BOOST_TEST(refused.code != 0);
  BOOST_TEST(contains(refused.err, "holds a body whose bytes do not match its key"), refused.err);
  // A home that has the events but not the bodies (the plain bundle imported):
  // the bundle is written and the missing bodies counted.
  std::string bare = dir.sub("bare");
  BOOST_TEST(run_in(bare, "bundle import " + plain).code == 0);
  Result partial = run_in(bare, "bundle w1 -o " + dir.sub("partial.bundle") + " --with-bodies");
  BOOST_TEST(partial.code == 0, partial.err);
  BOOST_TEST(contains(partial.out, "6 referenced bodies not in this home's body store"), partial.out);
}

BOOST_AUTO_TEST_CASE(run_with_anthropic_and_a_base_url) {
  play("anthropic");
  Result r =
      run_env({"ANTHROPIC_API_KEY=" + kAnthropicKey},
              "run 'remember plums' --provider anthropic --model claude-sonnet-4-5 --session a1 --base-url " +
                  server.url() + " --workspace " + ws);
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out == "Done: remember plums\n");
  auto requests = server.requests();
  BOOST_REQUIRE(requests.size() == 3u);
  BOOST_TEST(requests[0].path == "/v1/messages");
  BOOST_TEST(requests[0].header("x-api-key") == kAnthropicKey);
  BOOST_TEST(json::parse(requests[0].body)["model"] == "claude-sonnet-4-5");
  BOOST_TEST(!contains(r.out + r.err, kAnthropicKey));
  // $ANTHROPIC_BASE_URL does the same as --base-url.
  Result env =
      run_env({"ANTHROPIC_API_KEY=" + kAnthropicKey, "ANTHROPIC_BASE_URL=" + server.url()},
              "run 'remember figs' --provider anthropic --model claude-sonnet-4-5 --workspace " + ws);
  BOOST_TEST(env.code == 0, env.err);
  BOOST_TEST(env.out == "Done: remember figs\n");
}

BOOST_AUTO_TEST_CASE(a_missing_key_is_named_before_any_request) {
  play("openai");
  for (const std::string provider : {"openai", "anthropic"}) {
    std::string var = provider == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    Result r = run_env({}, "run 'x' --provider " + provider + " --model m --workspace " + ws);
    BOOST_TEST(r.code == 1);
    BOOST_TEST(contains(r.err, "set the environment variable " + var), r.err);
    // The other provider's key does not count.
    Result other = run_env({(provider == "openai" ? "ANTHROPIC_API_KEY=" : "OPENAI_API_KEY=") + kOpenAiKey},
                           "run 'x' --provider " + provider + " --model m --workspace " + ws);
    BOOST_TEST(other.code == 1);
    BOOST_TEST(contains(other.err, var), other.err);
    BOOST_TEST(!contains(other.err, kOpenAiKey));
  }
  // A server whose address is not loopback needs the key even with --base-url.
  Result remote =
      run_env({}, "run 'x' --provider openai --model m --base-url http://192.0.2.1/v1 --workspace " + ws);
  BOOST_TEST(remote.code == 1);
  BOOST_TEST(contains(remote.err, "OPENAI_API_KEY"), remote.err);
  BOOST_TEST(server.request_count() == 0u);
  // A local server (Ollama, llama.cpp, vLLM on loopback) needs none; no key is sent.
  Result local = run_env({}, "run 'remember kiwis' --provider openai --model llama3 --base-url " +
                                 server.url() + "/v1 --workspace " + ws);
  BOOST_TEST(local.code == 0, local.err);
  BOOST_TEST(local.out == "Done: remember kiwis\n");
  BOOST_REQUIRE(server.request_count() == 3u);
  BOOST_TEST(server.requests()[0].header("Authorization") == "");
  // Other mistakes, named.
  Result no_model = run_env({"OPENAI_API_KEY=k"}, "run 'x' --provider openai --workspace " + ws);
  BOOST_TEST(no_model.code == 1);
  BOOST_TEST(contains(no_model.err, "--model"), no_model.err);
  Result bad_url =
      run_env({"OPENAI_API_KEY=k", "OPENAI_BASE_URL=ftp://x"}, "run 'x' --provider openai --model m");
  BOOST_TEST(bad_url.code == 1);
  BOOST_TEST(contains(bad_url.err, "OPENAI_BASE_URL: must start with http:// or https://"), bad_url.err);
  Result bad_provider = run_env({}, "run 'x' --provider gemini --model m");
  BOOST_TEST(bad_provider.code == 2);
  BOOST_TEST(contains(bad_provider.err, "--provider gemini is not a provider"), bad_provider.err);
  Result scripted_url = run_env({}, "run 'x' --base-url " + server.url());
  BOOST_TEST(scripted_url.code == 2);
  BOOST_TEST(contains(scripted_url.err, "--base-url is for the openai and anthropic providers"),
             scripted_url.err);
  BOOST_TEST(server.request_count() == 3u);
}

// Where the stream of the final answer is held back: after its first text piece.
size_t after_first_piece(const std::string& format, const std::string& body) {
  size_t at = body.find(format == "openai" ? "\"content\":\"Done: r\"" : "\"text\":\"Done: r\"");
  BOOST_REQUIRE(at != std::string::npos);
  return body.find("\n\n", at) + 2;
}

BOOST_AUTO_TEST_CASE(run_and_chat_print_the_answer_as_it_streams_on_a_terminal) {
  for (const std::string format : {"openai", "anthropic"}) {
    // The final answer stalls after its first piece: on a terminal that piece
    // is on the screen while the rest has not been sent.
    server.set_handler([format](const testing::MockRequest& r, size_t) {
      testing::MockReply reply = testing::FakeModel{.format = format}.reply(r);
      if (testing::read_conversation(format, r.body).results >= 3) {
        reply.stall_after = static_cast<long>(after_first_piece(format, reply.body));
        reply.stall_ms = 60'000;  // until the test has looked
      }
      return reply;
    });
    std::string key =
        format == "openai" ? "OPENAI_API_KEY=" + kOpenAiKey : "ANTHROPIC_API_KEY=" + kAnthropicKey;
    std::vector<std::string> common = {
        "--provider",  format, "--model", "m", "--base-url", server.url() + (format == "openai" ? "/v1" : ""),
        "--workspace", ws};
    {
      std::vector<std::string> args = {"--home", dir.sub("home"), "run", "remember apples"};
      args.insert(args.end(), common.begin(), common.end());
      int stalls = server.stalls();
      testing::PtyProcess p(CARAPACE_BIN, args, clean_env({key}));
      BOOST_REQUIRE(p.read_until([](const std::string& o) { return contains(o, "Done: r"); }));
      // The server counts its stall just after sending the piece: give it a moment.
      BOOST_TEST(testing::MockLlmServer::wait_for([&] { return server.stalling() == 1; }, std::chrono::seconds(10)),
                 format << ": the piece was shown only once the rest came");
      BOOST_TEST(!contains(p.out, "Done: remember apples"));
      server.release_stalls();
      BOOST_TEST(p.wait() == 0, p.out);
      BOOST_TEST(server.stalls() == stalls + 1);
      BOOST_TEST(contains(p.out, "I will write the note.\r\n"), p.out);  // a turn's text, then its tools
      size_t first = p.out.find("Done: remember apples");
      BOOST_TEST(first != std::string::npos, p.out);
      BOOST_TEST(p.out.find("Done: remember apples", first + 1) == std::string::npos, p.out);  // not twice
      BOOST_TEST(!contains(p.out, kOpenAiKey));
      BOOST_TEST(!contains(p.out, kAnthropicKey));
    }
    {
      std::vector<std::string> args = {"--home", dir.sub("home"), "chat"};
      args.insert(args.end(), common.begin(), common.end());
      testing::PtyProcess p(CARAPACE_BIN, args, clean_env({key}));
      BOOST_REQUIRE(p.read_until([](const std::string& o) { return contains(o, "you> "); }));
      p.write("remember pears\n");
      BOOST_REQUIRE(p.read_until([](const std::string& o) { return contains(o, "agent> Done: r"); }));
      BOOST_TEST(testing::MockLlmServer::wait_for([&] { return server.stalling() == 1; }, std::chrono::seconds(10)));
      server.release_stalls();
      BOOST_REQUIRE(
          p.read_until([](const std::string& o) { return contains(o, "Done: remember pears\r\n"); }));
      BOOST_REQUIRE(p.read_until(
          [](const std::string& o) { return o.rfind("you> ") > o.find("Done: remember pears"); }));
      p.write("/exit\n");
      BOOST_TEST(p.wait() == 0, p.out);
      size_t first = p.out.find("agent> Done: remember pears");
      BOOST_TEST(first != std::string::npos, p.out);
      BOOST_TEST(p.out.find("Done: remember pears", first + 30) == std::string::npos, p.out);
    }
  }
}


// sessions rm: asks first, never while a process writes the home, removes the
// session's events, the bodies only it references and its spans, writes the
// home's audit line, and leaves every other session (a fork of it too) whole.
BOOST_AUTO_TEST_CASE(sessions_rm_removes_a_session_its_own_bodies_and_spans_and_nothing_else) {
  play("openai");
  // r1: two runs (a follow-up makes turn 2); r2: another task. Bodies are stored by content.
  for (const std::string args : {"'remember figs' --session r1 --then 'and plums'", "'remember pears' --session r2"}) {
    Result r = run_env({"OPENAI_API_KEY=" + kOpenAiKey}, "run " + args + " --provider openai --model gpt-4o-mini " +
                                                             "--base-url " + server.url() + "/v1 --workspace " + ws);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  }
  // A fork copies its parent's events up to the turn, body references too: those bodies stay.
  BOOST_REQUIRE(run("fork r1 --at-turn 1 --task 'again' --session r1-fork --scenario " + std::string(PROJECT_DIR) +
                    "/examples/scenarios/quickstart.json").code == 0);
  auto refs_of = [&](const std::string& id) {
    std::vector<std::string> refs;
    json events = run_json("log show " + id);
    for (const auto& e : events["data"]["events"]) {
      if (e["data"].contains("body_ref") && !e["data"]["body_ref"].get<std::string>().empty()) {
        refs.push_back(e["data"]["body_ref"]);
      }
    }
    return refs;
  };
  const auto r1_refs = refs_of("r1"), r2_refs = refs_of("r2"), fork_refs = refs_of("r1-fork");
  std::vector<std::string> only_r1;
  for (const auto& ref : r1_refs) {
    if (std::find(r2_refs.begin(), r2_refs.end(), ref) == r2_refs.end() &&
        std::find(fork_refs.begin(), fork_refs.end(), ref) == fork_refs.end()) {
      only_r1.push_back(ref);
    }
  }
  BOOST_REQUIRE(!only_r1.empty());
  BOOST_REQUIRE(!fork_refs.empty());
  BOOST_REQUIRE(run("trace show r1").code == 0);  // its spans stored
  const size_t fork_events = run_json("log show r1-fork")["data"]["events"].size();
  auto body_exists = [&](const std::string& ref) {
    std::unique_ptr<BodyStore> store;
    BOOST_REQUIRE(BodyStore::open(dir.sub("home") + "/bodies", BodyStore::Mode::kReader, &store).ok());
    std::string text;
    return store->get(ref, &text).ok();
  };
  // No question answered, no removal; nor while a process writes the home; nor of a session that is not there.
  Result unasked = run("sessions rm r1");
  BOOST_TEST(unasked.code == 2);
  BOOST_TEST(contains(unasked.err, "needs a confirmation"), unasked.err);
  BOOST_TEST(run("sessions rm r1", "n\n").code != 0);
  {
    std::unique_ptr<EventLog> writer;
    BOOST_REQUIRE(EventLog::open(EventLog::Options{.path = dir.sub("home") + "/log"}, &writer).ok());
    Result busy = run("sessions rm r1 --yes");
    BOOST_TEST(busy.code == 1);
    BOOST_TEST(contains(busy.err, "another carapace process is writing"), busy.err);
  }
  BOOST_TEST(run("sessions rm r1 nope --yes").code == 1);
  BOOST_TEST(run_json("log show r1")["data"]["events"].size() > 0u);
  BOOST_TEST(!std::filesystem::exists(dir.sub("home") + "/audit.log"));

  json removed = run_json("sessions rm r1 --yes");
  BOOST_TEST(removed["data"]["removed"] == json::array({"r1"}));
  BOOST_TEST(removed["data"]["bodies"].get<size_t>() == only_r1.size());
  BOOST_TEST(removed["data"]["spans"].get<uint64_t>() > 0u);
  BOOST_TEST(run("log show r1").code == 1);
  for (const auto& ref : only_r1) BOOST_TEST(!body_exists(ref), ref);
  for (const auto& ref : r2_refs) BOOST_TEST(body_exists(ref), ref);
  for (const auto& ref : fork_refs) BOOST_TEST(body_exists(ref), ref);
  BOOST_TEST(run_json("log show r1-fork")["data"]["events"].size() == fork_events);
  Result verify = run("verify --all");
  BOOST_TEST(verify.code == 0, verify.out << verify.err);
  const std::string audit = slurp(dir.sub("home") + "/audit.log");
  BOOST_TEST(contains(audit, "sessions rm r1: 1 session ("), audit);
  BOOST_TEST(((std::filesystem::status(dir.sub("home") + "/audit.log").permissions() &
               std::filesystem::perms::all) ==
              (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)));
  json left = run_json("sessions");
  BOOST_TEST(left["data"].size() == 2u);
  // Asked on a terminal-less stdin with an answer: "y" removes.
  BOOST_TEST(run("sessions rm r2", "y\n").code == 2);  // stdin is no terminal: --yes is the way
}


// chat on a real terminal, as a person uses it: the status line names the
// turn that runs; Ctrl-C in a turn stops it (recorded, its tool killed) and
// returns to the prompt, chat still there; the next message goes on (the
// stopped turn finished, then the message answered), every model message and
// tool call shown; Ctrl-C at the prompt says how to leave; Ctrl-D leaves, and
// so does Ctrl-C twice.
BOOST_AUTO_TEST_CASE(chat_is_a_repl_on_a_terminal) {
  const std::string scenario = dir.sub("repl.json");
  std::ofstream(scenario) << R"({"replies": [
      {"text": "Working on it.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 1036", "timeout_ms": 600000}}]},
      {"text": "Stopped, as you asked."},
      {"text": "Checking.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 0.7"}}]},
      {"text": "Here is your next answer."}]})";
  const std::vector<std::string> args = {"--home", dir.sub("home"), "chat", "--session", "r1", "--scenario", scenario,
                                         "--workspace", ws};
  testing::PtyProcess p(CARAPACE_BIN, args, clean_env({}));
  BOOST_REQUIRE_MESSAGE(p.read_until([](const std::string& o) { return contains(o, "you> "); }), p.out);
  p.write("go\r");
  BOOST_REQUIRE_MESSAGE(p.read_until([](const std::string& o) { return contains(o, "turn 1: running shell"); }), p.out);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (testing::find_processes({"sleep", "1036"}).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_REQUIRE(!testing::find_processes({"sleep", "1036"}).empty());
  BOOST_TEST(contains(p.out, "agent> Working on it."), p.out);

  // Ctrl-C in the turn: stopped, back at the prompt.
  size_t mark = p.out.size();
  p.write("\x03");
  BOOST_REQUIRE_MESSAGE(p.read_until([mark](const std::string& o) {
    return contains(o.substr(mark), "stopped turn 1 of r1") && contains(o.substr(mark), "you> ");
  }), p.out);
  BOOST_TEST(::kill(p.pid, 0) == 0);  // chat is still there
  BOOST_TEST(testing::survivors({{"sleep", "1036"}}) == 0u);
  const json stopped = run_json("log show r1")["data"]["events"].back();
  BOOST_TEST(stopped["type"] == "session.stopped", stopped.dump());
  BOOST_TEST(stopped["data"]["reason"] == "SIGINT", stopped.dump());

  // The next message goes on: the stopped call shown, the turn finished, then the message's own turn.
  mark = p.out.size();
  p.write("and now?\r");
  BOOST_REQUIRE_MESSAGE(p.read_until([mark](const std::string& o) {
    return contains(o.substr(mark), "Here is your next answer.") && contains(o.substr(mark), "you> ");
  }), p.out);
  const std::string after = p.out.substr(mark);
  BOOST_TEST(contains(after, "shell \"{\"command\":\"sleep 1036\""), after);
  BOOST_TEST(contains(after, "stopped (SIGINT)"), after);
  BOOST_TEST(contains(after, "agent> Stopped, as you asked."), after);
  // The stopped turn's call ended it; turn 2 answered; the message's turns are 3 and 4.
  BOOST_TEST(contains(after, "turn 3: running shell"), after);  // the status line follows the real turn
  BOOST_TEST(after.find("Stopped, as you asked.") == after.rfind("Stopped, as you asked."), after);  // once
  BOOST_TEST(after.find("Stopped, as you asked.") < after.find("Here is your next answer."), after);

  // Ctrl-C at the prompt says how to leave; Ctrl-D leaves.
  mark = p.out.size();
  p.write("\x03");
  BOOST_REQUIRE_MESSAGE(p.read_until([mark](const std::string& o) {
    return contains(o.substr(mark), "(Ctrl-C again or Ctrl-D to leave");
  }), p.out);
  BOOST_TEST(::kill(p.pid, 0) == 0);
  p.write("\x04");
  BOOST_TEST(p.wait() == 0);
  BOOST_TEST(contains(p.out, "bye: the session stays in the log"), p.out);
  BOOST_TEST(run("verify r1").code == 0);

  // Ctrl-C twice at the prompt leaves too.
  testing::PtyProcess twice(CARAPACE_BIN, args, clean_env({}));
  BOOST_REQUIRE(twice.read_until([](const std::string& o) { return contains(o, "you> "); }));
  twice.write("\x03");
  BOOST_REQUIRE(twice.read_until([](const std::string& o) { return contains(o, "Ctrl-D to leave"); }));
  twice.write("\x03");
  BOOST_TEST(twice.wait() == 0);
  BOOST_TEST(contains(twice.out, "bye"), twice.out);
}

BOOST_AUTO_TEST_SUITE_END()
