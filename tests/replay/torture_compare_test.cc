// What torture compares between a resumed run and the crash-free one
// (replay/torture_compare.h): crash bookkeeping left out, the first
// difference named by seq, type, field and both values, the workspace.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "replay/torture_compare.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

namespace {

struct Log {
  std::vector<Event> events;
  Log& add(EventBody body) {
    events.push_back(Event{.seq = events.size() + 1, .ts_us = 1000 * static_cast<int64_t>(events.size()),
                           .body = std::move(body)});
    return *this;
  }
};

ToolCall call(const std::string& id, const std::string& command) {
  return ToolCall{.id = id, .name = "shell", .args = JsonText{"{\"command\":\"" + command + "\"}"}};
}

// The crash-free run: one turn, a shell call that appends and counts.
Log reference() {
  Log l;
  l.add(UserMessage{.text = "go"})
      .add(TurnStarted{.turn = 1})
      .add(LlmRequested{})
      .add(LlmResponded{.turn = 1, .attempt = 1, .text = "appending", .tool_calls = {call("c1", "append")}})
      .add(ToolRequested{.call_id = "c1", .tool = "shell", .args = JsonText{"{\"command\":\"append\"}"}})
      .add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "1\n", .duration_ms = 4})
      .add(TurnCommitted{.turn = 1, .last_seq = 7})
      .add(SessionCompleted{.final_answer = "done", .stop_reason = "final_answer"});
  return l;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(torture_compare)

BOOST_AUTO_TEST_CASE(a_resumed_run_with_the_same_conversation_does_not_differ) {
  // Crashed after the tool ran (its result lost), resumed in step mode: a
  // lost request, a resume, the turn's events written at other seqs, a
  // checkpoint at another seq with another hash, the answer at attempt 2.
  Log run;
  run.add(UserMessage{.text = "go"})
      .add(TurnStarted{.turn = 1})
      .add(LlmRequested{})
      .add(SessionResumed{.checkpoint_seq = 0, .mode = "step", .pid = 42})
      .add(LlmRequested{})
      .add(LlmResponded{.turn = 1, .attempt = 2, .text = "appending", .tool_calls = {call("c1", "append")},
                        .latency_ms = 30})
      .add(ToolRequested{.call_id = "c1", .tool = "shell", .args = JsonText{"{\"command\":\"append\"}"}})
      .add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "1\n", .duration_ms = 9})
      .add(TurnCommitted{.turn = 1, .last_seq = 9, .hash_version = 1})
      .add(SessionCompleted{.final_answer = "done", .stop_reason = "final_answer"});
  BOOST_TEST(!first_difference(reference().events, run.events, "step").has_value());
  // A follow-up recorded to wait is no message yet.
  run.events.insert(run.events.begin() + 1, Event{.seq = 99, .body = UserMessage{.text = "later", .follow_up = true}});
  BOOST_TEST(!first_difference(reference().events, run.events, "step").has_value());
}

BOOST_AUTO_TEST_CASE(turn_mode_running_an_append_twice_is_named_with_both_values_and_what_it_means) {
  // The turn ran, the process crashed before its checkpoint; the resume
  // rolled it back and ran it again: the append saw its first run.
  Log run;
  run.add(UserMessage{.text = "go"})
      .add(TurnStarted{.turn = 1})
      .add(LlmRequested{})
      .add(LlmResponded{.turn = 1, .attempt = 1, .text = "appending", .tool_calls = {call("c1", "append")}})
      .add(ToolRequested{.call_id = "c1", .tool = "shell", .args = JsonText{"{\"command\":\"append\"}"}})
      .add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "1\n"})
      .add(SessionResumed{.mode = "turn"})
      .add(TurnRolledBack{.from_seq = 2, .to_seq = 6, .turn = 1, .reason = "crash"})
      .add(TurnStarted{.turn = 1})
      .add(LlmRequested{})
      .add(LlmResponded{.turn = 1, .attempt = 1, .text = "appending", .tool_calls = {call("c1", "append")}})
      .add(ToolRequested{.call_id = "c1", .tool = "shell", .args = JsonText{"{\"command\":\"append\"}"}})
      .add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "2\n"})
      .add(TurnCommitted{.turn = 1, .last_seq = 13})
      .add(SessionCompleted{.final_answer = "done", .stop_reason = "final_answer"});
  auto d = first_difference(reference().events, run.events, "turn");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->kind == "event");
  BOOST_TEST(d->seq == 13u);  // the rolled-back run of the turn (seq 6, output 1) is not compared
  BOOST_TEST(d->reference_seq == 6u);
  BOOST_TEST(d->type == "tool.completed");
  BOOST_TEST(d->field == "output");
  BOOST_TEST(d->expected == "\"1\\n\"");
  BOOST_TEST(d->actual == "\"2\\n\"");
  BOOST_TEST(d->tool == "shell");
  BOOST_TEST(d->meaning.find("turn mode ran the calls") != std::string::npos, d->meaning);
  BOOST_TEST(d->meaning.find("`shell` is not idempotent") != std::string::npos, d->meaning);
  BOOST_TEST(d->describe().find("seq 13 tool.completed (crash-free run: seq 6): output is \"2\\n\", not \"1\\n\"") !=
                 std::string::npos,
             d->describe());
  // In step mode the same difference means something else.
  auto s = first_difference(reference().events, run.events, "step");
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->meaning.find("outside the log") != std::string::npos, s->meaning);
}

