// The session actor on CAF's deterministic scheduler: the loop's steps in
// order, retries in virtual time, hooks, live tool registry, supervision.
#define BOOST_TEST_MODULE session_test
#include <boost/test/unit_test.hpp>

#include "actors/provider/retry_policy.h"
#include "replay/verify.h"
#include "tests/support/virtual_runtime.h"

using namespace carapace;
using namespace std::chrono_literals;
using carapace::testing::VirtualRuntime;

namespace {

std::vector<std::string> types(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(e.type_name());
  return out;
}

struct Fixture : VirtualRuntime {
  std::vector<std::string> calls;
  Fixture() { CHECK_OK(tools->add(testing::echo_tool(&calls))); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(session_loop, Fixture)

BOOST_AUTO_TEST_CASE(a_session_runs_its_turns_in_order_and_completes) {
  scenario(R"({"replies": [
      {"text": "calling echo", "tool_calls": [{"name": "echo", "args": {"text": "hi"}}]},
      {"text": "all done"}]})");
  SessionActor s = start("s1", "say hi");
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(o.final_answer == "all done");
  BOOST_TEST(o.stop_reason == "final_answer");
  BOOST_TEST(o.turns == 2u);
  BOOST_TEST((calls == std::vector<std::string>{R"({"text":"hi"})"}));
  std::vector<Event> written = logged("s1");
  BOOST_TEST((types(written) ==
              std::vector<std::string>{"session.started", "user.message", "turn.committed",  // opening
                                       "turn.started", "prompt.assembled", "llm.requested",
                                       "llm.responded",                                       // turn 1
                                       "tool.requested", "tool.completed", "turn.committed",  //
                                       "turn.started", "prompt.assembled", "llm.requested", "llm.responded",
                                       "session.completed", "turn.committed"}));
  BOOST_TEST((events == std::vector<Event>(written.begin() + 3,
                                           written.end())));  // subscribers heard every later event
  VerifyReport report;
  CHECK_OK(verify_session(log(), "s1", &report));
  BOOST_TEST(report.ok());
  // The second request carried the conversation so far.
  BOOST_REQUIRE(provider->requests.size() == 2u);
  BOOST_TEST(provider->requests[1].messages.size() == 3u);
  BOOST_TEST(provider->requests[1].messages[2].text == "echo: hi");
}

BOOST_AUTO_TEST_CASE(tool_calls_with_missing_or_repeated_ids_get_distinct_ones) {
  // The scripted provider names the unnamed second call call_1_2, which the
  // first call already has; a third repeats it; a fourth has no id.
  scenario(R"({"replies": [{"tool_calls": [
      {"id": "call_1_2", "name": "echo", "args": {"text": "a"}},
      {"name": "echo", "args": {"text": "b"}},
      {"id": "call_1_2", "name": "echo", "args": {"text": "c"}},
      {"id": "", "name": "echo", "args": {"text": "d"}}]}, {"text": "done"}]})");
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "done");
  std::vector<std::string> ids;
  for (const auto& r : of_type<ToolRequested>()) ids.push_back(r.call_id);
  BOOST_TEST((ids == std::vector<std::string>{"call_1_2", "call_1_3", "call_1_4", "call_1_5"}));
  BOOST_TEST(of_type<ToolCompleted>().size() == 4u);
  BOOST_TEST(calls.size() == 4u);
}

BOOST_AUTO_TEST_CASE(a_429_waits_exactly_its_retry_after) {
  scenario(R"({"replies": [{"error": {"status": 429, "retry_after_ms": 1500}}, {"text": "ok"}]})");
  SessionActor s = start("s1", "go");
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].http_status == 429u);
  BOOST_TEST((failed[0].category == ErrorCategory::kTransient));
  BOOST_TEST(failed[0].will_retry);
  BOOST_TEST(failed[0].retry_after_ms == 1500u);
  BOOST_TEST(failed[0].retry_delay_ms == 1500u);
  advance(1499ms);
  BOOST_TEST(of_type<LlmRequested>().size() == 1u);  // not yet
  advance(1ms);
  BOOST_TEST(of_type<LlmRequested>().size() == 2u);
  BOOST_TEST(of_type<LlmRequested>()[1].attempt == 2u);
  BOOST_TEST(outcome(s).final_answer == "ok");
}

