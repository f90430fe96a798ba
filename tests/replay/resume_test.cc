// A real carapace process is killed with SIGKILL at each fault point, then
// resumed in step and in turn mode; each mode's promise is checked against
// the log, the record of real tool executions, and a crash-free run.
#define BOOST_TEST_MODULE resume_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <set>

#include "events/fold.h"
#include "events/record.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "storage/event_log.h"
#include "storage/keys.h"
#include "tests/support/child_process.h"
#include "tests/support/printing.h"
#include "tests/support/raw_db.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
namespace fs = std::filesystem;
namespace data = boost::unit_test::data;

namespace {

const std::string kScenario = std::string(PROJECT_DIR) + "/examples/scenarios/torture.json";

struct Home {
  testing::TempDir dir;
  std::string path() const { return dir.sub("home"); }
  std::string log() const { return dir.sub("child.log"); }
  std::string exec() const { return dir.sub("exec.log"); }

  Home() {
    fs::create_directories(dir.sub("ws"));
    std::ofstream(dir.sub("ws/input.txt")) << "hello torture\n";
    std::ofstream(dir.sub("config.json"))
        << R"({"retry": {"base_delay_ms": 5, "max_delay_ms": 50}, "session": {"snapshot_every_turns": 2},
               "hooks": [{"name": "allow-all", "event": "PreToolUse",
                          "command": "cat > /dev/null; echo '{\"decision\":\"allow\"}'"}]})";
  }

  std::vector<std::string> common() const {
    return {"--scenario", kScenario, "--config", dir.sub("config.json"), "--exec-log", exec()};
  }

  testing::ChildResult run(const std::string& faults = "") {
    std::vector<std::string> args = {"--home",    path(), "run",         "go",
                                     "--session", "s",    "--workspace", dir.sub("ws")};
    for (auto& a : common()) args.push_back(a);
    if (!faults.empty()) {
      std::ofstream(dir.sub("plan.json")) << faults;
      args.insert(args.end(), {"--faults", dir.sub("plan.json")});
    }
    return testing::run_child(CARAPACE_BIN, args, log());
  }

  testing::ChildResult resume(const std::string& mode) {
    std::vector<std::string> args = {"--home", path(), "resume", "s", "--mode", mode};
    for (auto& a : common()) args.push_back(a);
    return testing::run_child(CARAPACE_BIN, args, log());
  }

  std::vector<Event> events() {
    std::unique_ptr<EventLog> log;
    CHECK_OK(
        EventLog::open(EventLog::Options{.path = path() + "/log", .mode = EventLog::Mode::kReader}, &log));
    std::vector<Event> out;
    CHECK_OK(log->read("s", 1, UINT64_MAX, &out));
    return out;
  }

  // Real executions per "<call> <tool>"; *idempotent, if given, gets the
  // calls whose tool's spec says it is idempotent (as the run recorded it).
  std::map<std::string, int> executions(std::set<std::string>* idempotent_calls = nullptr) {
    // Lines "<session> <call> <tool> <idempotent>", one per execution; a
    // recovery's "run again" verdict ("... again") is no execution.
    std::ifstream in(exec());
    std::map<std::string, int> runs;
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string session, call, tool, last;
      if (!(words >> session >> call >> tool >> last) || last == "again") continue;
      ++runs[call + " " + tool];
      if (last == "1" && idempotent_calls != nullptr) idempotent_calls->insert(call + " " + tool);
    }
    return runs;
  }
};

// The conversation and the outcome (what a crash-free run must also end with).
std::string outcome_of(const std::vector<Event>& events) {
  SessionState s;
  CHECK_OK(fold(events, &s));
  return s.messages_digest.hex() + "|" + s.final_answer + "|" + std::to_string(s.committed_turn) + "|" +
         std::to_string(s.tokens.input) + "|" + std::to_string(s.tool_calls);
}

