// Step-mode resume from every point a crash can leave a session at.
//
// For each scenario (tool calls and a denied one, a retry, a give-up, stop
// decisions at AgentStart, TurnStart and PostToolUse, a TurnEnd hook that
// adds context, a call with side effects), the crash-free run's log is cut
// after every step it wrote — every state a crash or a power loss can leave
// — and each prefix is resumed as `carapace resume --mode step` would. The
// resumed run must end exactly where the crash-free run ended: the same
// conversation, status, answer, stop reason, turns and counts. The one
// documented exception is a side-effecting call that was requested and never
// completed: the model is told its outcome is unknown, and it does not run
// again.
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <functional>
#include <map>
#include <set>

#include "replay/verify.h"
#include "tests/support/virtual_runtime.h"

using namespace carapace;
using carapace::testing::VirtualRuntime;

namespace {

// What a run ends with, leaving out the bookkeeping of crashes (resumes,
// lost requests, timestamps).
struct Ending {
  std::string messages;
  SessionStatus status = SessionStatus::kNew;
  std::string final_answer;
  std::string stop_reason;
  std::string last_error;
  uint64_t committed_turn = 0, tool_calls = 0, tool_errors = 0, llm_calls = 0, llm_failures = 0;
  uint64_t input_tokens = 0;
  bool operator==(const Ending&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Ending& e) {
  return os << "{" << e.messages << " " << status_name(e.status) << " '" << e.final_answer << "' "
            << e.stop_reason << " '" << e.last_error << "' turns " << e.committed_turn << " tools "
            << e.tool_calls << "/" << e.tool_errors << " llm " << e.llm_calls << "/" << e.llm_failures << "}";
}

Ending ending_of(const std::vector<Event>& events) {
  SessionState s;
  CHECK_OK(fold(events, &s));
  return Ending{.messages = s.messages_digest.hex(),
                .status = s.status,
                .final_answer = s.final_answer,
                .stop_reason = s.stop_reason,
                .last_error = s.status == SessionStatus::kFailed ? s.last_error : "",
                .committed_turn = s.committed_turn,
                .tool_calls = s.tool_calls,
                .tool_errors = s.tool_errors,
                .llm_calls = s.llm_calls,
                .llm_failures = s.llm_failures,
                .input_tokens = s.tokens.input};
}

// Whether a crash can leave the log ending after events[0, k): the events of
// one atomic write are never split.
bool crash_can_cut_at(const std::vector<Event>& events, size_t k) {
  if (k == 0 || k >= events.size()) return false;
  const Event& last = events[k - 1];
  const Event& next = events[k];
  // A checkpoint is written with the step before it (TurnEnd and AgentStop
  // decisions, session.completed / failed, a user message).
  if (std::holds_alternative<TurnCommitted>(next.body)) return false;
  if (std::holds_alternative<SessionCompleted>(last.body) || std::holds_alternative<SessionFailed>(last.body))
    return false;
  // Faults are recorded with what they affected; a PreToolUse decision with
  // the call's tool.requested or refusal; TurnEnd and AgentStop decisions
  // with the checkpoint.
  if (std::holds_alternative<FaultInjected>(last.body)) return false;
  if (const auto* h = get_if<HookDecided>(last)) {
    if (h->hook_event == "PreToolUse" || h->hook_event == "TurnEnd" || h->hook_event == "AgentStop") return false;
  }
  // A prompt and its context trim are one step.
  if (std::holds_alternative<ContextTrimmed>(next.body)) return false;
  return true;
}

// The call ids whose tool.requested is in `events` without a tool.completed.
std::set<std::string> unfinished_calls(const std::vector<Event>& events) {
  std::set<std::string> open;
  for (const auto& e : events) {
    if (const auto* r = get_if<ToolRequested>(e)) open.insert(r->call_id);
    if (const auto* c = get_if<ToolCompleted>(e)) open.erase(c->call_id);
  }
  return open;
}

struct Case {
  std::string name;
  std::string scenario;
  std::function<void(HookRegistry&)> hooks;
  SessionSettings settings;
  std::string expect_stop_reason;
  std::string message_while_busy;  // sent while the first model call is in flight
  std::vector<std::string> follow_ups;  // recorded with the task (run --then)
};

HookDecision decide(Decision d, std::string message = "") {
  return HookDecision{.decision = d, .reason = "test", .message = std::move(message)};
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back(Case{
      .name = "tools, a denied call and a retry",
      .scenario = R"({"replies": [
          {"error": {"status": 503}},
          {"text": "working", "tool_calls": [{"name": "echo", "args": {"text": "a"}},
                                             {"name": "side", "args": {"text": "b"}},
                                             {"name": "echo", "args": {"text": "forbidden"}}]},
          {"tool_calls": [{"name": "side", "args": {"text": "c"}}]},
          {"text": "done"}]})",
      .hooks =
          [](HookRegistry& h) {
            h.add(HookDefinition{.name = "gate", .event = HookEvent::kPreToolUse, .function = [](const HookInput& in) {
                   return in.args.text.find("forbidden") != std::string::npos ? decide(Decision::kDeny)
                                                                               : decide(Decision::kAllow);
                 }}).ok();
            h.add(HookDefinition{.name = "turns", .event = HookEvent::kTurnStart, .function = [](const HookInput&) {
                   return decide(Decision::kContinue);
                 }}).ok();
            h.add(HookDefinition{.name = "after", .event = HookEvent::kPostToolUse, .function = [](const HookInput&) {
                   return decide(Decision::kContinue);
                 }}).ok();
          },
      .expect_stop_reason = "final_answer"});
  out.push_back(Case{
      .name = "a PostToolUse stop ends the turn's remaining calls",
      .scenario = R"({"replies": [
          {"tool_calls": [{"name": "echo", "args": {"text": "x"}}, {"name": "echo", "args": {"text": "STOP"}},
                          {"name": "side", "args": {"text": "never"}}, {"name": "echo", "args": {"text": "nor this"}}]},
          {"text": "unused"}]})",
      .hooks =
          [](HookRegistry& h) {
            h.add(HookDefinition{.name = "stopper", .event = HookEvent::kPostToolUse, .function = [](const HookInput& in) {
                   return in.result.find("STOP") != std::string::npos ? decide(Decision::kStop)
                                                                       : decide(Decision::kContinue);
                 }}).ok();
          },
      .expect_stop_reason = "hook_stop"});
  out.push_back(Case{
      .name = "a TurnStart stop",
      .scenario = R"({"replies": [{"tool_calls": [{"name": "side", "args": {"text": "1"}}]}, {"text": "unused"}]})",
      .hooks =
          [](HookRegistry& h) {
            h.add(HookDefinition{.name = "two", .event = HookEvent::kTurnStart, .function = [](const HookInput& in) {
                   return in.turn == 2 ? decide(Decision::kStop) : decide(Decision::kContinue);
                 }}).ok();
          },
      .expect_stop_reason = "hook_stop"});
  out.push_back(Case{.name = "a give-up after the last retry",
                     .scenario = R"({"replies": [{"error": {"status": 503}}, {"error": {"status": 529}},
                                                 {"text": "never"}]})",
                     .hooks = [](HookRegistry&) {},
                     .settings = SessionSettings{.retry = RetryConfig{.max_retries = 1}},
                     .expect_stop_reason = "provider_error"});
  out.push_back(Case{.name = "an AgentStart stop",
                     .scenario = R"({"replies": [{"text": "never"}]})",
                     .hooks =
                         [](HookRegistry& h) {
                           h.add(HookDefinition{.name = "no", .event = HookEvent::kAgentStart,
                                                .function = [](const HookInput&) { return decide(Decision::kStop); }})
                               .ok();
                         },
                     .expect_stop_reason = "hook_stop"});
  out.push_back(Case{
      .name = "a TurnEnd hook that adds context and a system message",
      .scenario = R"({"replies": [{"text": "first"}, {"text": "second"}]})",
      .hooks =
          [](HookRegistry& h) {
            h.add(HookDefinition{.name = "more", .event = HookEvent::kTurnEnd, .function = [](const HookInput& in) {
                   return in.turn == 1 ? decide(Decision::kAppendContext, "Check again.")
                                       : decide(Decision::kContinue);
                 }}).ok();
            h.add(HookDefinition{.name = "note", .event = HookEvent::kTurnEnd, .function = [](const HookInput& in) {
                   return in.turn == 1 ? decide(Decision::kSystemMessage, "Be brief.") : decide(Decision::kContinue);
                 }}).ok();
          },
      .expect_stop_reason = "final_answer"});
  out.push_back(Case{.name = "a message sent while the session works",
                     .scenario = R"({"replies": [
                         {"text": "looking", "latency_ms": 500, "tool_calls": [{"name": "side", "args": {"text": "1"}}]},
                         {"text": "first answer"},
                         {"text": "second answer"}]})",
                     .hooks = [](HookRegistry&) {},
                     .expect_stop_reason = "final_answer",
                     .message_while_busy = "And one more thing."});
  // `run --then`: the follow-ups were recorded with the task; each starts a
  // run once the one before it has ended, whatever crashed in between.
  out.push_back(Case{.name = "follow-up messages",
                     .scenario = R"({"replies": [
                         {"text": "looking", "tool_calls": [{"name": "side", "args": {"text": "1"}}]},
                         {"text": "first answer"},
                         {"tool_calls": [{"name": "echo", "args": {"text": "again"}}]},
                         {"text": "second answer"},
                         {"text": "third answer"}]})",
                     .hooks = [](HookRegistry&) {},
                     .expect_stop_reason = "final_answer",
                     .follow_ups = {"Now check it.", "And say goodbye."}});
  return out;
}