BOOST_AUTO_TEST_CASE(server_errors_back_off_exponentially_with_recorded_jitter) {
  scenario(
      R"({"replies": [{"error": {"status": 500}}, {"error": {"status": 502}}, {"text": "third time"}]})");
  SessionActor s = start("s1", "go");
  RetryConfig config;
  for (uint32_t attempt = 1; attempt <= 2; ++attempt) {
    auto failed = of_type<LlmFailed>();
    BOOST_REQUIRE(failed.size() == attempt);
    uint64_t expected = decide_retry(config, ProviderFailure{.http_status = 500}, attempt, 4242, 1).delay_ms;
    BOOST_TEST(failed.back().retry_delay_ms == expected);
    BOOST_TEST(expected >= 500u * (1u << (attempt - 1)));
    BOOST_TEST(expected <= 1000u * (1u << (attempt - 1)));
    advance(std::chrono::milliseconds(expected - 1));
    BOOST_TEST(of_type<LlmRequested>().size() == attempt);
    advance(1ms);
    BOOST_TEST(of_type<LlmRequested>().size() == attempt + 1);
  }
  BOOST_TEST(outcome(s).final_answer == "third time");
}

BOOST_AUTO_TEST_CASE(a_401_fails_at_once_and_the_session_stays_usable) {
  scenario(
      R"({"replies": [{"error": {"status": 401, "message": "invalid api key"}}, {"text": "works now"}]})");
  SessionActor s = start("s1", "go");
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kFailed));
  BOOST_TEST(o.stop_reason == "provider_error");
  BOOST_TEST(o.error == "HTTP 401: invalid api key");
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST((failed[0].category == ErrorCategory::kPermanent));
  BOOST_TEST(!failed[0].will_retry);
  BOOST_TEST(of_type<LlmRequested>().size() == 1u);  // no retry
  // The user sends another message; the session goes on.
  caf::anon_send(s, UserInput{"try again"});
  run();
  SessionOutcome again = outcome(s);
  BOOST_TEST((again.status == SessionStatus::kCompleted));
  BOOST_TEST(again.final_answer == "works now");
  VerifyReport report;
  CHECK_OK(verify_session(log(), "s1", &report));
  BOOST_TEST(report.ok());
}

BOOST_AUTO_TEST_CASE(exhausted_retries_end_the_turn_and_the_session_stays_usable) {
  scenario(
      R"({"replies": [{"error": {"status": 503}}, {"error": {"status": 503}}, {"error": {"kind": "connection_reset"}},
                           {"error": {"status": 503}}, {"text": "back"}]})");
  SessionActor s = start("s1", "go");
  for (int i = 0; i < 3; ++i) advance(10s);  // each backoff is under 10 s
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kFailed));
  BOOST_TEST(o.error == "HTTP 503: HTTP 503 (gave up after 4 attempts)");
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 4u);
  BOOST_TEST(failed[2].error == "connection reset by peer");
  BOOST_TEST(!failed[3].will_retry);
  caf::anon_send(s, UserInput{"again"});
  run();
  BOOST_TEST(outcome(s).final_answer == "back");
}

BOOST_AUTO_TEST_CASE(a_message_sent_during_the_last_turn_is_durable_first_and_starts_another_run) {
  scenario(R"({"replies": [{"text": "first answer", "latency_ms": 500}, {"text": "second answer"}]})");
  SessionActor s = start("s1", "go");  // turn 1's model call is in flight
  caf::scoped_actor self{system(), true};
  self->send(s, UserInput{"and another"});
  run();
  InputAck ack;
  self->receive([&](InputAck& a) { ack = a; }, caf::after(std::chrono::seconds(0)) >> [] {});
  BOOST_TEST(ack.ok);
  // Acknowledged once it is in the log, queued: turn 1's conversation is untouched.
  std::vector<Event> written = logged("s1");
  BOOST_REQUIRE(get_if<UserMessage>(written.back()) != nullptr);
  BOOST_TEST(get_if<UserMessage>(written.back())->queued);
  SessionOutcome o = run_to_end(s);
  BOOST_TEST(o.final_answer == "second answer");  // the first run ended, and the message started a second
  BOOST_TEST(o.turns == 2u);
  BOOST_REQUIRE(provider->requests.size() == 2u);
  BOOST_TEST(provider->requests[0].messages.size() == 1u);
  BOOST_TEST(provider->requests[1].messages.back().text == "and another");
  VerifyReport report;
  CHECK_OK(verify_session(log(), "s1", &report));
  BOOST_TEST(report.ok());
}

