// Durable approvals (docs/approvals.md): a call a hook or the policy asks
// about parks the session (no actor, no thread) until a person decides; the
// decision is bound to the arguments' digest, the first one recorded wins,
// an expired request is decided by its on_expiry, a resume parks again
// without asking the hooks, and the replay answers from the log.
#define BOOST_TEST_MODULE approvals_test
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "events/fold.h"
#include "replay/replay_report.h"
#include "runtime/runtime.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;

namespace {

constexpr const char* kCharge = R"({"replies": [
    {"tool_calls": [{"name": "charge", "args": {"amount": 5}}]},
    {"text": "done"}]})";

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<Runtime> rt;
  std::shared_ptr<std::atomic<int>> charged = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> hook_calls = std::make_shared<std::atomic<int>>(0);
  std::mutex mu;
  std::vector<Approval> told;  // on_approval

  Config config(const std::string& scenario_json) {
    Config c;
    c.provider.scenario = dir.sub("scenario.json");
    std::ofstream(c.provider.scenario) << scenario_json;
    c.workspace = dir.path();
    return c;
  }

  // `policy`: the config's approvals.tools; `asking_hook`: a C++ PreToolUse hook that asks.
  void open(const std::string& scenario_json, const std::string& policy = "", bool asking_hook = false,
            uint64_t expires_after_ms = 0) {
    rt.reset();
    Runtime::Options o;
    o.home = dir.sub("home");
    o.config = config(scenario_json);
    o.config.approvals_tools = policy;
    o.config.approvals_expires_after_ms = expires_after_ms;
    o.on_approval = [this](const Approval& a) {
      std::lock_guard lock(mu);
      told.push_back(a);
    };
    CHECK_OK(Runtime::open(std::move(o), &rt));
    auto count = charged;
    ToolDefinition charge;
    charge.spec.name = "charge";
    charge.spec.description = "charges a card";
    charge.spec.schema.text = R"({"type":"object"})";
    charge.run = [count](const nlohmann::json&, const ToolContext&) {
      ++*count;
      return ToolResult{.output = "charged"};
    };
    CHECK_OK(rt->register_tool(std::move(charge)));
    if (asking_hook) {
      auto calls = hook_calls;
      HookDefinition hook;
      hook.name = "money-guard";
      hook.event = HookEvent::kPreToolUse;
      hook.matcher = "^charge$";
      hook.function = [calls](const HookInput&) {
        ++*calls;
        HookDecision d;
        d.decision = Decision::kAsk;
        d.reason = "money moves";
        return d;
      };
      CHECK_OK(rt->register_hook(std::move(hook)));
    }
  }

  std::vector<Event> events(const std::string& id) {
    std::vector<Event> out;
    CHECK_OK(rt->read_events(id, 1, &out));
    return out;
  }
  template <typename T>
  std::vector<T> of_type(const std::string& id) {
    std::vector<T> out;
    for (const auto& e : events(id)) {
      if (const auto* x = get_if<T>(e)) out.push_back(*x);
    }
    return out;
  }
  uint64_t last_seq(const std::string& id) { return events(id).back().seq; }
  void until_closed() {
    for (int i = 0; i < 2000 && rt->live_sessions() > 0; ++i) std::this_thread::sleep_for(1ms);
    BOOST_REQUIRE(rt->live_sessions() == 0u);
  }
  SessionOutcome parked(const std::string& id) {
    SessionOutcome o;
    CHECK_OK(rt->wait(id, 60s, &o));
    BOOST_TEST(o.stop_reason == "waiting");
    BOOST_REQUIRE(o.waiting.size() == 1u);
    return o;
  }
};

Event at(uint64_t seq, EventBody body) { return Event{.seq = seq, .ts_us = 0, .body = std::move(body)}; }

}  // namespace

