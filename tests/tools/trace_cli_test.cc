// `carapace trace` run as a user would: on a finished, a crashed, a resumed
// and a forked session, with --json everywhere; `trace span` with the
// verbatim bodies of a real HTTP exchange; `trace analyze` on runs built to
// show each pattern and on a clean one.
#define BOOST_TEST_MODULE trace_cli_test
#include <sys/wait.h>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <functional>
#include <signal.h>
#include <cerrno>

#include "storage/trace_store.h"
#include "tests/support/cli_home.h"
#include "tests/support/fake_model.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using nlohmann::json;

namespace {

using testing::contains;
using testing::slurp;
using Result = testing::CliResult;

struct Fixture : testing::CliHome {
  std::string ws = dir.sub("ws");
  std::string scenarios = std::string(PROJECT_DIR) + "/examples/scenarios/";

  Fixture() { std::filesystem::create_directories(ws); }

  static const json& span_named(const json& spans, const std::string& name, int nth = 0) {
    for (const auto& s : spans) {
      if (s["name"] == name && nth-- == 0) return s;
    }
    BOOST_FAIL("no span " << name);
    return spans[0];
  }

  std::set<std::string> patterns(const std::string& id) {
    json j = run_json("trace analyze " + id);
    std::set<std::string> out;
    for (const auto& f : j["data"]["sessions"][0]["findings"]) {
      out.insert(f["pattern"].get<std::string>());
      BOOST_TEST(!f["seqs"].empty());
    }
    return out;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(trace_cli, Fixture)

BOOST_AUTO_TEST_CASE(show_span_and_stats_on_a_finished_session) {
  Result r = run("run 'Write a note' --scenario " + scenarios + "quickstart.json --workspace " + ws + " --session q");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  Result show = run("trace show q");
  BOOST_TEST(show.code == 0, show.err);
  BOOST_TEST(contains(show.out, "session q  scripted/scripted-1  COMPLETED (final_answer)"), show.out);
  // (The failed attempt's duration is measured: 0 ms, or more on a loaded machine.)
  std::string line14 = show.out.substr(show.out.find("#14 "));
  line14 = line14.substr(0, line14.find('\n'));
  BOOST_TEST(line14.starts_with("#14         llm attempt 1  scripted-1  "), show.out);
  BOOST_TEST(line14.ends_with(" ms  ERROR HTTP 429, RETRY in 300 ms"), show.out);
  json j = run_json("trace show q");
  BOOST_TEST(j["success"] == true);
  BOOST_TEST(j["data"]["source"] == "store");  // the run's collector wrote it
  BOOST_TEST(j["data"]["spans"].size() == 11u);
  BOOST_TEST(j["data"]["status"] == "completed");
  json span = run_json("trace span q 14");
  BOOST_TEST(span["data"]["attrs"]["http_status"] == 429);
  BOOST_TEST(span["data"]["status"] == "error");
  Result text = run("trace span q 20");
  BOOST_TEST(contains(text.out, "tool shell  (tool, span "), text.out);
  BOOST_TEST(contains(text.out, "duration_ms"), text.out);
  json stats = run_json("trace stats q --group-by tool");
  BOOST_TEST(stats["data"]["totals"]["model_calls"] == 4);
  BOOST_TEST(stats["data"]["totals"]["retries"] == 1);
  BOOST_TEST(stats["data"]["totals"]["tokens_in"] == 3044);
  BOOST_TEST(stats["data"]["groups"].size() == 3u);
  BOOST_TEST(run_json("trace stats --since 1h --group-by day")["data"]["totals"]["sessions"] == 1);
  // Bad input: a clear error, the right exit code.
  BOOST_TEST(run_json("trace show nope", 1)["error"]["message"].get<std::string>().find("no session 'nope'") !=
             std::string::npos);
  BOOST_TEST(run_json("trace span q 999", 1)["success"] == false);
  BOOST_TEST(run_json("trace stats --since yesterday", 2)["error"]["message"] == "--since 'yesterday' is not a duration");
  BOOST_TEST(run("trace stats --group-by colour").code == 2);
  BOOST_TEST(run("trace analyze").code == 2);
  for (const char* help : {"trace --help", "trace show --help", "trace span --help", "trace stats --help",
                           "trace analyze --help"}) {
    Result h = run(help);
    BOOST_TEST(h.code == 0, help);
  }
}

BOOST_AUTO_TEST_CASE(a_crashed_session_shows_where_it_stopped_and_its_resume_links_back) {
  std::string faults =
      file("crash.json", R"({"faults": [{"point": "tool.after_exec", "action": "crash", "tool": "^shell$", "nth": 1}]})");
  Result r = run("run 'Write a note' --scenario " + scenarios + "quickstart.json --workspace " + ws +
                 " --session c --faults " + faults);
  BOOST_REQUIRE(r.code != 0);
  // Crashed: the last event is the shell call's tool.requested (seq 20);
  // no process writes the home, so its writer died.
  Result open = run("trace show c");
  BOOST_TEST(open.code == 0, open.err);
  BOOST_TEST(contains(open.out, "CRASHED after seq 20, not resumed"), open.out);
  BOOST_TEST(contains(open.out, "tool shell  …  NO RESULT"), open.out);
  BOOST_TEST(run_json("trace show c")["data"]["status"] == "crashed");
  BOOST_TEST(patterns("c").count("tool_call_without_result") == 1u);
  BOOST_TEST(patterns("c").count("crashed") == 1u);

  Result resumed = run("resume c");
  BOOST_REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  json j = run_json("trace show c");
  const json& spans = j["data"]["spans"];
  const json& resume = span_named(spans, "resume (step)");
  BOOST_TEST(resume["attrs"]["after_crash"] == true);
  BOOST_TEST(resume["attrs"]["crashed_after_seq"] == 20);
  const json& shell = span_named(spans, "tool shell");
  BOOST_TEST(shell["status"] == "interrupted");
  BOOST_REQUIRE(resume["links"].size() == 1u);
  BOOST_TEST(resume["links"][0]["span_id"] == shell["span_id"]);
  BOOST_TEST(resume["links"][0]["reason"] == "resumed_after_crash");
  BOOST_TEST(j["data"]["status"] == "completed");
  Result text = run("trace show c");
  BOOST_TEST(contains(text.out, "CRASHED after seq 20, resumed from turn 1"), text.out);
  BOOST_TEST(contains(text.out, "· CRASH: the process died after seq 20"), text.out);
  BOOST_TEST(patterns("c").count("crashed") == 1u);

  // A fork of it links to its turn-2 span.
  Result fork = run("fork c --at-turn 2 --task 'Once more' --session f --scenario " + scenarios + "quickstart.json");
  BOOST_REQUIRE_MESSAGE(fork.code == 0, fork.err);
  json f = run_json("trace show f");
  const json& root = f["data"]["spans"][0];
  BOOST_REQUIRE(root["links"].size() == 1u);
  BOOST_TEST(root["links"][0]["session"] == "c");
  BOOST_TEST(root["links"][0]["reason"] == "fork");
  BOOST_TEST(root["links"][0]["span_id"] == span_named(spans, "turn 2")["span_id"]);
  BOOST_TEST(contains(run("trace show f").out, "copied from the parent c"));
}

BOOST_AUTO_TEST_CASE(analyze_finds_the_patterns_of_a_run_built_to_show_them_and_none_in_a_clean_one) {
  std::string bad = file("bad.json", R"({"replies": [
    {"error": {"status": 503, "retry_after_ms": 5}},
    {"error": {"status": 503, "retry_after_ms": 5}},
    {"text": "Reading.", "tool_calls": [{"name": "read_file", "args": {"path": "missing.txt"}}]},
    {"text": "Again.", "tool_calls": [{"name": "read_file", "args": {"path": "missing.txt"}}]},
    {"text": "And again.", "tool_calls": [{"name": "read_file", "args": {"path": "missing.txt"}}]}
  ]})");
  Result r = run("run 'Read it' --scenario " + bad + " --workspace " + ws + " --session bad --max-turns 3");
  BOOST_TEST(r.code == 1, r.err);  // stopped by its turn budget: not a completion
  BOOST_TEST(contains(r.err, "stopped after 3 turns"), r.err);
  BOOST_TEST(contains(r.err, "resume bad --max-turns 6"), r.err);
  std::set<std::string> expected = {"retry_loop", "repeated_tool_call", "failing_tool", "max_turns", "unused_tools"};
  BOOST_TEST(patterns("bad") == expected, boost::test_tools::per_element());