BOOST_AUTO_TEST_CASE(max_turns_stops_the_loop) {
  scenario(R"({"replies": [
      {"tool_calls": [{"name": "echo", "args": {"text": "1"}}]},
      {"tool_calls": [{"name": "echo", "args": {"text": "2"}}]},
      {"tool_calls": [{"name": "echo", "args": {"text": "3"}}]}]})");
  SessionActor s = start("s1", "loop", SessionSettings{.max_turns = 2});
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kRunning));  // stopped, not completed
  BOOST_TEST(o.stop_reason == "max_turns");
  BOOST_TEST(o.final_answer.empty());
  BOOST_TEST(o.turns == 2u);
  BOOST_TEST(calls.size() == 2u);
  BOOST_TEST(of_type<SessionCompleted>().empty());
  auto stops = of_type<SessionStopped>();
  BOOST_REQUIRE(stops.size() == 1u);
  BOOST_TEST(stops[0].reason == "max_turns");
}

BOOST_AUTO_TEST_CASE(a_scenario_that_runs_out_fails_the_turn_naming_the_file) {
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {}}]}]})");
  SessionActor s = start("s1", "go");
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kFailed));
  BOOST_TEST(o.error == "scenario test.json has 1 replies; turn 2 attempt 1 asked for reply 2");
}

BOOST_AUTO_TEST_CASE(unknown_tools_and_bad_arguments_become_results_the_model_sees) {
  scenario(R"({"replies": [
      {"tool_calls": [{"name": "teleport", "args": {}}, {"name": "echo", "args": {"text": "still here"}}]},
      {"text": "ok"}]})");
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "ok");
  auto done = of_type<ToolCompleted>();
  BOOST_REQUIRE(done.size() == 2u);
  BOOST_TEST(done[0].is_error);
  BOOST_TEST(done[0].output == "There is no tool named teleport. The tools are: echo");
  BOOST_TEST(!done[1].is_error);
  BOOST_TEST(of_type<ToolRequested>().size() == 1u);  // the unknown tool was never requested
}

BOOST_AUTO_TEST_CASE(s13_7_a_tool_registered_between_turns_is_in_the_next_prompt) {
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {}}]}, {"text": "done"}]})");
  // A TurnStart hook registers a tool before turn 2's prompt is assembled.
  std::vector<std::string> more;
  CHECK_OK(hooks->add(
      HookDefinition{.name = "adder", .event = HookEvent::kTurnStart, .function = [&](const HookInput& in) {
                       if (in.turn == 2) tools->add(testing::echo_tool(&more, "grep")).ok();
                       return HookDecision{.decision = Decision::kContinue};
                     }}));
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "done");
  BOOST_REQUIRE(provider->requests.size() == 2u);
  BOOST_TEST(provider->requests[0].tools.size() == 1u);
  BOOST_TEST(provider->requests[1].tools.size() == 2u);
  BOOST_TEST(provider->requests[0].system_prompt.find("**grep**") == std::string::npos);
  BOOST_TEST(provider->requests[1].system_prompt.find("**grep**") != std::string::npos);
  auto prompts = of_type<PromptAssembled>();
  BOOST_TEST(prompts[0].segments[1].chars < prompts[1].segments[1].chars);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(session_hooks, Fixture)

BOOST_AUTO_TEST_CASE(pre_tool_use_deny_stops_the_call_and_tells_the_model) {
  scenario(
      R"({"replies": [{"tool_calls": [{"name": "echo", "args": {"text": "secret"}}]}, {"text": "ok"}]})");
  CHECK_OK(hooks->add(
      HookDefinition{.name = "allow-all", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kAllow};
                     }}));
  CHECK_OK(hooks->add(HookDefinition{.name = "no-secrets",
                                     .event = HookEvent::kPreToolUse,
                                     .matcher = "^echo$",
                                     .function = [](const HookInput& in) {
                                       bool secret = in.args.text.find("secret") != std::string::npos;
                                       return HookDecision{
                                           .decision = secret ? Decision::kDeny : Decision::kAllow,
                                           .reason = "it mentions a secret"};
                                     }}));
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "ok");
  BOOST_TEST(calls.empty());  // never ran
  auto decided = of_type<HookDecided>();
  BOOST_REQUIRE(decided.size() == 2u);  // every hook's decision is an event
  BOOST_TEST(decided[0].decision == "allow");
  BOOST_TEST(decided[1].decision == "deny");
  BOOST_TEST(decided[1].tool_call_id == "call_1_1");
  auto done = of_type<ToolCompleted>();
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].output == "The call was denied: it mentions a secret");
  BOOST_TEST(of_type<ToolRequested>().empty());
  BOOST_TEST(provider->requests[1].messages.back().text == "The call was denied: it mentions a secret");
}