// The fold alone: a decision counts only if it is the first one and names
// the request's argument digest.
BOOST_AUTO_TEST_CASE(the_fold_binds_a_decision_to_the_arguments_and_takes_the_first) {
  const JsonText args{R"({"amount":5})"};
  const Digest128 digest = args_digest(args);
  std::vector<Event> log = {
      at(1, SessionStarted{.agent_id = "a"}),
      at(2, UserMessage{.text = "go"}),
      at(3, TurnStarted{1}),
      at(4, LlmResponded{.turn = 1, .attempt = 1, .tool_calls = {ToolCall{"c1", "charge", args}}}),
      at(5, ApprovalRequested{.call_id = "c1", .tool = "charge", .args = args, .args_digest = digest, .kind = "approval"}),
  };
  SessionState s;
  CHECK_OK(fold(log, &s));
  BOOST_REQUIRE(waiting_approval(s) != nullptr);
  // Bound to other arguments: ignored, the call still waits.
  log.push_back(at(6, ApprovalDecided{.call_id = "c1", .decision = "approved", .args_digest = digest128("other"), .by = "api"}));
  CHECK_OK(fold(log, &s));
  BOOST_TEST(waiting_approval(s) != nullptr);
  BOOST_TEST(s.approvals_ignored == 1u);
  // The first bound decision decides; a later one is ignored.
  log.push_back(at(7, ApprovalDecided{.call_id = "c1", .decision = "denied", .args_digest = digest, .by = "cli"}));
  log.push_back(at(8, ApprovalDecided{.call_id = "c1", .decision = "approved", .args_digest = digest, .by = "web"}));
  CHECK_OK(fold(log, &s));
  BOOST_TEST(waiting_approval(s) == nullptr);
  const PendingApproval* a = find_approval(s, "c1");
  BOOST_REQUIRE(a != nullptr);
  BOOST_TEST(a->decision.decision == "denied");
  BOOST_TEST(a->decision.by == "cli");
  BOOST_TEST(a->decided_seq == 7u);
  BOOST_TEST(s.approvals_ignored == 2u);
  BOOST_TEST(s.approvals_requested == 1u);
}

// A command hook may answer ask; PreToolUse decisions resolve deny > ask >
// modify_args > allow, and an ask carries the first modify_args's arguments.
BOOST_AUTO_TEST_CASE(ask_ranks_between_deny_and_modify_args) {
  HookDecision asked;
  CHECK_OK(parse_decision("guard", R"({"decision": "ask", "reason": "a person decides"})", HookEvent::kPreToolUse,
                          &asked));
  BOOST_TEST((asked.decision == Decision::kAsk));
  BOOST_TEST(!parse_decision("late", R"({"decision": "ask"})", HookEvent::kTurnEnd, &asked).ok());
  HookDecision modify{.hook_name = "m", .decision = Decision::kModifyArgs, .modified_args = JsonText{R"({"x":1})"}};
  HookDecision ask{.hook_name = "a", .decision = Decision::kAsk, .reason = "why"};
  HookDecision deny{.hook_name = "d", .decision = Decision::kDeny, .reason = "no"};
  HookVerdict v = resolve_decisions(HookEvent::kPreToolUse, {modify, ask});
  BOOST_TEST((v.resolved == Decision::kAsk));
  BOOST_TEST(v.reason == "why");
  BOOST_TEST(v.modified_args.text == R"({"x":1})");
  BOOST_TEST((resolve_decisions(HookEvent::kPreToolUse, {ask, deny}).resolved == Decision::kDeny));
  BOOST_TEST((resolve_decisions(HookEvent::kPreToolUse, {modify}).resolved == Decision::kModifyArgs));
}

BOOST_FIXTURE_TEST_SUITE(approvals, Fixture)