const std::string& reference() {
  static const std::string outcome = [] {
    Home h;
    BOOST_REQUIRE(h.run().succeeded());
    return outcome_of(h.events());
  }();
  return outcome;
}

struct Point {
  const char* name;
  int nth;
};

std::ostream& operator<<(std::ostream& os, const Point& p) { return os << p.name << " #" << p.nth; }

// Occurrences chosen to land inside a turn, after some checkpoints.
const std::vector<Point> kPoints = {
    {"provider.before_request", 2},
    {"provider.after_response", 3},
    {"tool.before_exec", 3},
    {"tool.after_exec", 3},
    {"log.before_append", 12},
    {"log.after_append", 12},
    {"commit.before", 3},
    {"commit.after", 3},
    {"hook", 4},
};

struct Crash {
  std::vector<Event> before;  // the log at the crash
  RecoveredSession recovered;
};

Crash crash_at(Home& h, const Point& p) {
  testing::ChildResult r = h.run(R"({"faults": [{"point": ")" + std::string(p.name) +
                                 R"(", "action": "crash", "nth": )" + std::to_string(p.nth) + "}]}");
  BOOST_REQUIRE_MESSAGE(r.killed(),
                        "the run was not killed at " << p.name << ": " << testing::read_text(h.log()));
  Crash c;
  c.before = h.events();
  std::unique_ptr<EventLog> log;
  CHECK_OK(
      EventLog::open(EventLog::Options{.path = h.path() + "/log", .mode = EventLog::Mode::kReader}, &log));
  CHECK_OK(recover(*log, "s", RecoverOptions{}, &c.recovered));
  return c;
}

// What both modes promise.
void check_common(Home& h, const Crash& c, const std::vector<Event>& after, const std::string& mode) {
  std::unique_ptr<EventLog> log;
  CHECK_OK(
      EventLog::open(EventLog::Options{.path = h.path() + "/log", .mode = EventLog::Mode::kReader}, &log));
  VerifyReport report;
  CHECK_OK(verify_session(*log, "s", &report));
  for (const auto& i : report.issues)
    BOOST_ERROR("verify: seq " << i.seq << " " << i.kind << ": " << i.detail);
  // Nothing written before the crash changed: the log only grew.
  BOOST_REQUIRE(after.size() > c.before.size());
  for (size_t i = 0; i < c.before.size(); ++i) BOOST_TEST((after[i] == c.before[i]), "seq " << i + 1);
  SessionState s;
  CHECK_OK(fold(after, &s));
  BOOST_TEST((s.status == SessionStatus::kCompleted));
  BOOST_TEST(s.pending.empty());
  BOOST_TEST(s.resumes == 1u);
  bool resumed = false;
  for (const auto& e : after) {
    if (const auto* r = get_if<SessionResumed>(e)) {
      resumed = true;
      BOOST_TEST(r->mode == mode);
      BOOST_TEST(r->checkpoint_seq == c.recovered.committed.committed_seq);
      BOOST_TEST(r->pid > 0);
    }
  }
  BOOST_TEST(resumed);
}

}  // namespace