BOOST_AUTO_TEST_CASE(modify_args_changes_what_the_tool_receives_and_deny_beats_it) {
  scenario(
      R"({"replies": [{"tool_calls": [{"name": "echo", "args": {"text": "a"}}, {"name": "echo", "args": {"text": "b"}}]},
                           {"text": "ok"}]})");
  CHECK_OK(hooks->add(
      HookDefinition{.name = "rewrite", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kModifyArgs,
                                           .modified_args = JsonText{R"({"text":"rewritten"})"}};
                     }}));
  CHECK_OK(hooks->add(HookDefinition{
      .name = "deny-b", .event = HookEvent::kPreToolUse, .function = [](const HookInput& in) {
        return HookDecision{.decision = in.args.text.find("\"b\"") != std::string::npos ? Decision::kDeny
                                                                                        : Decision::kAllow};
      }}));
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "ok");
  BOOST_TEST((calls == std::vector<std::string>{R"({"text":"rewritten"})"}));
  auto requested = of_type<ToolRequested>();
  BOOST_REQUIRE(requested.size() == 1u);
  BOOST_TEST(requested[0].args.text == R"({"text":"rewritten"})");  // the log has what really ran
  BOOST_TEST(of_type<ToolCompleted>()[1].is_error);
}

BOOST_AUTO_TEST_CASE(turn_end_stop_ends_the_session_after_the_turn) {
  scenario(
      R"({"replies": [{"text": "working", "tool_calls": [{"name": "echo", "args": {}}]}, {"text": "never"}]})");
  CHECK_OK(hooks->add(
      HookDefinition{.name = "budget", .event = HookEvent::kTurnEnd, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kStop, .reason = "budget spent"};
                     }}));
  SessionActor s = start("s1", "go");
  SessionOutcome o = outcome(s);
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(o.stop_reason == "hook_stop");
  BOOST_TEST(o.turns == 1u);
  BOOST_TEST(provider->requests.size() == 1u);
}

BOOST_AUTO_TEST_CASE(system_messages_reach_the_next_prompt_and_appended_context_the_conversation) {
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {}}]}, {"text": "done"}]})");
  CHECK_OK(hooks->add(
      HookDefinition{.name = "coach", .event = HookEvent::kPostToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kSystemMessage, .message = "Be brief."};
                     }}));
  CHECK_OK(hooks->add(
      HookDefinition{.name = "ci", .event = HookEvent::kPostToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kAppendContext, .message = "CI is red."};
                     }}));
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "done");
  BOOST_REQUIRE(provider->requests.size() == 2u);
  BOOST_TEST(provider->requests[0].system_prompt.find("Be brief.") == std::string::npos);
  BOOST_TEST(provider->requests[1].system_prompt.find("## Session instructions\nBe brief.") !=
             std::string::npos);
  BOOST_TEST(provider->requests[1].messages.back().text == "CI is red.");
  BOOST_TEST((provider->requests[1].messages.back().role == Role::kUser));
}

BOOST_AUTO_TEST_CASE(a_final_answer_goes_on_when_a_turn_end_hook_adds_context) {
  scenario(R"({"replies": [{"text": "done?"}, {"text": "now really done"}]})");
  int fired = 0;
  CHECK_OK(hooks->add(
      HookDefinition{.name = "tests-first", .event = HookEvent::kTurnEnd, .function = [&](const HookInput&) {
                       return ++fired == 1 ? HookDecision{.decision = Decision::kAppendContext,
                                                          .message = "The tests fail; fix them."}
                                           : HookDecision{.decision = Decision::kContinue};
                     }}));
  SessionActor s = start("s1", "go");
  SessionOutcome o = outcome(s);
  BOOST_TEST(o.final_answer == "now really done");
  BOOST_TEST(o.turns == 2u);
}