// A hook asks: the session parks (its actor closes; another session runs
// meanwhile), waits as "waiting", and the approved call runs exactly once. A
// second answer, and one for other arguments, are refused and write nothing.
BOOST_AUTO_TEST_CASE(a_hook_that_asks_parks_the_session_until_the_first_answer) {
  open(kCharge, "", /*asking_hook=*/true);
  CHECK_OK(rt->start_session(SessionOptions{.id = "pay", .task = "pay"}, nullptr));
  SessionOutcome o = parked("pay");
  const ApprovalRequested r = o.waiting[0];
  BOOST_TEST(r.tool == "charge");
  BOOST_TEST(r.reason == "money moves");
  BOOST_TEST(r.asked_by == "money-guard");
  BOOST_TEST(r.args_digest == args_digest(r.args));
  BOOST_TEST(charged->load() == 0);
  until_closed();  // parked: no actor, no thread
  {
    std::lock_guard lock(mu);
    BOOST_REQUIRE(told.size() == 1u);
    BOOST_TEST(told[0].session_id == "pay");
    BOOST_TEST(told[0].request.call_id == r.call_id);
  }
  std::vector<SessionSummary> rows;
  CHECK_OK(rt->list_sessions(SessionFilter{.status = "waiting"}, &rows));
  BOOST_REQUIRE(rows.size() == 1u);
  BOOST_TEST(rows[0].id == "pay");
  std::vector<Approval> waiting;
  CHECK_OK(rt->list_approvals("", &waiting));
  BOOST_REQUIRE(waiting.size() == 1u);
  BOOST_TEST(waiting[0].request.call_id == r.call_id);

  // Another session runs meanwhile, up to its own request (the hook asks
  // about every charge): the parked one holds nothing up.
  CHECK_OK(rt->start_session(SessionOptions{.id = "other", .task = "x"}, nullptr));
  (void)parked("other");

  const uint64_t before = last_seq("pay");
  Status wrong = rt->decide("pay", ApprovalAnswer{.call_id = r.call_id, .args_digest = digest128("x").hex()});
  BOOST_TEST(wrong.is_invalid_argument(), wrong.to_string());
  BOOST_TEST(last_seq("pay") == before);
  Status unknown = rt->decide("pay", ApprovalAnswer{.call_id = "nope"});
  BOOST_TEST(unknown.is_not_found(), unknown.to_string());
  Status huge = rt->decide("pay", ApprovalAnswer{.call_id = r.call_id, .reason = std::string(1 << 20, 'x')});
  BOOST_TEST(huge.is_invalid_argument(), huge.to_string());
  BOOST_TEST(rt->decide("pay", ApprovalAnswer{.call_id = r.call_id, .expiry = true}).is_invalid_argument());
  BOOST_TEST(last_seq("pay") == before);

  ApprovalDecided recorded;
  CHECK_OK(rt->decide("pay", ApprovalAnswer{.call_id = r.call_id, .args_digest = r.args_digest.hex(), .by = "test",
                                            .who = "tester"},
                      &recorded));
  BOOST_TEST(recorded.decision == "approved");
  CHECK_OK(rt->wait("pay", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(o.final_answer == "done");
  BOOST_TEST(charged->load() == 1);
  BOOST_TEST(hook_calls->load() == 2);  // once per session

  Status again = rt->decide("pay", ApprovalAnswer{.call_id = r.call_id, .kind = ApprovalAnswer::Kind::kDeny});
  BOOST_TEST(again.is_already_decided(), again.to_string());
  BOOST_TEST(again.message().find("approved by test (tester)") != std::string::npos, again.message());
  auto decided = of_type<ApprovalDecided>("pay");
  BOOST_REQUIRE(decided.size() == 1u);
  BOOST_TEST(decided[0].by == "test");

  ReplayReport replayed;
  CHECK_OK(rt->replay("pay", 0, &replayed));
  BOOST_TEST(replayed.identical(), "diverged at seq " << (replayed.divergence ? replayed.divergence->seq : 0) << ": "
                                                       << (replayed.divergence && replayed.divergence->expected
                                                               ? replayed.divergence->expected->type_name()
                                                               : "-")
                                                       << " vs "
                                                       << (replayed.divergence && replayed.divergence->actual
                                                               ? replayed.divergence->actual->type_name()
                                                               : "-"));
}

// The policy asks without any hook; a denied call never runs, and the
// model is told who denied it and why.
BOOST_AUTO_TEST_CASE(a_denied_call_never_runs) {
  open(kCharge, "^charge$");
  CHECK_OK(rt->start_session(SessionOptions{.id = "pay", .task = "pay"}, nullptr));
  SessionOutcome o = parked("pay");
  BOOST_TEST(o.waiting[0].asked_by == "approvals policy");
  CHECK_OK(rt->decide("pay", ApprovalAnswer{.call_id = o.waiting[0].call_id,
                                            .kind = ApprovalAnswer::Kind::kDeny,
                                            .reason = "too expensive"}));
  CHECK_OK(rt->wait("pay", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(charged->load() == 0);
  auto done = of_type<ToolCompleted>("pay");
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].is_error);
  BOOST_TEST(done[0].output.find("denied by api") != std::string::npos, done[0].output);
  BOOST_TEST(done[0].output.find("too expensive") != std::string::npos, done[0].output);
  BOOST_TEST(of_type<ToolRequested>("pay").empty());
}

// A resume after the runtime closed parks again, without asking the hook
// again (nothing was recorded as stopped: it waits for a person, not a
// resume); the decision then goes on in the new runtime.
BOOST_AUTO_TEST_CASE(a_parked_session_survives_its_runtime_and_parks_again_on_resume) {
  open(kCharge, "", /*asking_hook=*/true);
  CHECK_OK(rt->start_session(SessionOptions{.id = "pay", .task = "pay"}, nullptr));
  const std::string call = parked("pay").waiting[0].call_id;
  open(kCharge, "", /*asking_hook=*/true);  // a new runtime (the process restarted)
  BOOST_TEST(of_type<SessionStopped>("pay").empty());
  SessionOutcome before_resume;
  CHECK_OK(rt->wait("pay", 1s, &before_resume));  // from the log: it waits for a decision
  BOOST_TEST(before_resume.stop_reason == "waiting");
  BOOST_REQUIRE(before_resume.waiting.size() == 1u);
  BOOST_TEST(before_resume.waiting[0].call_id == call);
  std::vector<SessionSummary> rows;
  CHECK_OK(rt->list_sessions(SessionFilter{}, &rows));
  BOOST_REQUIRE(rows.size() == 1u);
  BOOST_TEST(rows[0].status == "waiting");
  CHECK_OK(rt->resume_session("pay", Runtime::ResumeOptions{}));
  SessionOutcome o = parked("pay");
  BOOST_TEST(o.waiting[0].call_id == call);
  BOOST_TEST(hook_calls->load() == 1);
  BOOST_TEST(of_type<ApprovalRequested>("pay").size() == 1u);
  until_closed();
  CHECK_OK(rt->decide("pay", ApprovalAnswer{.call_id = call}));  // wakes it from its log
  CHECK_OK(rt->wait("pay", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(charged->load() == 1);
  BOOST_TEST(hook_calls->load() == 1);
  ReplayReport replayed;
  CHECK_OK(rt->replay("pay", 0, &replayed));
  BOOST_TEST(replayed.identical(), "diverged at seq " << (replayed.divergence ? replayed.divergence->seq : 0) << ": "
                                                       << (replayed.divergence && replayed.divergence->expected
                                                               ? replayed.divergence->expected->type_name()
                                                               : "-")
                                                       << " vs "
                                                       << (replayed.divergence && replayed.divergence->actual
                                                               ? replayed.divergence->actual->type_name()
                                                               : "-"));
}

// Expiry: the runtime decides by on_expiry (deny) when the time comes; a
// request that expired while no runtime ran is decided so by the next
// answer, which is refused (expired) — and the first decision then stands.
BOOST_AUTO_TEST_CASE(an_expired_request_is_decided_by_its_on_expiry) {
  open(kCharge, "^charge$", false, /*expires_after_ms=*/300);
  CHECK_OK(rt->start_session(SessionOptions{.id = "timer", .task = "pay"}, nullptr));
  SessionOutcome o = parked("timer");
  BOOST_TEST(o.waiting[0].expires_after_ms == 300u);
  BOOST_TEST(o.waiting[0].on_expiry == "deny");
  // The runtime's timer decides: no answer comes.
  for (int i = 0; i < 500 && of_type<SessionCompleted>("timer").empty(); ++i) std::this_thread::sleep_for(10ms);
  auto decided = of_type<ApprovalDecided>("timer");
  BOOST_REQUIRE(decided.size() == 1u);
  BOOST_TEST(decided[0].by == "expiry");
  BOOST_TEST(decided[0].expired);
  BOOST_TEST(decided[0].decision == "denied");
  BOOST_TEST(charged->load() == 0);

  // Expired while nobody ran: the late answer is refused, the expiry recorded.
  CHECK_OK(rt->start_session(SessionOptions{.id = "late", .task = "pay"}, nullptr));
  const std::string call = parked("late").waiting[0].call_id;
  rt.reset();
  std::this_thread::sleep_for(400ms);
  open(kCharge, "^charge$", false, 300);
  Status late = rt->decide("late", ApprovalAnswer{.call_id = call});
  BOOST_TEST(late.is_expired(), late.to_string());
  CHECK_OK(rt->wait("late", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  decided = of_type<ApprovalDecided>("late");
  BOOST_REQUIRE(decided.size() == 1u);
  BOOST_TEST(decided[0].by == "expiry");
  BOOST_TEST(charged->load() == 0);
  BOOST_TEST(rt->decide("late", ApprovalAnswer{.call_id = call}).is_already_decided());
}

// ask_user: offered when a program registers on_approval; the question
// parks the session and the answer is the call's result.
BOOST_AUTO_TEST_CASE(ask_user_waits_for_the_answer_and_gives_it_to_the_model) {
  open(R"({"replies": [
      {"tool_calls": [{"name": "ask_user", "args": {"question": "Which colour?"}}]},
      {"text": "painting it"}]})");
  CHECK_OK(rt->start_session(SessionOptions{.id = "q", .task = "paint"}, nullptr));
  SessionOutcome o = parked("q");
  BOOST_TEST(o.waiting[0].kind == "question");
  BOOST_TEST(o.waiting[0].question == "Which colour?");
  const std::string call = o.waiting[0].call_id;
  BOOST_TEST(rt->decide("q", ApprovalAnswer{.call_id = call}).is_invalid_argument());  // a question is answered
  CHECK_OK(rt->decide("q", ApprovalAnswer{.call_id = call, .kind = ApprovalAnswer::Kind::kAnswer, .text = "blue"}));
  CHECK_OK(rt->wait("q", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  auto done = of_type<ToolCompleted>("q");
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].output == "blue");
  BOOST_TEST(!done[0].is_error);
}

// Replaying with a configuration that no longer asks diverges at the
// recorded approval.requested, naming it.
BOOST_AUTO_TEST_CASE(a_replay_without_the_policy_diverges_at_the_request) {
  open(kCharge, "^charge$");
  CHECK_OK(rt->start_session(SessionOptions{.id = "pay", .task = "pay"}, nullptr));
  SessionOutcome o = parked("pay");
  CHECK_OK(rt->decide("pay", ApprovalAnswer{.call_id = o.waiting[0].call_id}));
  CHECK_OK(rt->wait("pay", 60s, &o));
  ReplayReport same;
  CHECK_OK(rt->replay("pay", 0, &same));
  BOOST_TEST(same.identical());
  open(kCharge, "");  // no policy
  ReplayReport without;
  CHECK_OK(rt->replay("pay", 0, &without));
  BOOST_REQUIRE(!without.identical());
  BOOST_REQUIRE(without.divergence->expected.has_value());
  BOOST_TEST(without.divergence->expected->type_name() == "approval.requested");
}

BOOST_AUTO_TEST_SUITE_END()