BOOST_DATA_TEST_CASE(step_mode_keeps_every_completed_step, data::make(kPoints), point) {
  Home h;
  Crash c = crash_at(h, point);
  BOOST_REQUIRE(h.resume("step").succeeded());
  std::vector<Event> after = h.events();
  check_common(h, c, after, "step");
  // No rollback: the interrupted turn's events stay in the fold.
  for (const auto& e : after) BOOST_TEST(e.type_name() != "turn.rolled_back");
  SessionState s;
  CHECK_OK(fold(after, &s));
  BOOST_TEST(s.rolled_back_turns == 0u);
  // A completed call never ran again; a call of a non-idempotent tool ran at most once.
  std::set<std::string> idempotent;
  std::map<std::string, int> runs = h.executions(&idempotent);
  for (const auto& [call, n] : runs) {
    if (!idempotent.count(call)) BOOST_TEST(n == 1, call << " ran " << n << " times");
  }
  std::set<std::string> completed_before;
  for (const auto& e : c.recovered.uncommitted) {
    if (const auto* t = get_if<ToolCompleted>(e)) completed_before.insert(t->call_id + " " + t->tool);
  }
  for (const auto& call : completed_before) BOOST_TEST(runs[call] == 1, call << " was done before the crash");
  bool interrupted = false;
  for (const auto& e : after) {
    if (const auto* t = get_if<ToolCompleted>(e); t != nullptr && t->interrupted) interrupted = true;
  }
  const std::string name = point.name;
  if (name == "tool.after_exec" || name == "tool.before_exec") {
    // write_file's intent was durable and its result lost. Whether it had
    // run (after_exec) or not (before_exec), the resume checks the file: it
    // holds the bytes (done, not written again) or it does not (written
    // now). Either way once, and the run ends as the crash-free run did.
    BOOST_TEST(!interrupted);
    BOOST_TEST(runs["call_3_1 write_file"] == 1);
    BOOST_TEST(outcome_of(after) == reference());
  }
  if (!interrupted) BOOST_TEST(outcome_of(after) == reference());
}

BOOST_DATA_TEST_CASE(turn_mode_rolls_back_and_ends_as_a_crash_free_run, data::make(kPoints), point) {
  Home h;
  Crash c = crash_at(h, point);
  BOOST_REQUIRE(h.resume("turn").succeeded());
  std::vector<Event> after = h.events();
  check_common(h, c, after, "turn");
  const auto& lost = c.recovered.uncommitted;
  std::vector<TurnRolledBack> rollbacks;
  for (const auto& e : after) {
    if (const auto* r = get_if<TurnRolledBack>(e)) rollbacks.push_back(*r);
  }
  if (lost.empty()) {
    BOOST_TEST(rollbacks.empty());  // the crash fell between turns
  } else {
    BOOST_REQUIRE(rollbacks.size() == 1u);
    BOOST_TEST(rollbacks[0].from_seq == lost.front().seq);
    BOOST_TEST(rollbacks[0].to_seq == lost.back().seq);
  }
  BOOST_TEST(outcome_of(after) == reference());  // the turn ran again, whole
  if (std::string(point.name) == "tool.after_exec") {
    BOOST_TEST(h.executions()["call_3_1 write_file"] == 2);  // turn mode re-executes: documented
  }
}

BOOST_AUTO_TEST_CASE(resume_refuses_what_it_cannot_resume_and_changes_nothing) {
  Home h;
  BOOST_REQUIRE(h.run().succeeded());
  std::vector<Event> before = h.events();
  testing::ChildResult done = h.resume("step");
  BOOST_TEST(done.exit_code() == 1);
  BOOST_TEST(testing::read_text(h.log()).find("session s has completed; there is nothing to resume") !=
             std::string::npos);
  BOOST_TEST((h.events() == before));

  testing::ChildResult unknown =
      testing::run_child(CARAPACE_BIN, {"--home", h.path(), "resume", "nobody"}, h.log());
  BOOST_TEST(unknown.exit_code() == 1);
  BOOST_TEST(testing::read_text(h.log()).find("no session 'nobody'") != std::string::npos);

  testing::ChildResult mode = testing::run_child(
      CARAPACE_BIN, {"--home", h.path(), "resume", "s", "--mode", "sideways", "--scenario", kScenario},
      h.log());
  BOOST_TEST(mode.exit_code() == 2);  // a wrong command line
  BOOST_TEST((h.events() == before));
}