BOOST_AUTO_TEST_CASE(a_throwing_hook_is_skipped_and_the_session_goes_on) {
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {}}]}, {"text": "fine"}]})");
  CHECK_OK(hooks->add(HookDefinition{
      .name = "broken", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) -> HookDecision {
        throw std::runtime_error("bug");
      }}));
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "fine");
  BOOST_TEST(calls.size() == 1u);
  auto decided = of_type<HookDecided>();  // the failure is recorded, as SPEC §7 asks
  BOOST_REQUIRE(decided.size() == 1u);
  BOOST_TEST(decided[0].decision == "failed");
  BOOST_TEST(decided[0].hook_name == "broken");
  BOOST_TEST(decided[0].reason.find("threw: bug") != std::string::npos, decided[0].reason);
}

BOOST_AUTO_TEST_CASE(agent_start_and_stop_hooks_fire_once) {
  scenario(R"({"replies": [{"text": "answer"}]})");
  std::vector<std::string> seen;
  for (HookEvent e : {HookEvent::kAgentStart, HookEvent::kAgentStop, HookEvent::kTurnStart}) {
    CHECK_OK(hooks->add(HookDefinition{
        .name = std::string(hook_event_name(e)), .event = e, .function = [&seen](const HookInput& in) {
          seen.push_back(std::string(hook_event_name(in.event)) + ":" + in.text);
          return HookDecision{.decision = Decision::kContinue};
        }}));
  }
  SessionActor s = start("s1", "the task");
  BOOST_TEST(outcome(s).final_answer == "answer");
  BOOST_TEST((seen == std::vector<std::string>{"AgentStart:the task", "TurnStart:", "AgentStop:answer"}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(supervision, Fixture)

BOOST_AUTO_TEST_CASE(a_provider_actor_that_dies_mid_request_is_restarted_and_the_call_retried) {
  scenario(R"({"replies": [{"text": "asked twice", "latency_ms": 100}, {"text": "never asked"}]})");
  SessionActor s = start("s1", "go");
  // The worker holds the first reply for its 100 ms of simulated latency; it dies meanwhile.
  caf::scoped_actor self{system(), true};
  self->send(provider_host, worker_atom::value);
  run();
  ProviderActor worker;
  self->receive([&](ProviderActor& w) { worker = w; }, caf::after(std::chrono::seconds(0)) >> [] {});
  BOOST_REQUIRE(worker);
  caf::anon_send_exit(worker, caf::exit_reason::kill);
  run();
  auto failed = of_type<LlmFailed>();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].error.find("the provider actor stopped") == 0u);
  BOOST_TEST(failed[0].will_retry);
  BOOST_TEST(!failed[0].provider_answered);  // its answer never reached the log
  advance(std::chrono::milliseconds(failed[0].retry_delay_ms));
  advance(100ms);  // the new actor's simulated latency
  SessionOutcome o = outcome(s);
  BOOST_TEST(o.final_answer == "asked twice");  // the new actor was asked the same thing again
}

BOOST_AUTO_TEST_CASE(a_tool_actor_that_dies_is_restarted_and_serves_the_session) {
  scenario(R"({"replies": [{"tool_calls": [{"name": "echo", "args": {"text": "1"}}]},
                           {"tool_calls": [{"name": "echo", "args": {"text": "2"}}]}, {"text": "done"}]})");
  caf::scoped_actor self{system(), true};
  auto worker = [&] {
    self->send(tool_host, worker_atom::value, std::string("echo"));
    run();
    ToolActor w;
    self->receive([&](ToolActor& a) { w = a; }, caf::after(std::chrono::seconds(0)) >> [] {});
    return w;
  };
  ToolActor first = worker();
  BOOST_REQUIRE(first);
  // A PostToolUse hook kills the worker after turn 1's call: turn 2's call
  // must reach a new one.
  CHECK_OK(hooks->add(HookDefinition{
      .name = "saboteur", .event = HookEvent::kPostToolUse, .function = [&](const HookInput& in) {
        if (in.turn == 1) caf::anon_send_exit(first, caf::exit_reason::kill);
        return HookDecision{.decision = Decision::kContinue};
      }}));
  SessionActor s = start("s1", "go");
  BOOST_TEST(outcome(s).final_answer == "done");
  BOOST_TEST(calls.size() == 2u);
  ToolActor second = worker();
  BOOST_REQUIRE(second);
  BOOST_TEST((first.address() != second.address()));  // restarted
  for (const auto& done : of_type<ToolCompleted>()) BOOST_TEST(!done.is_error);
}

BOOST_AUTO_TEST_SUITE_END()