  std::string good = file("good.json", R"({"replies": [
    {"text": "Looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
    {"text": "Done."}
  ]})");
  std::string config = file("config.json", R"({"tools": {"enabled": ["list_dir"]}})");
  r = run("run 'Look' --scenario " + good + " --workspace " + ws + " --session good --config " + config);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  BOOST_TEST(patterns("good").empty());
  Result text = run("trace analyze good");
  BOOST_TEST(text.out == "good: no failure patterns found\n");
  json all = run_json("trace analyze --since 1h");
  BOOST_TEST(all["data"]["sessions"].size() == 2u);
}

BOOST_AUTO_TEST_CASE(trace_span_prints_the_verbatim_bodies_of_an_http_model_call) {
  testing::MockLlmServer server;
  server.set_handler(
      [](const testing::MockRequest& r, size_t) { return testing::FakeModel{.format = "openai"}.reply(r); });
  Result r = run("run 'remember apples' --provider openai --model gpt-4o-mini --session o --workspace " + ws +
                     " --base-url " + server.url() + "/v1",
                 "OPENAI_API_KEY=trace-canary-credential-0042");  // not key-shaped: the redactor would not mask it
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  auto requests = server.requests();
  BOOST_REQUIRE(!requests.empty());
  json show = run_json("trace show o");
  std::string handle = std::to_string(span_named(show["data"]["spans"], "llm attempt 1")["open_seq"].get<uint64_t>());
  // --raw --body request: exactly the bytes the server got.
  Result raw = run("trace span o " + handle + " --raw --body request");
  BOOST_TEST(raw.code == 0, raw.err);
  BOOST_TEST(raw.out == requests[0].body);
  // Default: pretty JSON.
  Result pretty = run("trace span o " + handle);
  BOOST_TEST(contains(pretty.out, "request body "), pretty.out);
  BOOST_TEST(contains(pretty.out, json::parse(requests[0].body).dump(2)), pretty.out);
  BOOST_TEST(contains(pretty.out, "response body "), pretty.out);
  json j = run_json("trace span o " + handle);
  BOOST_TEST(j["data"]["request_body_text"] == requests[0].body);
  BOOST_TEST(j["data"]["request_body_json"]["model"] == "gpt-4o-mini");
  BOOST_TEST(contains(j["data"]["response_body_text"].get<std::string>(), "data: [DONE]"));
  BOOST_TEST(!contains(pretty.out + raw.out + j.dump(), "trace-canary-credential-0042"));  // never stored, so never shown
  BOOST_TEST(run("trace span o 1 --body request").code == 1);  // the session span has no body
}

