// Fault plans: their triggers, and what each fault does to a live session
// (on CAF's deterministic scheduler, virtual time for delays and hangs).
#define BOOST_TEST_MODULE fault_test
#include <boost/test/unit_test.hpp>

#include "replay/fault_plan.h"
#include "tests/support/virtual_runtime.h"

using namespace carapace;
using namespace std::chrono_literals;
using carapace::testing::VirtualRuntime;

namespace {

std::shared_ptr<FaultPlan> plan(const std::string& json) {
  std::shared_ptr<FaultPlan> p;
  CHECK_OK(FaultPlan::parse(json, "plan.json", &p));
  return p;
}

FaultSite at(FaultPoint point, std::string name = "", std::string event = "") {
  return FaultSite{.point = point, .session = "s", .name = std::move(name), .event_type = std::move(event)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plans)

BOOST_AUTO_TEST_CASE(nth_fires_once_on_the_nth_match_only) {
  auto p =
      plan(R"({"faults": [{"point": "tool.before_exec", "action": "error", "tool": "^shell$", "nth": 2}]})");
  BOOST_TEST(!p->check(at(FaultPoint::kToolBeforeExec, "shell")));
  BOOST_TEST(!p->check(at(FaultPoint::kToolBeforeExec, "read_file")));  // does not match: not counted
  BOOST_TEST(!p->check(at(FaultPoint::kToolAfterExec, "shell")));       // another point
  BOOST_TEST((p->check(at(FaultPoint::kToolBeforeExec, "shell")).action == FaultAction::kError));
  BOOST_TEST(!p->check(at(FaultPoint::kToolBeforeExec, "shell")));
  BOOST_TEST((p->fired() == std::vector<uint64_t>{1}));
}

BOOST_AUTO_TEST_CASE(event_filters_and_every_match) {
  auto p = plan(
      R"({"faults": [{"point": "log.before_append", "action": "delay", "delay_ms": 5, "event": "tool.completed"}]})");
  BOOST_TEST(!p->check(at(FaultPoint::kLogBeforeAppend, "", "tool.requested")));
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(p->check(at(FaultPoint::kLogBeforeAppend, "", "tool.completed")).delay_ms == 5u);
}

BOOST_AUTO_TEST_CASE(probability_is_seeded_and_reproducible) {
  auto draw = [](uint64_t seed) {
    auto p = plan(R"({"seed": )" + std::to_string(seed) +
                  R"(, "faults": [{"point": "hook", "action": "error", "probability": 0.3}]})");
    std::string pattern;
    for (int i = 0; i < 200; ++i) pattern += p->check(at(FaultPoint::kHook, "h")) ? '1' : '0';
    return pattern;
  };
  std::string a = draw(7);
  BOOST_TEST(a == draw(7));
  BOOST_TEST(a != draw(8));
  auto ones = std::count(a.begin(), a.end(), '1');
  BOOST_TEST(ones > 30);
  BOOST_TEST(ones < 90);
}

BOOST_AUTO_TEST_CASE(the_first_rule_that_fires_wins) {
  auto p =
      plan(R"({"faults": [{"point": "provider.before_request", "action": "error", "status": 503, "nth": 2},
                               {"point": "provider.before_request", "action": "delay", "delay_ms": 9}]})");
  BOOST_TEST((p->check(at(FaultPoint::kProviderBeforeRequest)).action == FaultAction::kDelay));
  Fault second = p->check(at(FaultPoint::kProviderBeforeRequest));
  BOOST_TEST((second.action == FaultAction::kError));
  BOOST_TEST(second.http_status == 503u);
}