BOOST_AUTO_TEST_CASE(resume_refuses_a_corrupt_log_and_changes_nothing) {
  Home h;
  crash_at(h, Point{"commit.before", 4});
  uint64_t last = h.events().size();
  auto raw_values = [&] {
    testing::RawDb raw(h.path() + "/log");
    std::vector<std::string> values;
    for (uint64_t seq = 1; seq <= last + 5; ++seq) {
      try {
        values.push_back(raw.get(kEventsFamily, keys::seq_key("s", seq)));
      } catch (const std::exception&) {
        values.push_back("<absent>");
      }
    }
    return values;
  };
  {
    testing::RawDb raw(h.path() + "/log");
    std::string key = keys::seq_key("s", 5);
    std::string value = raw.get(kEventsFamily, key);
    value[value.size() / 2] ^= 0x08;
    raw.put(kEventsFamily, key, value);
  }
  std::vector<std::string> before = raw_values();
  testing::ChildResult r = h.resume("step");
  BOOST_TEST(r.exit_code() == 1);
  BOOST_TEST(testing::read_text(h.log()).find("session s seq 5: checksum mismatch") != std::string::npos,
             testing::read_text(h.log()));
  BOOST_TEST((raw_values() == before));  // not one byte written
  BOOST_TEST(h.resume("turn").exit_code() == 1);
  BOOST_TEST((raw_values() == before));
}

