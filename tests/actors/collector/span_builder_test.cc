// SpanBuilder on hand-made event sequences: the tree, the ids, the links.
#include <boost/test/unit_test.hpp>

#include "actors/collector/span_builder.h"
#include "tests/support/session_builder.h"

using namespace carapace;
using carapace::testing::SessionBuilder;

namespace {

const Span& find(const std::vector<Span>& spans, const std::string& name, int nth = 0) {
  for (const auto& s : spans) {
    if (s.name == name && nth-- == 0) return s;
  }
  BOOST_FAIL("no span named " << name);
  return spans.front();
}

std::string tree(const std::vector<Span>& spans) {
  std::map<std::string, std::string> names;
  std::string out;
  for (const auto& s : spans) {
    names[s.span_id] = s.name;
    out += s.name + " <- " + (s.parent_id.empty() ? "-" : names[s.parent_id]) + " [" + s.status + "]\n";
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(span_builder)

BOOST_AUTO_TEST_CASE(a_turn_nests_its_model_call_and_tool_calls_under_the_session) {
  SessionBuilder b;
  b.start().turn({"shell", "read_file"});
  auto spans = build_spans("s1", b.events());
  BOOST_TEST(tree(spans) ==
             "session s1 <- - [open]\n"
             "turn 1 <- session s1 [ok]\n"
             "llm attempt 1 <- turn 1 [ok]\n"
             "tool shell <- turn 1 [ok]\n"
             "tool read_file <- turn 1 [ok]\n");
  const Span& root = spans[0];
  BOOST_TEST(root.trace_id == trace_id_of("s1"));
  BOOST_TEST(root.span_id == span_id_of("s1", 1, "session"));
  BOOST_TEST(root.attrs["tokens_in"] == 100);
  BOOST_TEST(root.attrs["tool_calls"] == 2);
  BOOST_TEST(root.attrs["turns"] == 1);
  const Span& llm = find(spans, "llm attempt 1");
  BOOST_TEST(llm.attrs["model"] == "m1");
  BOOST_TEST(llm.attrs["tokens_out"] == 20);
  BOOST_TEST(llm.attrs["cache_read"] == 50);
  BOOST_TEST(llm.attrs["tool_names"] == "shell,read_file");
  BOOST_TEST(llm.span_id == span_id_of("s1", llm.open_seq, "llm"));
  for (const auto& s : spans) BOOST_TEST(s.trace_id == root.trace_id);
  // The same events give the same ids, whoever builds them.
  BOOST_TEST((build_spans("s1", b.events()) == spans));
  BOOST_TEST(build_spans("s2", b.events())[0].span_id != root.span_id);
}

BOOST_AUTO_TEST_CASE(spans_built_one_event_at_a_time_match_and_report_their_changes) {
  SessionBuilder b;
  b.start().turn().turn({"a", "b"});
  SpanBuilder inc("s1");
  std::map<std::string, Span> latest;
  for (const auto& e : b.events()) {
    inc.add(e);
    inc.add(e);  // a second delivery changes nothing
    for (auto& s : inc.take_changed()) latest[s.span_id] = s;
  }
  auto whole = build_spans("s1", b.events());
  BOOST_TEST(inc.spans() == whole);
  BOOST_TEST(latest.size() == whole.size());
  for (const auto& s : whole) BOOST_TEST((latest[s.span_id] == s));
  BOOST_TEST(inc.take_changed().empty());
}

BOOST_AUTO_TEST_CASE(each_retry_is_an_attempt_span_of_its_own) {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmFailed{.turn = 1, .attempt = 1, .http_status = 503, .error = "overloaded",
                  .category = ErrorCategory::kTransient, .will_retry = true, .retry_delay_ms = 250});
  b.add(LlmRequested{.turn = 1, .attempt = 2, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 2, .text = "done", .usage = {10, 2, 0, 0}});
  b.add(SessionCompleted{"done", "final_answer"});
  b.commit();
  auto spans = build_spans("s1", b.events());
  BOOST_TEST(tree(spans) ==
             "session s1 <- - [completed]\n"
             "turn 1 <- session s1 [ok]\n"
             "llm attempt 1 <- turn 1 [error]\n"
             "llm attempt 2 <- turn 1 [ok]\n");
  const Span& first = find(spans, "llm attempt 1");
  BOOST_TEST(first.attrs["http_status"] == 503);
  BOOST_TEST(first.attrs["will_retry"] == true);
  BOOST_TEST(first.attrs["retry_delay_ms"] == 250);
  BOOST_TEST(find(spans, "turn 1").attrs["retries"] == 1);
  BOOST_TEST(spans[0].attrs["retries"] == 1);
  BOOST_TEST(spans[0].attrs["stop_reason"] == "final_answer");
}

BOOST_AUTO_TEST_CASE(a_resume_after_a_crash_links_to_the_call_the_crash_cut_short) {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 1, .tool_calls = {{"c1", "shell", JsonText{"{}"}}}});
  b.add(HookDecided{.hook_event = "PreToolUse", .hook_name = "guard", .decision = "allow", .tool_call_id = "c1"});
  b.add(ToolRequested{"c1", "shell", JsonText{"{}"}});
  const uint64_t crashed_after = b.next_seq() - 1;
  b.add(SessionResumed{.checkpoint_seq = 3, .checkpoint_turn = 0, .mode = "step", .pid = 42});
  b.add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "lost", .is_error = true, .interrupted = true});
  b.commit();
  auto spans = build_spans("s1", b.events());
  BOOST_TEST(tree(spans) ==
             "session s1 <- - [open]\n"
             "turn 1 <- session s1 [ok]\n"
             "llm attempt 1 <- turn 1 [ok]\n"
             "tool shell <- turn 1 [interrupted]\n"
             "hook PreToolUse guard <- tool shell [ok]\n"
             "resume (step) <- session s1 [ok]\n");
  const Span& tool = find(spans, "tool shell");
  const Span& resume = find(spans, "resume (step)");
  BOOST_TEST(resume.attrs["crashed_after_seq"] == crashed_after);
  BOOST_TEST(resume.attrs["after_crash"] == true);
  BOOST_REQUIRE(resume.links.size() == 1u);
  BOOST_TEST(resume.links[0].span_id == tool.span_id);
  BOOST_TEST(resume.links[0].reason == "resumed_after_crash");
  BOOST_REQUIRE(tool.events.size() == 1u);
  BOOST_TEST(tool.events[0].name == "crash");
  BOOST_TEST(tool.events[0].attrs["after_seq"] == crashed_after);
  BOOST_TEST(spans[0].attrs["resumes"] == 1);
}