struct Sweep {
  size_t resumed = 0;      // crash points resumed from
  size_t interrupted = 0;  // of those, with a side-effecting call interrupted
  size_t differing = 0;    // of the others, ending unlike the crash-free run
};

// Runs `c` without a crash, then resumes it from every crash point, the
// resumed sessions carrying `mutation`. Without a mutation every check is a
// test assertion; with one, differences are only counted.
Sweep sweep(const Case& c, LoopMutation mutation) {
  const bool strict = mutation == LoopMutation::kNone;
  Sweep out;
  VirtualRuntime vr;
  std::vector<std::string> echoed;
  std::multiset<std::string> side_runs;  // "<session> <call id>" of every real execution
  CHECK_OK(vr.tools->add(testing::echo_tool(&echoed)));
  CHECK_OK(vr.tools->add(ToolDefinition{
      .spec = {.name = "side", .description = "has side effects", .schema = JsonText{R"({"type":"object"})"}},
      .blocking = false,
      .run = [&side_runs](const nlohmann::json& args, const ToolContext& ctx) {
        side_runs.insert(ctx.session_id + " " + ctx.call_id);
        return ToolResult{.output = "did " + args.value("text", std::string())};
      }}));
  c.hooks(*vr.hooks);
  vr.scenario(c.scenario);
  SessionActor ref = vr.start("ref", "the task", c.settings, c.follow_ups);
  if (!c.message_while_busy.empty()) {
    caf::scoped_actor self{vr.system(), true};
    self->send(ref, UserInput{c.message_while_busy});
    vr.run();
    bool acked = false;
    self->receive([&](InputAck& a) { acked = a.ok; }, caf::after(std::chrono::seconds(0)) >> [] {});
    BOOST_TEST(acked);
  }
  SessionOutcome ref_outcome = vr.run_to_end(ref);
  if (!c.message_while_busy.empty()) {
    // Queued while turn 1 ran, it joined the conversation when turn 2 started.
    auto queued = vr.of_type<UserMessage>();
    BOOST_REQUIRE(queued.size() == 1u);
    BOOST_TEST(queued[0].queued);
    BOOST_REQUIRE(vr.provider->requests.size() == 2u);
    BOOST_TEST(vr.provider->requests[0].messages.back().text != c.message_while_busy);
    BOOST_TEST(vr.provider->requests[1].messages.back().text == c.message_while_busy);
  }
  BOOST_TEST(ref_outcome.stop_reason == c.expect_stop_reason);
  const std::vector<Event> reference = vr.logged("ref");
  if (!c.follow_ups.empty()) {
    // Each follow-up was sent once the run before it had ended, and answered.
    BOOST_TEST(ref_outcome.final_answer == "third answer");
    std::vector<std::string> sent;
    for (const auto& m : vr.of_type<UserMessage>()) {
      if (m.from_follow_ups) sent.push_back(m.text);
    }
    BOOST_TEST(sent == c.follow_ups, "sent: " << sent.size());
  }
  // Where a crash can first cut the log: after the opening's checkpoint.
  size_t first_cut = 0;
  while (first_cut < reference.size() && !std::holds_alternative<TurnCommitted>(reference[first_cut].body))
    ++first_cut;
  const Ending expected = ending_of(reference);
  SessionSettings resumed_settings = c.settings;
  resumed_settings.mutation = mutation;

  for (size_t k = first_cut + 1; k < reference.size(); ++k) {
    if (!crash_can_cut_at(reference, k)) continue;
    std::vector<Event> prefix(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(k));
    // Before the message was acknowledged, a crash means it was never sent.
    bool message_sent = c.message_while_busy.empty();
    for (const auto& e : prefix) message_sent |= get_if<UserMessage>(e) && get_if<UserMessage>(e)->queued;
    if (!message_sent) continue;
    std::string id = "cut-" + std::to_string(k);
    std::vector<Event> heard;
    SessionActor s = vr.resume_prefix(id, prefix, resumed_settings, &heard);
    SessionOutcome o = vr.run_to_end(s);
    std::vector<Event> logged = vr.logged(id);
    ++out.resumed;
    BOOST_TEST_CONTEXT("cut after seq " << k << " (" << reference[k - 1].type_name() << ")") {
      VerifyReport report;
      CHECK_OK(verify_session(vr.log(), id, &report));
      BOOST_TEST(report.ok());
      std::set<std::string> unfinished = unfinished_calls(prefix);
      bool side_unfinished = false;
      for (const auto& call : unfinished) {
        for (const auto& e : prefix) {
          if (const auto* r = get_if<ToolRequested>(e); r && r->call_id == call && r->tool == "side")
            side_unfinished = true;
        }
        // A side-effecting call never runs a second time.
        BOOST_TEST(side_runs.count(id + " " + call) == 0u, "call " << call << " ran again");
      }
      if (side_unfinished) {
        ++out.interrupted;
        bool told = false;
        for (const auto& e : logged) {
          if (const auto* t = get_if<ToolCompleted>(e); t && t->interrupted) told = true;
        }
        BOOST_TEST(told, "the model was not told the call's outcome is unknown");
        continue;
      }
      bool same = ending_of(logged) == expected && o.stop_reason == ref_outcome.stop_reason;
      if (!same) ++out.differing;
      if (strict) {
        BOOST_TEST(o.stop_reason == ref_outcome.stop_reason);
        BOOST_TEST(ending_of(logged) == expected);
      }
    }
  }
  BOOST_TEST_MESSAGE(c.name << ": resumed from " << out.resumed << " crash points (" << out.interrupted
                            << " with a side-effecting call interrupted, " << out.differing << " ending otherwise)");
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_session_resumed_in_step_mode_from_any_crash_point_ends_as_the_crash_free_run) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT("scenario: " << c.name) {
      Sweep s = sweep(c, LoopMutation::kNone);
      BOOST_TEST(s.resumed >= 1u);
      BOOST_TEST(s.differing == 0u);
    }
  }
}

// The mutation check: a resume that ignores a recorded stop decision must be
// caught by the sweep, or the sweep would prove nothing about stops.
BOOST_AUTO_TEST_CASE(the_sweep_catches_a_resume_that_ignores_a_recorded_stop) {
  for (const Case& c : cases()) {
    if (c.expect_stop_reason != "hook_stop") continue;
    BOOST_TEST_CONTEXT("scenario: " << c.name) {
      Sweep s = sweep(c, LoopMutation::kIgnoreRecordedStop);
      BOOST_TEST(s.differing > 0u, "no crash point showed the ignored stop");
    }
  }
}