BOOST_AUTO_TEST_CASE(bad_plans_name_the_rule_and_the_key) {
  struct Case {
    std::string text, message;
  };
  std::vector<Case> cases = {
      {"{}", "plan.json: the file: needs a \"faults\" array"},
      {R"({"faults": [{"point": "tool.somewhere", "action": "crash"}]})",
       "plan.json: faults[0].point: \"tool.somewhere\" is not a fault point"},
      {R"({"faults": [{"point": "hook", "action": "explode"}]})",
       "plan.json: faults[0].action: \"explode\" is not"},
      {R"({"faults": [{"point": "log.after_append", "action": "error"}]})",
       "plan.json: fault rule 1: log.after_append cannot error"},
      {R"({"faults": [{"point": "tool.after_exec", "action": "hang"}]})",
       "plan.json: fault rule 1: tool.after_exec cannot hang"},
      {R"({"faults": [{"point": "hook", "action": "error", "probability": 2}]})",
       "plan.json: fault rule 1: probability must be between 0 and 1"},
      {R"({"faults": [{"point": "hook", "action": "error", "tool": "("}]})",
       "plan.json: fault rule 1: the tool or hook name \"(\" is not a valid regular expression: missing )"},
      {R"({"faults": [{"point": "hook", "action": "error", "color": "red"}]})",
       "plan.json: faults[0]: unknown key \"color\""},
      {R"({"faults": [{"point": "log.after_append", "action": "crash", "event": "nonsense"}]})",
       "plan.json: faults[0].event: \"nonsense\" is not an event type"},
      {R"({"faults": [{"point": "log.after_append", "action": "crash", "nth": 0}]})",
       "plan.json: faults[0].nth: counts from 1"},
      {R"({"faults": [{"point": "provider.before_request", "action": "error", "status": 200}]})",
       "plan.json: faults[0].status: must be an HTTP error status, 400 to 599, not 200"},
  };
  for (const auto& c : cases) {
    std::shared_ptr<FaultPlan> p;
    Status s = FaultPlan::parse(c.text, "plan.json", &p);
    BOOST_TEST(s.is_invalid_argument(), c.text);
    BOOST_TEST(s.message().find(c.message) == 0u, s.message() << " | expected: " << c.message);
  }
  BOOST_TEST(FaultPlan::load("/nonexistent/plan.json", nullptr).is_not_found());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

struct Fixture : VirtualRuntime {
  std::vector<std::string> calls;
  Fixture() { CHECK_OK(tools->add(testing::echo_tool(&calls))); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(faults_in_a_session, Fixture)

BOOST_AUTO_TEST_CASE(an_injected_provider_error_is_recorded_and_retried) {
  inject(plan(
      R"({"faults": [{"point": "provider.before_request", "action": "error", "status": 503, "retry_after_ms": 250, "nth": 1}]})"));
  scenario(R"({"replies": [{"text": "answer"}]})");
  SessionActor s = start("s1", "go");
  auto injected = of_type<FaultInjected>();
  BOOST_REQUIRE(injected.size() == 1u);
  BOOST_TEST(injected[0].point == "provider.before_request");
  BOOST_TEST(injected[0].action == "error");
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].http_status == 503u);
  BOOST_TEST(failed[0].retry_delay_ms == 250u);
  advance(250ms);
  BOOST_TEST(outcome(s).final_answer == "answer");  // the scenario's entry was not used up by the fault
}

BOOST_AUTO_TEST_CASE(a_malformed_stream_after_the_response_loses_the_answer_and_is_retried) {
  inject(
      plan(R"({"faults": [{"point": "provider.after_response", "action": "malformed_stream", "nth": 1}]})"));
  scenario(R"({"replies": [{"text": "first"}, {"text": "second"}]})");
  SessionActor s = start("s1", "go");
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].error == "malformed response stream (injected fault)");
  BOOST_TEST((failed[0].category == ErrorCategory::kTransient));
  advance(std::chrono::milliseconds(failed[0].retry_delay_ms));
  BOOST_TEST(outcome(s).final_answer == "second");
}

BOOST_AUTO_TEST_CASE(a_provider_delay_is_virtual_and_recorded) {
  inject(plan(R"({"faults": [{"point": "provider.before_request", "action": "delay", "delay_ms": 5000}]})"));
  scenario(R"({"replies": [{"text": "late"}]})");
  SessionActor s = start("s1", "go");
  BOOST_TEST(of_type<LlmResponded>().empty());
  advance(4999ms);
  BOOST_TEST(of_type<LlmResponded>().empty());
  advance(1ms);
  BOOST_TEST(outcome(s).final_answer == "late");
  BOOST_TEST(of_type<LlmResponded>()[0].latency_ms == 5000u);
  BOOST_TEST(of_type<FaultInjected>()[0].action == "delay");
}