BOOST_AUTO_TEST_CASE(a_stopped_session_ends_stopped_and_its_resume_is_no_crash) {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(SessionStopped{.reason = "SIGTERM", .pid = 7});
  auto stopped = build_spans("s1", b.events());
  BOOST_TEST(tree(stopped) ==
             "session s1 <- - [stopped]\n"
             "turn 1 <- session s1 [open]\n"
             "llm attempt 1 <- turn 1 [stopped]\n");
  BOOST_TEST(!stopped[0].open());
  BOOST_TEST(stopped[0].attrs["stop_reason"] == "SIGTERM");
  BOOST_TEST(stopped[0].attrs["stops"] == 1);
  const Span& call = find(stopped, "llm attempt 1");
  BOOST_REQUIRE(call.events.size() == 1u);
  BOOST_TEST(call.events[0].name == "stopped");
  BOOST_TEST(call.events[0].attrs["reason"] == "SIGTERM");

  // Resumed: the session is open again, and the resume is not after a crash.
  b.add(SessionResumed{.checkpoint_seq = 3, .checkpoint_turn = 0, .mode = "step", .pid = 8});
  b.add(LlmRequested{.turn = 1, .attempt = 2, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 2, .text = "done"});
  b.commit();
  auto spans = build_spans("s1", b.events());
  BOOST_TEST(tree(spans) ==
             "session s1 <- - [open]\n"
             "turn 1 <- session s1 [ok]\n"
             "llm attempt 1 <- turn 1 [stopped]\n"
             "resume (step) <- session s1 [ok]\n"
             "llm attempt 2 <- turn 1 [ok]\n");
  const Span& resume = find(spans, "resume (step)");
  BOOST_TEST(resume.attrs["after_crash"] == false);
  BOOST_TEST(resume.attrs["after_stop"] == true);
  BOOST_TEST(!resume.attrs.contains("crashed_after_seq"));
  BOOST_TEST(resume.links.empty());
  BOOST_TEST(!spans[0].attrs.contains("stop_reason"));
}