// Starts `args` in the background; returns its pid.
pid_t spawn(Fixture& f, const std::string& args, const std::string& log) {
  std::string pidfile = f.dir.sub("pid");
  std::string cmd = std::string(CARAPACE_BIN) + " --home '" + f.dir.sub("home") + "' " + args + " >'" + log +
                    "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
  BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
  return static_cast<pid_t>(std::stol(slurp(pidfile)));
}

bool wait_for(const std::function<bool()>& done) {
  for (int i = 0; i < 600; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A process started by spawn() is not this process's child (its shell
// exited), so waitpid cannot wait for it: wait until it is gone.
bool wait_gone(pid_t pid) {
  return wait_for([pid] { return ::kill(pid, 0) != 0 && errno == ESRCH; });
}

// Spans built from the log and spans the collector stored read the same:
// the skeleton line for line, and a bare seq handle names the same span
// where one event opened two (a tool call and the hook about it). Long
// enough (over 4,096 events) that both are read on two threads, and the
// stored ones partly by the thread that scans them.
BOOST_AUTO_TEST_CASE(show_and_span_read_the_same_from_the_log_and_from_the_store) {
  BOOST_REQUIRE(run("log synth --session same --turns 400 --seed 7").code == 0);
  json built = run_json("trace show same --full --json");
  BOOST_REQUIRE(built["data"]["source"] == "log");
  const std::string from_log = run("trace show same").out;
  const std::string full_from_log = run("trace show same --full").out;
  // The seqs that opened more than one span: their handles carry the kind.
  std::map<uint64_t, std::vector<std::string>> kinds_at;
  for (const auto& sp : built["data"]["spans"]) kinds_at[sp["open_seq"].get<uint64_t>()].push_back(sp["kind"]);
  uint64_t shared = 0;
  for (const auto& [seq, kinds] : kinds_at) {
    if (kinds.size() > 1 && kinds[0] == "tool") shared = seq;
  }
  BOOST_REQUIRE_MESSAGE(shared != 0, "no seq opened a tool span and another");
  const std::string span_from_log = run_json("trace span same " + std::to_string(shared))["data"]["span_id"];

  Result folded = run("collector --once");
  BOOST_REQUIRE_MESSAGE(folded.code == 0, folded.err);
  BOOST_REQUIRE(run_json("trace show same --json")["data"]["source"] == "store");
  BOOST_TEST(run("trace show same").out == from_log);
  BOOST_TEST(run("trace show same --full").out == full_from_log);
  BOOST_TEST(run_json("trace span same " + std::to_string(shared))["data"]["span_id"] == span_from_log);
  BOOST_TEST(run_json("trace span same " + std::to_string(shared))["data"]["kind"] == "tool");
}

// A stored span that does not read (a damaged store, or one a stranger
// wrote) sends the whole trace back to the log: the same output, built from
// the events. The session is long enough (over 4,096 events) that the spans
// are scanned on a thread of their own, ten batches of them; the damaged
// span sits in the eighth, so the reading stops part way, or in the last,
// which the scanning thread often reads itself while this one is busy.
BOOST_AUTO_TEST_CASE(a_stored_span_that_does_not_read_sends_the_trace_back_to_the_log) {
  BOOST_REQUIRE(run("log synth --session dmg --turns 400").code == 0);
  const std::string from_log = run("trace show dmg").out;
  const std::string full_from_log = run("trace show dmg --full").out;
  const json spans = run_json("trace show dmg --full")["data"]["spans"];
  BOOST_REQUIRE(spans.size() > 2304u);
  Result folded = run("collector --once");
  BOOST_REQUIRE_MESSAGE(folded.code == 0, folded.err);
  BOOST_REQUIRE(run_json("trace show dmg")["data"]["source"] == "store");
  BOOST_TEST(run("trace show dmg").out == from_log);
  for (const json& victim : {spans[spans.size() * 5 / 6], spans[spans.size() - 1]}) {
    json no_status = victim;
    no_status.erase("status");
    for (const std::string& damage : {std::string("{\"trace_id\":"), std::string("[1,2]"), no_status.dump(),
                                      std::string(100000, '[') + std::string(100000, ']')}) {
      {
        std::unique_ptr<TraceStore> store;
        BOOST_REQUIRE(TraceStore::open(home() + "/traces", TraceStore::Mode::kWriter, &store).ok());
        StoredSpan replaced{.session = "dmg",
                            .span_id = victim["span_id"],
                            .open_seq = victim["open_seq"],
                            .start_us = victim["start_us"],
                            .value = damage};
        BOOST_REQUIRE(store->write({&replaced, 1}, {}).ok());
      }
      BOOST_TEST(run_json("trace show dmg")["data"]["source"] == "log", damage.substr(0, 40));
      BOOST_TEST(run("trace show dmg").out == from_log, damage.substr(0, 40));
      BOOST_TEST(run("trace show dmg --full").out == full_from_log, damage.substr(0, 40));
    }
  }
}

// A collector started before the first session (the natural order for a
// daemon) used to exit at once ("no event log"): it waits, says so once,
// and follows the log when it appears.
BOOST_AUTO_TEST_CASE(a_collector_started_on_a_new_home_waits_for_its_log) {
  BOOST_REQUIRE(!std::filesystem::exists(dir.sub("home")));
  pid_t collector = spawn(*this, "collector --interval-ms 20", dir.sub("collector.out"));
  BOOST_REQUIRE(
      wait_for([&] { return contains(slurp(dir.sub("collector.out")), "waiting for the first session"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(::kill(collector, 0) == 0, "the collector exited: " << slurp(dir.sub("collector.out")));
  BOOST_REQUIRE(run("run go --scenario " + std::string(PROJECT_DIR) + "/examples/scenarios/quickstart.json " +
                    "--workspace " + ws + " --session late")
                    .code == 0);
  // The run's own collector held the store while it ran; the waiting one
  // takes it over and follows from there.
  BOOST_TEST(wait_for([&] { return contains(slurp(dir.sub("collector.out")), "following"); }),
             slurp(dir.sub("collector.out")));
  BOOST_REQUIRE(run("log synth --session after --turns 2").code == 0);
  json j;
  BOOST_TEST(wait_for([&] {
               j = run_json("trace show after");
               return j["data"].value("source", "") == "store";
             }),
             j.dump());
  std::string said = slurp(dir.sub("collector.out"));
  size_t first = said.find("waiting for the first session");
  BOOST_TEST((first != std::string::npos &&
              said.find("waiting for the first session", first + 1) == std::string::npos),
             said);
  ::kill(collector, SIGTERM);
  BOOST_TEST(wait_gone(collector));
}

BOOST_AUTO_TEST_CASE(the_collector_out_of_process_attributes_a_crash_and_picks_up_where_it_left_off) {
  std::string slow = file("slow.json", R"({"replies": [
    {"text": "Listing.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
    {"text": "Waiting.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 60"}}]},
    {"text": "Done."}
  ]})");
  BOOST_REQUIRE(run("log synth --session warm --turns 2").code == 0);
  pid_t collector = spawn(*this, "collector --interval-ms 20", dir.sub("collector.out"));
  BOOST_REQUIRE(wait_for([&] { return run("trace show warm --json").out.find("\"store\"") != std::string::npos; }));
  pid_t writer = spawn(*this, "run go --scenario " + slow + " --workspace " + ws + " --session k", dir.sub("run.out"));
  // Killed with SIGKILL in the middle of its second turn, while the shell call runs.
  BOOST_REQUIRE(wait_for([&] { return contains(run("log show k").out, "tool.requested     shell"); }));
  ::kill(writer, SIGKILL);
  BOOST_REQUIRE(wait_gone(writer));
  json j;
  BOOST_REQUIRE(wait_for([&] {
    j = run_json("trace show k");
    return j["data"].contains("crashed_after_seq");
  }));
  BOOST_TEST(j["data"]["crashed_after_seq"] == 16);  // the shell call's tool.requested, the last event written
  BOOST_TEST(j["data"]["last_seq"] == 16);
  BOOST_TEST(j["data"]["source"] == "store");
  BOOST_TEST(contains(run("trace show k").out, "session k  scripted/scripted-1  CRASHED after seq 16"));
  BOOST_TEST(wait_for([&] { return contains(slurp(dir.sub("collector.out")), "session k: crashed after seq 16"); }));
  ::kill(collector, SIGTERM);
  BOOST_TEST(wait_gone(collector));
  // Restarted, it has nothing to redo; the session resumed, it takes up the new events.
  json again = run_json("collector --once");
  BOOST_TEST(again["data"]["events"] == 0);
  BOOST_REQUIRE(run("resume k --mode turn").code != -1);
  // (the resume's own collector stored its events: none left to fold)
  BOOST_TEST(run_json("collector --once")["data"]["events"] == 0);
  json resumed = run_json("trace show k");
  BOOST_TEST(resumed["data"]["source"] == "store");
  BOOST_TEST(!resumed["data"].contains("crashed_after_seq"));
  BOOST_TEST(span_named(resumed["data"]["spans"], "resume (turn)")["attrs"]["crashed_after_seq"] == 16);
}

BOOST_AUTO_TEST_CASE(diff_aligns_a_fork_with_its_parent_and_tail_follows_a_run_live) {
  pid_t tail = spawn(*this, "trace tail p --exit-when-done --interval-ms 20", dir.sub("tail.out"));
  // The run starts once tail has looked and found no home (else the run may make it first).
  const std::string waiting = "carapace trace tail: no event log in ";
  BOOST_REQUIRE(wait_for([&] { return contains(slurp(dir.sub("tail.out")), waiting); }));
  Result r = run("run 'Write a note' --scenario " + scenarios + "quickstart.json --workspace " + ws + " --session p");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  BOOST_REQUIRE(wait_gone(tail));  // it stops by itself once the session completed
  std::string lines = slurp(dir.sub("tail.out"));
  // Before the run made the home, tail said once that it waits.
  BOOST_TEST(lines.rfind(waiting, 0) == 0u, lines);
  BOOST_TEST(lines.find(waiting, 1) == std::string::npos, lines);
  lines = lines.substr(lines.find('\n') + 1);
  BOOST_TEST(std::count(lines.begin(), lines.end(), '\n') == 28, lines);  // every event, once, then it stopped
  BOOST_TEST(contains(lines, "p       1  "), lines);
  BOOST_TEST(contains(lines, "session.completed"), lines);

  // The quickstart's replies (a fork's first turns are the parent's), then another last answer.
  json other_scenario = json::parse(slurp(scenarios + "quickstart.json"));
  other_scenario["replies"][3] = {{"text", "Something else entirely."}};
  std::string other = file("other.json", other_scenario.dump());
  r = run("fork p --at-turn 2 --task 'Stop here' --session f --scenario " + other);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  json d = run_json("trace diff p f");
  BOOST_TEST(d["data"]["first_difference"] == 3);
  BOOST_TEST(d["data"]["turns"][0]["same"] == true);
  BOOST_TEST(d["data"]["turns"][1]["same"] == true);
  BOOST_TEST(d["data"]["turns"][2]["same"] == false);
  Result text = run("trace diff p f");
  BOOST_TEST(contains(text.out, "turn 3  FIRST DIFFERENCE: "), text.out);
  BOOST_TEST(contains(text.out, "p and f part at turn 3"), text.out);
  BOOST_TEST(run_json("trace diff p p")["data"]["first_difference"] == 0);
  BOOST_TEST(run("trace tail").code == 2);  // neither an id nor --all
}

// The analysis views as a user reads them: per-tool latencies measured (not
// the whole milliseconds a tool reports, nor the model's); `trace diff`
// compares what the tools returned; a fork's copied turns are its parent's
// (not counted, but their tools were used); a repeated call shows its
// arguments; a crash no run resumed is one answer in sessions, trace show,
// trace analyze before any collector ran.
BOOST_AUTO_TEST_CASE(analysis_views_measure_compare_and_agree) {
  const std::string quickstart = scenarios + "quickstart.json";
  const std::string wa = dir.sub("wa"), wb = dir.sub("wb");
  std::filesystem::create_directories(wa);
  std::filesystem::create_directories(wb);
  std::ofstream(wb + "/extra.txt") << "one more file for list_dir";
  BOOST_REQUIRE(run("run 'Write a note' --scenario " + quickstart + " --workspace " + wa + " --session a").code == 0);
  BOOST_REQUIRE(run("run 'Write a note' --scenario " + quickstart + " --workspace " + wb + " --session b").code == 0);

  // Grouped by tool: each tool's own calls and latencies, no model figures.
  json stats = run_json("trace stats --group-by tool");
  const json& groups = stats["data"]["groups"];
  BOOST_REQUIRE(groups.size() == 3u);  // list_dir, shell, write_file
  for (const auto& g : groups) {
    BOOST_TEST(!g.contains("tokens_in"), g.dump());
    BOOST_TEST(g["sessions"] == 2);
    BOOST_TEST(g["p50_ms"].get<double>() <= g["p95_ms"].get<double>());
    BOOST_TEST(g["p95_ms"].get<double>() <= g["max_ms"].get<double>());
    BOOST_TEST(g["output_bytes"].get<uint64_t>() > 0u, g.dump());
  }
  // A shell call (a child process) takes a measurable time; each group's median is a real one.
  for (const auto& g : groups) {
    if (g["key"] == "shell") BOOST_TEST(g["p50_ms"].get<double>() > 0.0, g.dump());
  }
  Result human = run("trace stats --group-by tool");
  BOOST_TEST(contains(human.out, "by tool"), human.out);
  BOOST_TEST(!contains(human.out.substr(human.out.find("by tool")), "tokens"), human.out);

  // The same calls, different outputs: turn 1's list_dir saw another directory.
  json diff = run_json("trace diff a b");
  BOOST_TEST(diff["data"]["first_difference"] == 1, diff.dump());
  BOOST_TEST(contains(diff["data"]["turns"][0]["differences"].dump(), "output of list_dir"), diff.dump());
  BOOST_TEST(run_json("trace diff a a")["data"]["first_difference"] == 0);

  // A fork at turn 1: list_dir was used in the turn it copied.
  BOOST_REQUIRE(run("fork a --at-turn 1 --session af --scenario " + quickstart).code == 0);
  json fork_findings = run_json("trace analyze af");
  for (const auto& f : fork_findings["data"]["sessions"][0]["findings"]) {
    if (f["pattern"] == "unused_tools") BOOST_TEST(!contains(f["message"].get<std::string>(), "list_dir"), f.dump());
  }
  json fork_stats = run_json("trace stats af");
  BOOST_TEST(fork_stats["data"]["totals"]["turns"] == 2);  // turns 2 and 3; turn 1 is a's
  BOOST_TEST(fork_stats["data"]["totals"]["tools"].count("list_dir") == 0u, fork_stats.dump());

  // The same call twice: the finding shows which.
  const std::string twice = file("twice.json", R"({"replies": [
      {"text": "Look.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
      {"text": "Again.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
      {"text": "Done."}]})");
  BOOST_REQUIRE(run("run go --scenario " + twice + " --workspace " + wa + " --session r").code == 0);
  bool repeated = false;
  const json r_findings = run_json("trace analyze r")["data"]["sessions"][0]["findings"];
  for (const auto& f : r_findings) {
    if (f["pattern"] != "repeated_tool_call") continue;
    repeated = true;
    BOOST_TEST(contains(f["message"].get<std::string>(), "list_dir was called 2 times with the same arguments: {\"path\":\".\"}"),
               f.dump());
  }
  BOOST_TEST(repeated);

  // Killed by a fault plan in its second turn, and not resumed.
  const std::string crash = file("crash.json", R"({"faults": [{"point": "tool.after_exec", "action": "crash", "tool": "^shell$", "nth": 1}]})");
  Result killed = run("run 'Write a note' --scenario " + quickstart + " --workspace " + wa + " --session c --faults " + crash);
  BOOST_REQUIRE_MESSAGE(killed.code == 137, killed.code << killed.err);
  const json rows = run_json("sessions")["data"]["sessions"];
  size_t crashed_rows = 0;
  for (const auto& row : rows) crashed_rows += row["id"] == "c" && row["status"] == "crashed";
  BOOST_TEST(crashed_rows == 1u, rows.dump());
  json shown = run_json("trace show c");
  BOOST_TEST(shown["data"]["status"] == "crashed", shown["data"]["status"]);
  const uint64_t last = shown["data"]["last_seq"];
  BOOST_TEST(shown["data"]["crashed_after_seq"] == last);
  BOOST_TEST(contains(run("trace show c").out, "CRASHED after seq " + std::to_string(last) + ", not resumed"));
  bool flagged = false;
  const json c_findings = run_json("trace analyze c")["data"]["sessions"][0]["findings"];
  for (const auto& f : c_findings) {
    if (f["pattern"] != "crashed") continue;
    flagged = true;
    BOOST_TEST(contains(f["message"].get<std::string>(), "resume c"), f.dump());
    BOOST_TEST(f["seqs"][0] == last);
  }
  BOOST_TEST(flagged);
  // Resumed, it is no longer an open crash.
  BOOST_REQUIRE(run("resume c --scenario " + quickstart).code == 0);
  BOOST_TEST(!run_json("trace show c")["data"].contains("crashed_after_seq"));
}

BOOST_AUTO_TEST_SUITE_END()