BOOST_AUTO_TEST_CASE(a_resume_checks_only_the_records_no_earlier_resume_checked) {
  Home h;
  Crash c = crash_at(h, Point{"commit.before", 4});
  uint64_t at_crash = c.before.size();
  BOOST_REQUIRE(h.resume("step").succeeded());
  auto meta_of = [&] {
    std::unique_ptr<EventLog> log;
    CHECK_OK(
        EventLog::open(EventLog::Options{.path = h.path() + "/log", .mode = EventLog::Mode::kReader}, &log));
    SessionMeta meta;
    CHECK_OK(log->get_meta("s", &meta));
    return meta;
  };
  BOOST_TEST(meta_of().verified_seq == at_crash);  // the resume checked every record there was
  // Damage a record that resume checked: the next resume does not read it
  // again (the cost of a resume follows what is new), and verify, which
  // reads everything, names it.
  {
    testing::RawDb raw(h.path() + "/log");
    std::string key = keys::seq_key("s", 5);
    std::string value = raw.get(kEventsFamily, key);
    value[value.size() / 2] ^= 0x08;
    raw.put(kEventsFamily, key, value);
  }
  std::vector<std::string> args = {"--home", h.path(), "resume", "s", "--then", "One more thing."};
  for (auto& a : h.common()) args.push_back(a);
  testing::ChildResult again = testing::run_child(CARAPACE_BIN, args, h.log());
  // The scenario's spare reply answers the new message: the resume succeeds
  // without reading the damaged record.
  std::string said = testing::read_text(h.log());
  BOOST_TEST(said.find("checksum mismatch") == std::string::npos, said);
  BOOST_TEST(again.exit_code() == 0, said);
  testing::ChildResult verified = testing::run_child(CARAPACE_BIN, {"--home", h.path(), "verify", "s"}, h.log());
  BOOST_TEST(verified.exit_code() == 1);
  BOOST_TEST(testing::read_text(h.log()).find("seq 5") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_fork_of_a_forged_history_is_refused_and_writes_nothing) {
  Home h;
  BOOST_REQUIRE(h.run().succeeded());
  std::vector<Event> source = h.events();
  // Change what a tool returned in turn 1 and give the record a valid checksum:
  // only the checkpoint's state hash can tell.
  uint64_t forged = 0;
  for (const auto& e : source) {
    if (get_if<ToolCompleted>(e) != nullptr) {
      forged = e.seq;
      break;
    }
  }
  BOOST_REQUIRE(forged != 0u);
  {
    testing::RawDb raw(h.path() + "/log");
    std::string key = keys::seq_key("s", forged);
    Event e = source[forged - 1];
    std::get<ToolCompleted>(e.body).output = "forged output";
    std::string value;
    encode_record(key, e, &value);
    raw.put(kEventsFamily, key, value);
  }
  std::vector<std::string> fork_args = {"--home", h.path(), "fork", "s", "--at-turn", "2", "--session", "f"};
  for (auto& a : h.common()) fork_args.push_back(a);
  testing::ChildResult forked = testing::run_child(CARAPACE_BIN, fork_args, h.log());
  BOOST_TEST(forked.exit_code() == 1);
  std::string said = testing::read_text(h.log());
  BOOST_TEST(said.find("session s does not verify up to turn 2") != std::string::npos, said);
  BOOST_TEST(said.find("hashes to") != std::string::npos, said);
  std::unique_ptr<EventLog> log;
  CHECK_OK(
      EventLog::open(EventLog::Options{.path = h.path() + "/log", .mode = EventLog::Mode::kReader}, &log));
  uint64_t last = 0;
  CHECK_OK(log->last_seq("f", &last));
  BOOST_TEST(last == 0u);  // nothing of the fork was written
  SessionMeta meta;
  BOOST_TEST(log->get_meta("f", &meta).is_not_found());
}

BOOST_AUTO_TEST_CASE(a_fork_leaves_its_source_intact_and_can_itself_be_resumed) {
  Home h;
  BOOST_REQUIRE(h.run().succeeded());
  std::vector<Event> source = h.events();
  std::vector<std::string> fork_args = {"--home", h.path(),    "fork", "s",      "--at-turn",
                                        "2",      "--session", "f",    "--task", "Now summarize."};
  for (auto& a : h.common()) fork_args.push_back(a);
  // Crash the fork as it runs, then resume it.
  std::ofstream(h.dir.sub("fork-plan.json"))
      << R"({"faults": [{"point": "tool.after_exec", "action": "crash", "nth": 1}]})";
  fork_args.insert(fork_args.end(), {"--faults", h.dir.sub("fork-plan.json")});
  testing::ChildResult forked = testing::run_child(CARAPACE_BIN, fork_args, h.log());
  BOOST_TEST((h.events() == source));  // the source is untouched
  std::unique_ptr<EventLog> log;
  CHECK_OK(
      EventLog::open(EventLog::Options{.path = h.path() + "/log", .mode = EventLog::Mode::kReader}, &log));
  std::vector<Event> fork_events;
  CHECK_OK(log->read("f", 1, UINT64_MAX, &fork_events));
  BOOST_REQUIRE(!fork_events.empty());
  const auto& started = std::get<SessionStarted>(fork_events[0].body);
  BOOST_TEST(started.parent_session == "s");
  BOOST_TEST(started.parent_turn == 2u);
  // The fork's history is the source's up to the end of turn 2.
  std::vector<CheckpointEntry> checkpoints;
  CHECK_OK(log->checkpoints("s", &checkpoints));
  uint64_t at = 0;
  for (const auto& c : checkpoints) {
    if (c.turn == 2 && at == 0) at = c.seq;
  }
  BOOST_TEST(started.parent_seq == at);
  SessionState source_at;
  CHECK_OK(
      fold(std::vector<Event>(source.begin(), source.begin() + static_cast<std::ptrdiff_t>(at)), &source_at));
  Folder fork_fold;
  SessionState fork_at;
  for (const auto& e : fork_events) {
    CHECK_OK(fork_fold.add(e));
    if (fork_fold.committed().committed_turn == 2 && fork_at.last_seq == 0) fork_at = fork_fold.committed();
  }
  BOOST_TEST((fork_at.messages == source_at.messages));
  // Copied events keep their time; the fork's first checkpoint is the source's turn 0.
  BOOST_TEST(fork_events[0].ts_us == source[0].ts_us);
  BOOST_TEST(fork_events[1].ts_us == source[1].ts_us);
  log.reset();
  if (forked.killed()) {
    std::vector<std::string> resume_args = {"--home", h.path(), "resume", "f"};
    for (auto& a : h.common()) resume_args.push_back(a);
    BOOST_TEST(testing::run_child(CARAPACE_BIN, resume_args, h.log()).succeeded());
  } else {
    BOOST_TEST(forked.succeeded(), testing::read_text(h.log()));
  }
  BOOST_TEST((h.events() == source));
}