BOOST_AUTO_TEST_CASE(a_turn_rolled_back_on_resume_is_marked_and_its_calls_closed) {
  SessionBuilder start;
  start.start();
  std::vector<Event> events = start.events();  // raw: the builder's plain fold refuses a rollback
  auto push = [&](EventBody body) {
    events.push_back(Event{events.back().seq + 1, events.back().ts_us + 1000, std::move(body)});
  };
  const uint64_t from = events.back().seq + 1;
  push(TurnStarted{1});
  push(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  const uint64_t to = events.back().seq;
  // A resume in turn mode writes the rollback, then session.resumed.
  push(TurnRolledBack{.from_seq = from, .to_seq = to, .turn = 1, .reason = "resumed in turn mode"});
  push(SessionResumed{.checkpoint_seq = 3, .mode = "turn"});
  push(TurnStarted{1});
  push(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  push(LlmResponded{.turn = 1, .attempt = 1, .text = "ok"});
  push(TurnCommitted{.turn = 1});
  auto spans = build_spans("s1", events);
  BOOST_TEST(tree(spans) ==
             "session s1 <- - [open]\n"
             "turn 1 <- session s1 [rolled_back]\n"
             "llm attempt 1 <- turn 1 [rolled_back]\n"
             "resume (turn) <- session s1 [ok]\n"
             "turn 1 <- session s1 [ok]\n"
             "llm attempt 1 <- turn 1 [ok]\n");
  BOOST_TEST(spans[0].attrs["rollbacks"] == 1);
  BOOST_TEST(find(spans, "resume (turn)").links[0].span_id == find(spans, "llm attempt 1").span_id);
  BOOST_TEST(find(spans, "resume (turn)").attrs["crashed_after_seq"] == to);
}

BOOST_AUTO_TEST_CASE(a_fork_links_to_its_parents_turn_span_at_the_fork_point) {
  SessionBuilder parent;
  parent.start().turn().turn();
  auto parent_spans = build_spans("p", parent.events());
  const Span& parent_turn2 = find(parent_spans, "turn 2");
  // The fork's log copies the parent's up to its turn-2 checkpoint.
  std::vector<Event> fork = parent.events();
  auto* started = std::get_if<SessionStarted>(&fork[0].body);
  started->parent_session = "p";
  started->parent_turn = 2;
  started->parent_seq = fork.back().seq;
  fork.push_back(Event{fork.back().seq + 1, fork.back().ts_us + 1, UserMessage{"another way"}});
  auto spans = build_spans("f", fork);
  BOOST_REQUIRE(spans[0].links.size() == 1u);
  const SpanLink& link = spans[0].links[0];
  BOOST_TEST(link.reason == "fork");
  BOOST_TEST(link.session == "p");
  BOOST_TEST(link.trace_id == parent_turn2.trace_id);
  BOOST_TEST(link.span_id == parent_turn2.span_id);
  BOOST_TEST(find(spans, "turn 1").attrs["copied_from_parent"] == true);
  BOOST_TEST(spans[0].attrs["parent_session"] == "p");
}

BOOST_AUTO_TEST_CASE(a_denied_call_has_its_hook_as_child_and_faults_and_trims_are_span_events) {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 1, .tool_calls = {{"c1", "shell", JsonText{"{\"command\":\"rm\"}"}}}});
  b.add(HookDecided{.hook_event = "PreToolUse", .hook_name = "guard", .decision = "deny", .reason = "no",
                    .tool_call_id = "c1"});
  b.add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "denied", .is_error = true});
  b.add(ContextTrimmed{.first_index = 1, .messages_removed = 2, .chars_before = 900, .chars_after = 300});
  b.add(FaultInjected{.point = "provider.before_request", .action = "error", .detail = "HTTP 503", .turn = 1});
  b.commit();
  auto spans = build_spans("s1", b.events());
  BOOST_TEST(tree(spans) ==
             "session s1 <- - [open]\n"
             "turn 1 <- session s1 [ok]\n"
             "llm attempt 1 <- turn 1 [ok]\n"
             "tool shell <- turn 1 [denied]\n"
             "hook PreToolUse guard <- tool shell [denied]\n");
  const Span& turn = find(spans, "turn 1");
  BOOST_REQUIRE(turn.events.size() == 2u);
  BOOST_TEST(turn.events[0].name == "context_trimmed");
  BOOST_TEST(turn.events[0].attrs["messages_removed"] == 2);
  BOOST_TEST(turn.events[1].name == "fault");
  BOOST_TEST(turn.events[1].attrs["point"] == "provider.before_request");
  BOOST_TEST(find(spans, "tool shell").attrs["denied_by"] == "guard");
}

BOOST_AUTO_TEST_CASE(spans_round_trip_through_json) {
  SessionBuilder b;
  b.start().turn({"shell"});
  for (const auto& s : build_spans("s1", b.events())) {
    Span back;
    BOOST_TEST(span_from_json(span_to_json(s), &back).ok());
    BOOST_TEST((back == s));
  }
  Span bad;
  BOOST_TEST(span_from_json(nlohmann::json{{"trace_id", 1}}, &bad).is_corruption());
}

BOOST_AUTO_TEST_SUITE_END()