BOOST_AUTO_TEST_CASE(a_provider_hang_ends_in_the_provider_timeout) {
  inject(plan(R"({"faults": [{"point": "provider.before_request", "action": "hang", "nth": 1}]})"));
  scenario(R"({"replies": [{"text": "after the hang"}]})");
  SessionActor s = start("s1", "go", SessionSettings{.provider_timeout_ms = 30000});
  advance(30s);
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].error.find("no reply from the provider") == 0u, failed[0].error);
  advance(std::chrono::milliseconds(failed[0].retry_delay_ms));
  BOOST_TEST(outcome(s).final_answer == "after the hang");
}

BOOST_AUTO_TEST_CASE(tool_errors_and_hangs_become_results_the_model_sees) {
  inject(
      plan(R"({"faults": [{"point": "tool.before_exec", "action": "error", "message": "disk full", "nth": 1},
                             {"point": "tool.before_exec", "action": "hang", "nth": 2}]})"));
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {}}, {"name": "echo", "args": {}},
                                           {"name": "echo", "args": {"text": "third"}}]},
                           {"text": "ok"}]})");
  SessionActor s = start("s1", "go", SessionSettings{.tool_timeout_ms = 60000});
  advance(60s);                                         // its stop token is tripped
  advance(std::chrono::milliseconds(kToolGraceMs));     // and the grace is over
  BOOST_TEST(outcome(s).final_answer == "ok");
  auto done = of_type<ToolCompleted>();
  BOOST_REQUIRE(done.size() == 3u);
  BOOST_TEST(done[0].output == "tool echo failed: disk full");
  BOOST_TEST(done[1].timed_out);
  BOOST_TEST(done[1].output.find("The tool gave no result within 60000 ms, nor within 2000 ms after it was asked "
                                 "to stop; it was abandoned") == 0u,
             done[1].output);
  BOOST_TEST(!done[2].is_error);
  BOOST_TEST(calls.size() == 1u);                     // only the third really ran
  BOOST_TEST(of_type<FaultInjected>().size() == 1u);  // the hang's note never came back with a result
}

BOOST_AUTO_TEST_CASE(an_injected_storage_error_stops_the_session_and_says_why) {
  inject(
      plan(R"({"faults": [{"point": "log.before_append", "action": "error", "event": "llm.responded"}]})"));
  scenario(R"({"replies": [{"text": "never recorded"}]})");
  SessionActor s = start("s1", "go");
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kFailed));
  BOOST_TEST(o.stop_reason == "storage_error");
  BOOST_TEST(o.error.find("injected fault at log.before_append") != std::string::npos, o.error);
  for (const auto& e : logged("s1")) BOOST_TEST(e.type_name() != "llm.responded");
}

BOOST_AUTO_TEST_CASE(a_delayed_append_records_the_fault_in_the_same_step) {
  inject(plan(
      R"({"faults": [{"point": "log.before_append", "action": "delay", "delay_ms": 1, "event": "llm.responded"}]})"));
  scenario(R"({"replies": [{"text": "fine"}]})");
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "fine");
  std::vector<Event> log = logged("s1");
  auto it =
      std::find_if(log.begin(), log.end(), [](const Event& e) { return e.type_name() == "fault.injected"; });
  BOOST_REQUIRE(it != log.end());
  BOOST_TEST(std::next(it)->type_name() == "llm.responded");
}

BOOST_AUTO_TEST_CASE(an_injected_hook_failure_is_skipped_and_recorded) {
  inject(plan(R"({"faults": [{"point": "hook", "action": "error", "hook": "^guard$"}]})"));
  CHECK_OK(hooks->add(
      HookDefinition{.name = "guard", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kDeny};
                     }}));
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {}}]}, {"text": "ran anyway"}]})");
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "ran anyway");
  BOOST_TEST(calls.size() == 1u);  // the failed hook's deny never counted
  auto injected = of_type<FaultInjected>();
  BOOST_REQUIRE(injected.size() == 1u);
  BOOST_TEST(injected[0].point == "hook");
  BOOST_TEST(injected[0].action == "error");
  BOOST_TEST(injected[0].detail.find("hook guard: error") == 0u, injected[0].detail);
}

BOOST_AUTO_TEST_SUITE_END()