BOOST_AUTO_TEST_CASE(a_run_that_stops_short_or_goes_on_is_named) {
  Log shorter = reference();
  shorter.events.pop_back();
  auto d = first_difference(reference().events, shorter.events, "turn");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->kind == "length");
  BOOST_TEST(d->reference_seq == 8u);
  BOOST_TEST(d->type == "session.completed");
  BOOST_TEST(d->describe().find("ends before the crash-free run's seq 8 session.completed") != std::string::npos,
             d->describe());
  auto longer = first_difference(shorter.events, reference().events, "turn");
  BOOST_REQUIRE(longer.has_value());
  BOOST_TEST(longer->seq == 8u);
  BOOST_TEST(longer->describe().find("goes on past") != std::string::npos);
  // A different type at the same place.
  Log other = reference();
  other.events[7].body = SessionFailed{.error = "boom"};
  auto t = first_difference(reference().events, other.events, "turn");
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(t->field == "type");
  BOOST_TEST(t->describe().find("a session.failed where the crash-free run has a session.completed") !=
             std::string::npos, t->describe());
}

BOOST_AUTO_TEST_CASE(injected_faults_are_listed_in_order) {
  Log l;
  l.add(FaultInjected{.point = "provider.before_request", .action = "error", .detail = "HTTP 502 (/tmp/h/plan-1.json faults[1])", .turn = 1})
      .add(UserMessage{.text = "x"})
      .add(FaultInjected{.point = "tool.after_exec", .action = "delay", .detail = "delayed 5 ms", .turn = 1});
  auto f = injected_faults(l.events);
  BOOST_REQUIRE(f.size() == 2u);
  BOOST_TEST(f[0] == "provider.before_request error HTTP 502");
  BOOST_TEST(f[1] == "tool.after_exec delay delayed 5 ms");
}

BOOST_AUTO_TEST_CASE(workspaces_are_compared_file_by_file_and_line_by_line) {
  testing::TempDir dir;
  namespace fs = std::filesystem;
  for (const char* side : {"a", "b"}) {
    fs::create_directories(dir.sub(side) + "/src");
    std::ofstream(dir.sub(side) + "/src/main.c") << "int main() { return 0; }\n";
    std::ofstream(dir.sub(side) + "/changes.log") << "sed ran\ndebug on\n";
    fs::create_symlink("src/main.c", dir.sub(side) + "/link");
  }
  BOOST_TEST(!first_workspace_difference(dir.sub("a"), dir.sub("b"), "turn").has_value());

  std::ofstream(dir.sub("b") + "/changes.log", std::ios::app) << "debug on\n";
  auto d = first_workspace_difference(dir.sub("a"), dir.sub("b"), "turn");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->kind == "workspace");
  BOOST_TEST(d->field == "changes.log");
  BOOST_TEST(d->expected.find("line 3 missing") != std::string::npos, d->expected);
  BOOST_TEST(d->actual.find("line 3 \"debug on\"") != std::string::npos, d->actual);
  BOOST_TEST(d->meaning.find("turn mode") != std::string::npos);

  fs::remove(dir.sub("b") + "/changes.log");
  std::ofstream(dir.sub("b") + "/changes.log") << "sed ran\ndebug on\n";
  fs::remove(dir.sub("b") + "/link");
  fs::create_symlink("/etc/passwd", dir.sub("b") + "/link");  // compared by target, never followed
  d = first_workspace_difference(dir.sub("a"), dir.sub("b"), "step");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->field == "link");
  BOOST_TEST(d->actual == "a symbolic link to /etc/passwd");

  fs::remove(dir.sub("b") + "/link");
  fs::create_symlink("src/main.c", dir.sub("b") + "/link");
  std::ofstream(dir.sub("b") + "/src/extra.o") << "x";
  d = first_workspace_difference(dir.sub("a"), dir.sub("b"), "step");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->field == "src/extra.o");
  BOOST_TEST(d->expected == "nothing");
  BOOST_TEST(d->actual == "a file of 1 bytes");
}

BOOST_AUTO_TEST_SUITE_END()
