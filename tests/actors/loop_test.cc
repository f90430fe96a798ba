// The agent loop's pure parts: retry policy, prompt layers, trimming, hook
// resolution, scenarios, pricing and configuration.
#define BOOST_TEST_MODULE loop_test
#include <sys/stat.h>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

#include "actors/hook/hook_registry.h"
#include "actors/provider/retry_policy.h"
#include "actors/provider/scripted_provider.h"
#include "actors/session/context_trim.h"
#include "actors/session/pricing.h"
#include "actors/session/prompt.h"
#include "events/fold.h"
#include "runtime/config.h"
#include "tests/support/printing.h"
#include "tests/support/session_builder.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

// ---------------------------------------------------------------- retries
BOOST_AUTO_TEST_SUITE(retry_policy)

BOOST_AUTO_TEST_CASE(statuses_are_classified) {
  RetryConfig c;
  for (uint32_t s : {429u, 500u, 502u, 503u, 529u}) {
    BOOST_TEST((classify(c, ProviderFailure{.http_status = s}) == ErrorCategory::kTransient), s);
  }
  for (uint32_t s : {400u, 401u, 403u, 404u, 422u}) {
    BOOST_TEST((classify(c, ProviderFailure{.http_status = s}) == ErrorCategory::kPermanent), s);
  }
  BOOST_TEST(
      (classify(c, ProviderFailure{.error = "reset", .transport = true}) == ErrorCategory::kTransient));
  BOOST_TEST((classify(c, ProviderFailure{.error = "bad scenario"}) == ErrorCategory::kPermanent));
  c.retryable_statuses = {418};
  BOOST_TEST((classify(c, ProviderFailure{.http_status = 418}) == ErrorCategory::kTransient));
  BOOST_TEST((classify(c, ProviderFailure{.http_status = 429}) == ErrorCategory::kPermanent));
}

BOOST_AUTO_TEST_CASE(backoff_doubles_with_jitter_in_range_and_is_capped) {
  RetryConfig c{.max_retries = 10, .base_delay_ms = 1000, .max_delay_ms = 30000};
  ProviderFailure f{.http_status = 503};
  for (uint64_t seed : {1ull, 42ull, 987654321ull}) {
    for (uint32_t attempt = 1; attempt <= 10; ++attempt) {
      RetryDecision d = decide_retry(c, f, attempt, seed, 3);
      BOOST_REQUIRE(d.retry);
      double full = std::min(30000.0, 1000.0 * static_cast<double>(1u << (attempt - 1)));
      BOOST_TEST(static_cast<double>(d.delay_ms) >= full * 0.5 - 1, "attempt " << attempt);
      BOOST_TEST(static_cast<double>(d.delay_ms) <= full, "attempt " << attempt);
      // The same seed, turn and attempt always give the same delay: replay is exact.
      BOOST_TEST(decide_retry(c, f, attempt, seed, 3).delay_ms == d.delay_ms);
    }
  }
  BOOST_TEST(decide_retry(c, f, 10, 1, 1).delay_ms <= 30000u);
}

BOOST_AUTO_TEST_CASE(jitter_spreads_over_its_range) {
  double lo = 1, hi = 0;
  std::set<uint64_t> distinct;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    double j = retry_jitter(seed, 1, 1);
    BOOST_REQUIRE(j >= 0.5);
    BOOST_REQUIRE(j <= 1.0);
    lo = std::min(lo, j);
    hi = std::max(hi, j);
    distinct.insert(static_cast<uint64_t>(j * 1e6));
  }
  BOOST_TEST(lo < 0.51);
  BOOST_TEST(hi > 0.99);
  BOOST_TEST(distinct.size() > 1900u);
  BOOST_TEST(retry_jitter(7, 1, 1) != retry_jitter(7, 1, 2));
  BOOST_TEST(retry_jitter(7, 1, 1) != retry_jitter(7, 2, 1));
}

BOOST_AUTO_TEST_CASE(retry_after_wins_up_to_max_delay_ms) {
  RetryConfig c;
  RetryDecision d = decide_retry(
      c, ProviderFailure{.http_status = 429, .has_retry_after = true, .retry_after_ms = 25000}, 1, 1, 1);
  BOOST_TEST(d.retry);
  BOOST_TEST(d.delay_ms == 25000u);  // not the backoff's 1000 * jitter
  d = decide_retry(c, ProviderFailure{.http_status = 429, .has_retry_after = true, .retry_after_ms = 45000},
                   1, 1, 1);
  BOOST_TEST(d.delay_ms == 30000u);  // max_delay_ms
}

BOOST_AUTO_TEST_CASE(permanent_failures_and_exhaustion_stop) {
  RetryConfig c;  // 3 retries: attempts 1..4
  BOOST_TEST(!decide_retry(c, ProviderFailure{.http_status = 401}, 1, 1, 1).retry);
  BOOST_TEST(decide_retry(c, ProviderFailure{.http_status = 500}, 3, 1, 1).retry);
  RetryDecision last = decide_retry(c, ProviderFailure{.http_status = 500}, 4, 1, 1);
  BOOST_TEST(!last.retry);
  BOOST_TEST((last.category == ErrorCategory::kTransient));
  RetryConfig none{.max_retries = 0};
  BOOST_TEST(!decide_retry(none, ProviderFailure{.http_status = 500}, 1, 1, 1).retry);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- prompt
BOOST_AUTO_TEST_SUITE(prompt_layers)

ToolSpec spec(const std::string& name) {
  return ToolSpec{.name = name, .description = "does " + name, .schema = JsonText{R"({"type":"object"})"}};
}

std::vector<std::string> layers(const AssembledPrompt& p) {
  std::vector<std::string> out;
  for (const auto& s : p.segments) out.push_back(s.layer);
  return out;
}

BOOST_AUTO_TEST_CASE(s13_1_identity_from_config) {
  PromptConfig c{.identity = "You are Bob, a careful agent."};
  AssembledPrompt p = assemble_prompt(PromptInputs{.config = &c});
  BOOST_TEST(p.text.rfind("You are Bob, a careful agent.", 0) == 0u);
  BOOST_TEST(p.segments[0].contributor == "config");
  BOOST_TEST(p.segments[0].chars == c.identity.size());
  PromptConfig none;
  BOOST_TEST(assemble_prompt(PromptInputs{.config = &none}).text == default_identity());
}

BOOST_AUTO_TEST_CASE(s13_1_identity_from_a_file_read_every_turn) {
  testing::TempDir dir;
  std::string path = dir.sub("identity.md");
  std::ofstream(path) << "You are the file agent.";
  PromptConfig c{.identity = "ignored", .identity_file = path};
  BOOST_TEST(assemble_prompt(PromptInputs{.config = &c}).text == "You are the file agent.");
  std::ofstream(path) << "You changed.";
  AssembledPrompt p = assemble_prompt(PromptInputs{.config = &c});
  BOOST_TEST(p.text == "You changed.");
  BOOST_TEST(p.segments[0].contributor == path);
}

BOOST_AUTO_TEST_CASE(s13_2_tool_descriptions_for_every_registered_tool) {
  PromptConfig c;
  AssembledPrompt p =
      assemble_prompt(PromptInputs{.config = &c, .tools = {spec("shell"), spec("read_file")}});
  BOOST_TEST(p.text.find("- **shell**: does shell") != std::string::npos);
  BOOST_TEST(p.text.find("- **read_file**: does read_file") != std::string::npos);
  BOOST_TEST(p.text.find(R"(Arguments (JSON Schema): {"type":"object"})") != std::string::npos);
  BOOST_TEST((layers(p) == std::vector<std::string>{"identity", "tools"}));
  BOOST_TEST(p.segments[1].contributor == "registry");
}

BOOST_AUTO_TEST_CASE(s13_3_workflow_catalog_when_workflows_are_loaded) {
  PromptConfig c{.workflows = {{"release", "cuts a release"}}};
  AssembledPrompt p = assemble_prompt(PromptInputs{.config = &c});
  BOOST_TEST(p.text.find("## Available workflows\n\n- **release**: cuts a release") != std::string::npos);
  PromptConfig none;
  BOOST_TEST(assemble_prompt(PromptInputs{.config = &none}).text.find("workflows") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(s13_4_session_instructions_and_hook_messages) {
  PromptConfig c;
  AssembledPrompt p =
      assemble_prompt(PromptInputs{.config = &c, .session_instructions = "Answer in French."});
  BOOST_TEST(p.text.find("## Session instructions\nAnswer in French.") != std::string::npos);
  AssembledPrompt with_hooks = assemble_prompt(PromptInputs{
      .config = &c, .session_instructions = "Answer in French.", .hook_messages = {"Be brief."}});
  BOOST_TEST(with_hooks.text.find("Answer in French.\n\nBe brief.") != std::string::npos);
  BOOST_TEST(with_hooks.segments.back().contributor == "session+hooks");
}

BOOST_AUTO_TEST_CASE(s13_5_custom_instructions_file_appended_last) {
  testing::TempDir dir;
  std::string path = dir.sub("instructions.md");
  std::ofstream(path) << "Always run the tests.";
  PromptConfig c{.custom_instructions_file = path, .workflows = {{"w", "d"}}};
  AssembledPrompt p =
      assemble_prompt(PromptInputs{.config = &c, .tools = {spec("shell")}, .session_instructions = "s"});
  BOOST_TEST((layers(p) == std::vector<std::string>{"identity", "tools", "workflows", "session", "custom"}));
  BOOST_TEST(p.text.size() >= 21u);
  BOOST_TEST(p.text.substr(p.text.size() - 21) == "Always run the tests.");
  uint64_t sum = 0;
  for (const auto& s : p.segments) sum += s.chars;
  BOOST_TEST(sum + 2 * (p.segments.size() - 1) == p.text.size());  // the layers and their separators
  BOOST_TEST((p.digest == digest128(p.text)));
}

BOOST_AUTO_TEST_CASE(s13_6_a_missing_custom_instructions_file_is_skipped) {
  PromptConfig c{.custom_instructions_file = "/nonexistent/instructions.md"};
  AssembledPrompt p = assemble_prompt(PromptInputs{.config = &c});
  BOOST_TEST((layers(p) == std::vector<std::string>{"identity"}));
}

BOOST_AUTO_TEST_CASE(s13_7_tool_descriptions_follow_the_registry) {
  // The session assembles from the registry's current specs each turn (the
  // session tests check that through a live session); here: the text follows.
  PromptConfig c;
  std::string before = assemble_prompt(PromptInputs{.config = &c, .tools = {spec("shell")}}).text;
  std::string after =
      assemble_prompt(PromptInputs{.config = &c, .tools = {spec("shell"), spec("grep")}}).text;
  BOOST_TEST(before.find("grep") == std::string::npos);
  BOOST_TEST(after.find("- **grep**") != std::string::npos);
  std::string removed = assemble_prompt(PromptInputs{.config = &c, .tools = {}}).text;
  BOOST_TEST(removed.find("shell") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- trimming
BOOST_AUTO_TEST_SUITE(trimming)

Message msg(Role role, size_t chars) { return Message{.role = role, .text = std::string(chars, 'x')}; }

BOOST_AUTO_TEST_CASE(nothing_is_trimmed_under_budget) {
  std::vector<Message> m = {msg(Role::kUser, 100), msg(Role::kAssistant, 100), msg(Role::kTool, 100)};
  BOOST_TEST(!plan_trim(m, 1000).has_value());
  BOOST_TEST(!plan_trim(m, 0).has_value());  // 0: no budget
}

BOOST_AUTO_TEST_CASE(whole_turns_leave_oldest_first_and_the_task_stays) {
  std::vector<Message> m = {msg(Role::kUser, 100),  // task
                            msg(Role::kAssistant, 100), msg(Role::kTool, 300),
                            msg(Role::kTool, 300),                               // turn 1
                            msg(Role::kAssistant, 100), msg(Role::kTool, 300),   // turn 2
                            msg(Role::kAssistant, 100), msg(Role::kTool, 100)};  // turn 3
  auto t = plan_trim(m, 1000);  // 1400 chars; the target is 750
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(t->first_index == 1u);
  BOOST_TEST(t->messages_removed == 3u);  // turn 1 whole: 700 chars remain
  BOOST_TEST(t->chars_before == 1400u);
  BOOST_TEST(t->chars_after == 700u);
  auto more = plan_trim(m, 600);  // the target is 450
  BOOST_REQUIRE(more.has_value());
  BOOST_TEST(more->messages_removed == 5u);  // turns 1 and 2, never half a turn
  BOOST_TEST(more->chars_after == 300u);
}

// ContextSize counts what each turn adds; whatever changed the conversation
// otherwise (a trim, then enough new messages to pass its old length; another
// state) it counts again, so it always says what context_chars says.
BOOST_AUTO_TEST_CASE(the_context_size_kept_as_it_grows_is_always_the_whole_count) {
  testing::SessionBuilder b;
  ContextSize size;
  auto same = [&](const SessionState& s) { return size.of(s) == context_chars(s.messages); };
  // A turn whose model call asks for `n` tools: 1 + n messages.
  auto calls = [&](size_t n, const std::string& text) {
    const uint64_t t = b.state().turn;
    b.add(LlmRequested{.turn = t, .attempt = 1, .model = "m1"});
    LlmResponded r{.turn = t, .attempt = 1, .text = text};
    for (size_t i = 0; i < n; ++i) {
      r.tool_calls.push_back({"c" + std::to_string(t) + "_" + std::to_string(i), "shell",
                              JsonText{"{\"command\":\"" + std::string(i + 1, 'x') + "\"}"}});
    }
    std::vector<ToolCall> asked = r.tool_calls;
    b.add(std::move(r));
    for (const auto& c : asked) {
      b.add(ToolRequested{c.id, c.name, c.args});
      b.add(ToolCompleted{.call_id = c.id, .tool = c.name, .output = std::string(10 * n, 'o')});
    }
    b.commit();
  };
  b.start();
  BOOST_TEST(same(b.state()));
  for (int t = 0; t < 4; ++t) {
    b.turn({"shell", "read_file"});
    BOOST_TEST(same(b.state()), "turn " << t);
  }
  BOOST_REQUIRE(b.state().messages.size() == 13u);
  // Two turns trimmed, then a turn of seven messages: more messages than were
  // counted, but not the same ones.
  b.add(TurnStarted{b.state().turn + 1});
  b.add(ContextTrimmed{.first_index = 1, .messages_removed = 6});
  BOOST_TEST(same(b.state()));
  calls(6, "six");
  BOOST_REQUIRE(b.state().messages.size() == 14u);
  BOOST_TEST(same(b.state()));
  // A trim never looked at, then a longer turn.
  b.add(TurnStarted{b.state().turn + 1});
  b.add(ContextTrimmed{.first_index = 1, .messages_removed = 3});
  calls(8, "eight");
  BOOST_REQUIRE(b.state().messages.size() == 20u);
  BOOST_TEST(same(b.state()));
  // Another session's state, longer; then this one again.
  testing::SessionBuilder other;
  other.start("another task");
  for (int t = 0; t < 8; ++t) other.turn({"shell", "shell"});
  BOOST_TEST(same(other.state()));
  BOOST_TEST(same(b.state()));
  // The budget's decision is the same with the count given.
  for (uint64_t budget : {50u, 200u, 400u, 5000u}) {
    auto given = plan_trim(b.state().messages, budget, size.of(b.state()));
    auto counted = plan_trim(b.state().messages, budget);
    BOOST_TEST(given.has_value() == counted.has_value(), budget);
    if (given && counted) BOOST_TEST((*given == *counted), budget);
  }
}

BOOST_AUTO_TEST_CASE(the_latest_turn_is_never_cut) {
  std::vector<Message> m = {msg(Role::kUser, 10), msg(Role::kAssistant, 10), msg(Role::kTool, 5000),
                            msg(Role::kTool, 5000)};
  BOOST_TEST(!plan_trim(m, 1000).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- hooks
BOOST_AUTO_TEST_SUITE(hook_resolution)

HookDecision d(Decision decision, std::string name = "h", std::string message = "") {
  return HookDecision{
      .hook_name = std::move(name), .decision = decision, .reason = "because", .message = std::move(message)};
}

BOOST_AUTO_TEST_CASE(pre_tool_use_every_combination) {
  // deny > modify_args > allow, whatever the order.
  const std::vector<Decision> kinds = {Decision::kAllow, Decision::kModifyArgs, Decision::kDeny};
  for (Decision a : kinds) {
    for (Decision b : kinds) {
      for (Decision c : kinds) {
        std::vector<HookDecision> ds = {d(a, "a"), d(b, "b"), d(c, "c")};
        for (auto& x : ds) {
          if (x.decision == Decision::kModifyArgs) x.modified_args.text = "{\"by\":\"" + x.hook_name + "\"}";
        }
        HookVerdict v = resolve_decisions(HookEvent::kPreToolUse, ds);
        bool any_deny = a == Decision::kDeny || b == Decision::kDeny || c == Decision::kDeny;
        bool any_modify =
            a == Decision::kModifyArgs || b == Decision::kModifyArgs || c == Decision::kModifyArgs;
        Decision expected = any_deny     ? Decision::kDeny
                            : any_modify ? Decision::kModifyArgs
                                         : Decision::kAllow;
        BOOST_TEST((v.resolved == expected), decision_name(a)
                                                 << "," << decision_name(b) << "," << decision_name(c));
        if (expected == Decision::kModifyArgs) {
          std::string first = a == Decision::kModifyArgs ? "a" : b == Decision::kModifyArgs ? "b" : "c";
          BOOST_TEST(v.modified_args.text == "{\"by\":\"" + first + "\"}");  // the first modify_args wins
        }
        BOOST_TEST(v.decisions.size() == 3u);
      }
    }
  }
  BOOST_TEST((resolve_decisions(HookEvent::kPreToolUse, {}).resolved == Decision::kAllow));
}

BOOST_AUTO_TEST_CASE(other_events_every_combination) {
  // stop > system_message > append_context > continue.
  const std::vector<Decision> kinds = {Decision::kContinue, Decision::kAppendContext,
                                       Decision::kSystemMessage, Decision::kStop};
  auto rank = [](Decision x) {
    return x == Decision::kStop            ? 3
           : x == Decision::kSystemMessage ? 2
           : x == Decision::kAppendContext ? 1
                                           : 0;
  };
  for (HookEvent event :
       {HookEvent::kTurnStart, HookEvent::kTurnEnd, HookEvent::kPostToolUse, HookEvent::kAgentStop}) {
    for (Decision a : kinds) {
      for (Decision b : kinds) {
        HookVerdict v = resolve_decisions(event, {d(a, "a", "from a"), d(b, "b", "from b")});
        Decision expected = rank(a) >= rank(b) ? a : b;
        BOOST_TEST((v.resolved == expected), decision_name(a) << "," << decision_name(b));
        BOOST_TEST(v.decisions.size() == 2u);  // every decision is kept, messages and all
        BOOST_TEST(v.decisions[0].message == "from a");
        BOOST_TEST(v.decisions[1].message == "from b");
      }
    }
  }
  BOOST_TEST((resolve_decisions(HookEvent::kTurnEnd, {}).resolved == Decision::kContinue));
}

BOOST_AUTO_TEST_CASE(decisions_fit_their_events) {
  BOOST_TEST(decision_fits(HookEvent::kPreToolUse, Decision::kDeny));
  BOOST_TEST(!decision_fits(HookEvent::kPreToolUse, Decision::kStop));
  BOOST_TEST(!decision_fits(HookEvent::kTurnEnd, Decision::kDeny));
  BOOST_TEST(decision_fits(HookEvent::kTurnEnd, Decision::kAppendContext));
  for (auto name : {"AgentStart", "TurnStart", "TurnEnd", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                    "AgentStop"}) {
    auto e = hook_event_from_name(name);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(hook_event_name(*e) == name);
  }
}

BOOST_AUTO_TEST_CASE(registry_matches_tool_names_by_regex) {
  HookRegistry r;
  auto allow = [](const HookInput&) { return HookDecision{.decision = Decision::kAllow}; };
  CHECK_OK(r.add(HookDefinition{
      .name = "shell-only", .event = HookEvent::kPreToolUse, .matcher = "^shell$", .function = allow}));
  CHECK_OK(r.add(HookDefinition{
      .name = "files", .event = HookEvent::kPreToolUse, .matcher = "_file$", .function = allow}));
  CHECK_OK(r.add(HookDefinition{.name = "all", .event = HookEvent::kPreToolUse, .function = allow}));
  CHECK_OK(r.add(HookDefinition{
      .name = "turns", .event = HookEvent::kTurnEnd, .matcher = "ignored", .function = allow}));
  auto names = [&](HookEvent e, const std::string& tool) {
    std::vector<std::string> out;
    for (const auto& h : r.matching(e, tool)) out.push_back(h->definition.name);
    return out;
  };
  BOOST_TEST((names(HookEvent::kPreToolUse, "shell") == std::vector<std::string>{"shell-only", "all"}));
  BOOST_TEST((names(HookEvent::kPreToolUse, "read_file") == std::vector<std::string>{"files", "all"}));
  BOOST_TEST((names(HookEvent::kTurnEnd, "") ==
              std::vector<std::string>{"turns"}));  // matchers apply to tool events only
  BOOST_TEST(r.add(HookDefinition{.name = "bad", .matcher = "(", .function = allow}).is_invalid_argument());
  BOOST_TEST(r.add(HookDefinition{.name = "all", .function = allow}).is_invalid_argument());
  BOOST_TEST(r.add(HookDefinition{.name = "neither"}).is_invalid_argument());
  BOOST_TEST(r.remove("all"));
  BOOST_TEST((names(HookEvent::kPreToolUse, "shell") == std::vector<std::string>{"shell-only"}));
}

BOOST_AUTO_TEST_CASE(failing_hooks_are_skipped) {
  HookRegistry r;
  CHECK_OK(r.add(HookDefinition{
      .name = "throws", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) -> HookDecision {
        throw std::runtime_error("boom");
      }}));
  CHECK_OK(r.add(
      HookDefinition{.name = "wrong", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kStop};
                     }}));
  CHECK_OK(r.add(
      HookDefinition{.name = "denies", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) {
                       return HookDecision{.decision = Decision::kDeny, .reason = "no"};
                     }}));
  HookVerdict v = run_hooks(r.matching(HookEvent::kPreToolUse, "shell"),
                            HookInput{.event = HookEvent::kPreToolUse, .tool_name = "shell"});
  BOOST_TEST((v.resolved == Decision::kDeny));
  BOOST_REQUIRE(v.decisions.size() == 1u);
  BOOST_TEST(v.decisions[0].hook_name == "denies");
  BOOST_REQUIRE(v.failures.size() == 2u);
  BOOST_TEST(v.failures[0].error.find("hook throws threw: boom") != std::string::npos);
  BOOST_TEST(v.failures[1].error.find("PreToolUse hooks cannot make") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(command_hooks_read_json_and_answer_json) {
  testing::TempDir dir;
  std::string script = dir.sub("hook.sh");
  // Denies commands that mention rm; reads the input from stdin.
  std::ofstream(script)
      << "#!/bin/sh\ninput=$(cat)\necho diagnostics on stdout first\n"
         "case \"$input\" in *'rm '*) echo '{\"decision\":\"deny\",\"reason\":\"no rm\"}';; "
         "*) echo '{\"decision\":\"modify_args\",\"args\":{\"command\":\"ls\"}}';; esac\n";
  HookRegistry r;
  CHECK_OK(r.add(
      HookDefinition{.name = "guard", .event = HookEvent::kPreToolUse, .command = {"/bin/sh", script}}));
  CHECK_OK(r.add(HookDefinition{.name = "slow",
                                .event = HookEvent::kPreToolUse,
                                .command = {"/bin/sh", "-c", "sleep 5"},
                                .timeout_ms = 200}));
  CHECK_OK(r.add(HookDefinition{
      .name = "garbage", .event = HookEvent::kPreToolUse, .command = {"/bin/sh", "-c", "echo not json"}}));
  HookInput in{
      .event = HookEvent::kPreToolUse, .tool_name = "shell", .args = JsonText{R"({"command":"rm -rf x"})"}};
  HookVerdict v = run_hooks(r.matching(in.event, in.tool_name), in);
  BOOST_TEST((v.resolved == Decision::kDeny));
  BOOST_TEST(v.reason == "no rm");
  BOOST_REQUIRE(v.failures.size() == 2u);
  BOOST_TEST(v.failures[0].error.find("hook slow timed out after 200 ms") != std::string::npos);
  BOOST_TEST(v.failures[1].error.find("hook garbage printed something that is not a JSON object") !=
             std::string::npos);
  in.args.text = R"({"command":"cat x"})";
  HookVerdict m = run_hooks(r.matching(in.event, in.tool_name), in);
  BOOST_TEST((m.resolved == Decision::kModifyArgs));
  BOOST_TEST(m.modified_args.text == R"({"command":"ls"})");
}

// A shell command may print any bytes, and a PostToolUse hook reads its output.
BOOST_AUTO_TEST_CASE(a_command_hook_reads_output_that_is_not_utf8) {
  HookRegistry r;
  CHECK_OK(r.add(HookDefinition{
      .name = "stopper",
      .event = HookEvent::kPostToolUse,
      .command = {"/bin/sh", "-c", "grep -q bin && echo '{\"decision\":\"stop\",\"reason\":\"seen\"}'"}}));
  HookInput in{.event = HookEvent::kPostToolUse,
               .tool_name = "shell",
               .args = JsonText{R"({"command":"x"})"},
               .result = "bin\xFF\xFE output"};
  HookVerdict v = run_hooks(r.matching(in.event, in.tool_name), in);
  BOOST_TEST(v.failures.empty());
  BOOST_TEST((v.resolved == Decision::kStop));
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- scenarios
BOOST_AUTO_TEST_SUITE(scenarios)

Status parse(const std::string& text) {
  Scenario s;
  return parse_scenario(text, "s.json", &s);
}

BOOST_AUTO_TEST_CASE(malformed_scenarios_name_the_file_and_the_entry) {
  struct Case {
    std::string text;
    std::string message;
  };
  std::vector<Case> cases = {
      {"not json", "s.json is not valid JSON: parse error at line 1, column 2"},
      {std::string(200, '[') + std::string(200, ']'), "s.json: JSON nested deeper than 128 levels"},
      {"[]", "s.json: must be a JSON object"},
      {R"({"replies": []})", "s.json: \"replies\" is empty"},
      {R"({"replies": [{"text": "a"}, {"tool_calls": [{"name": "shell", "args": [1]}]}]})",
       "s.json: replies[1].tool_calls[0].args: must be an object"},
      {R"({"replies": [{"text": 3}]})", "s.json: replies[0].text: must be a string"},
      {R"({"replies": [{"txt": "a"}]})", "s.json: replies[0]: unknown key \"txt\""},
      {R"({"replies": [{"error": {"status": 999}}]})",
       "s.json: replies[0].error.status: must be an HTTP error status, 400 to 599, not 999"},
      {R"({"replies": [{"error": {"status": 200}}]})",
       "s.json: replies[0].error.status: must be an HTTP error status, 400 to 599, not 200"},
      {R"({"replies": [{"error": {"kind": "meteor"}}]})",
       "s.json: replies[0].error.kind: must be connection_reset"},
      {R"({"replies": [{"text": "a", "usage": {"input": -1}}]})",
       "s.json: replies[0].usage.input: must be a whole number"},
  };
  for (const auto& c : cases) {
    Status s = parse(c.text);
    BOOST_TEST(s.is_invalid_argument(), c.text);
    BOOST_TEST(s.message().find(c.message) == 0u, s.message() << " | expected: " << c.message);
  }
  Scenario missing;
  BOOST_TEST(load_scenario("/nonexistent/s.json", &missing).message().find("/nonexistent/s.json") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_provider_plays_entries_by_attempt_and_runs_out_clearly) {
  Scenario s;
  CHECK_OK(parse_scenario(R"({"replies": [
      {"text": "look", "tool_calls": [{"name": "shell", "args": {"command": "ls"}}], "latency_ms": 40},
      {"error": {"status": 429, "retry_after_ms": 1000}},
      {"error": {"kind": "connection_reset"}},
      {"text": "done", "usage": {"input": 10, "output": 2, "cache_read": 5, "cache_write": 1}}]})",
                          "s.json", &s));
  ScriptedProvider p(s);
  std::vector<StreamDelta> deltas;
  ProviderRequest req{
      .session_id = "x", .turn = 1, .attempt = 1, .attempt_index = 0, .system_prompt = std::string(400, 'p')};
  ProviderReply r0 = p.call(req, [&](const StreamDelta& d) { deltas.push_back(d); });
  BOOST_TEST(r0.ok);
  BOOST_TEST(r0.latency_ms == 40u);
  BOOST_REQUIRE(r0.response.tool_calls.size() == 1u);
  BOOST_TEST(r0.response.tool_calls[0].id == "call_1_1");
  BOOST_TEST(r0.response.finish_reason == "tool_calls");
  BOOST_TEST(r0.response.usage.input == 101u);  // estimated: 400 chars / 4 + 1
  BOOST_TEST(deltas.size() == 2u);              // the text, then the tool call
  req.attempt_index = 1;
  ProviderReply r1 = p.call(req, {});
  BOOST_TEST(!r1.ok);
  BOOST_TEST(r1.failure.http_status == 429u);
  BOOST_TEST(r1.failure.has_retry_after);
  BOOST_TEST(r1.failure.retry_after_ms == 1000u);
  req.attempt_index = 2;
  BOOST_TEST(p.call(req, {}).failure.transport);
  req.attempt_index = 3;
  ProviderReply r3 = p.call(req, {});
  BOOST_TEST((r3.response.usage == TokenUsage{10, 2, 5, 1}));
  req.attempt_index = 4;
  ProviderReply out = p.call(req, {});
  BOOST_TEST(!out.ok);
  BOOST_TEST(!out.failure.transport);
  BOOST_TEST(out.failure.error == "scenario s.json has 4 replies; turn 1 attempt 1 asked for reply 5");
  BOOST_TEST((classify(RetryConfig{}, out.failure) == ErrorCategory::kPermanent));
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- pricing and config
BOOST_AUTO_TEST_SUITE(pricing_and_config)

BOOST_AUTO_TEST_CASE(cost_follows_the_price_table) {
  PriceTable t{{"m", ModelPrice{3, 15, 0.3, 3.75}}};
  BOOST_TEST(cost_usd(t, "m", TokenUsage{1'000'000, 100'000, 2'000'000, 0}) == 3.0 + 1.5 + 0.6,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(cost_usd(t, "other", TokenUsage{1'000'000, 0, 0, 0}) == 0.0);
}

BOOST_AUTO_TEST_CASE(the_effective_configuration_reads_back_as_itself) {
  // What session.configured stores must load again to the same configuration.
  Config c;
  std::vector<std::string> warnings;
  CHECK_OK(parse_config(R"({"provider": {"name": "openai", "model": "m", "temperature": 0.5,
                                         "headers": {"X-Team": "blue"}},
                            "retry": {"max_retries": 5}, "session": {"max_turns": 7},
                            "prompt": {"identity": "You are tested."},
                            "hooks": [{"name": "h", "event": "PreToolUse", "command": ["/bin/true"]}]})",
                        "c.json", &c, &warnings));
  Config back;
  warnings.clear();
  CHECK_OK(parse_config(config_to_json(c).dump(), "stored", &back, &warnings));
  nlohmann::json stored = config_to_json(c), loaded = config_to_json(back);
  BOOST_TEST(stored["provider"]["headers"] == nlohmann::json::array({"X-Team"}));
  BOOST_TEST(back.provider.headers.empty());  // a header value may be a credential: not stored
  stored["provider"].erase("headers");
  loaded["provider"].erase("headers");
  BOOST_TEST(stored.dump() == loaded.dump());
  BOOST_TEST(warnings.size() == 1u);
  Config defaults, defaults_back;
  CHECK_OK(parse_config(config_to_json(defaults).dump(), "stored", &defaults_back, &warnings));
  BOOST_TEST(config_digest(defaults_back) == config_digest(defaults));
}

BOOST_AUTO_TEST_CASE(defaults_without_a_file) {
  Config c;
  std::vector<std::string> warnings;
  CHECK_OK(parse_config("{}", "c.json", &c, &warnings));
  BOOST_TEST(warnings.empty());
  BOOST_TEST(c.retry.max_retries == 3u);
  BOOST_TEST(c.retry.base_delay_ms == 1000u);
  BOOST_TEST(c.retry.max_delay_ms == 30000u);
  BOOST_TEST(c.max_turns == 20u);
  BOOST_TEST(c.tools_enabled.size() == 4u);
  BOOST_TEST(c.prices.count("scripted-1") == 1u);
}

BOOST_AUTO_TEST_CASE(values_are_read_and_unknown_keys_warned) {
  Config c;
  std::vector<std::string> warnings;
  CHECK_OK(parse_config(R"({
      "agent_id": "a1",
      "provider": {"model": "m2", "scenario": "x.json"},
      "retry": {"max_retries": 5, "base_delay_ms": 10, "max_delay_ms": 100, "retryable_statuses": [503]},
      "session": {"max_turns": 7, "context_max_chars": 5000, "instructions": "be nice", "snapshot_every_turns": 3},
      "prompt": {"identity": "I am", "workflows": [{"name": "w", "description": "d"}]},
      "tools": {"enabled": ["shell"], "shell": {"timeout_ms": 99, "blocked_patterns": ["rm\\s+-rf"]}, "files": {"max_read_bytes": 10},
                "env": {"inherit": "core", "include": ["GH_TOKEN"], "exclude": ["AWS_*"]},
                "sandbox": "read-only", "network": "off", "sandbox_readable": ["/usr", "/etc"],
                "sandbox_writable": ["/var/cache/x"]},
      "hooks": [{"name": "h", "event": "TurnEnd", "command": "echo '{}'", "timeout_ms": 50}],
      "prices": {"m2": {"input_per_mtok": 1, "output_per_mtok": 2}},
      "mystery": 1,
      "retry_typo": {}
    })",
                        "c.json", &c, &warnings));
  BOOST_TEST(c.agent_id == "a1");
  BOOST_TEST(c.provider.model == "m2");
  BOOST_TEST(c.retry.max_retries == 5u);
  BOOST_TEST((c.retry.retryable_statuses == std::vector<uint32_t>{503}));
  BOOST_TEST(c.max_turns == 7u);
  BOOST_TEST(c.snapshot_every_turns == 3u);
  BOOST_TEST(c.prompt.workflows.size() == 1u);
  BOOST_TEST((c.tools_enabled == std::vector<std::string>{"shell"}));
  BOOST_TEST(c.shell.timeout_ms == 99u);
  BOOST_TEST(c.files.max_read_bytes == 10u);
  BOOST_TEST(c.tool_env.inherit == "core");
  BOOST_TEST((c.tool_env.include == std::vector<std::string>{"GH_TOKEN"}));
  BOOST_TEST((c.tool_env.exclude == std::vector<std::string>{"AWS_*"}));
  BOOST_TEST(c.sandbox.mode == "read-only");
  BOOST_TEST(c.sandbox.network == "off");
  BOOST_TEST((c.sandbox.readable == std::vector<std::string>{"/usr", "/etc"}));
  BOOST_TEST((c.sandbox.writable == std::vector<std::string>{"/var/cache/x"}));
  BOOST_REQUIRE(c.hooks.size() == 1u);
  BOOST_TEST((c.hooks[0].command == std::vector<std::string>{"/bin/sh", "-c", "echo '{}'"}));
  BOOST_TEST(c.prices.at("m2").output_per_mtok == 2.0);
  BOOST_REQUIRE(warnings.size() == 2u);
  BOOST_TEST(warnings[0] == "c.json: unknown key mystery (ignored)");
  BOOST_TEST(warnings[1] == "c.json: unknown key retry_typo (ignored)");
  BOOST_TEST(config_digest(c) != config_digest(Config{}));
}

BOOST_AUTO_TEST_CASE(an_unreadable_identity_file_is_a_warning_that_names_it) {
  testing::TempDir dir;
  auto load_with = [&](const std::string& prompt) {
    std::ofstream(dir.sub("c.json")) << R"({"prompt": )" << prompt << "}";
    Config c;
    std::vector<std::string> warnings;
    CHECK_OK(load_config(dir.sub("c.json"), &c, &warnings));
    return warnings;
  };
  auto warnings = load_with(R"({"identity_file": "/nonexistent/identity.md"})");
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(warnings[0] ==
             dir.sub("c.json") +
                 ": prompt.identity_file: the identity file /nonexistent/identity.md does not exist; "
                 "the identity is the built-in one until it can be read");
  // Endless, blocking or too large: refused before a byte is read, and never
  // read at a turn either.
  BOOST_REQUIRE(::mkfifo(dir.sub("fifo").c_str(), 0600) == 0);
  std::ofstream(dir.sub("big.md")) << std::string((1u << 20) + 1, 'x');
  for (auto [file, why] : {std::pair{std::string("/dev/zero"), std::string("is a character device")},
                           std::pair{dir.sub("fifo"), std::string("is a FIFO")},
                           std::pair{dir.sub("big.md"), std::string("is larger than 1 MiB")}}) {
    warnings =
        load_with(R"({"identity_file": ")" + file + R"(", "custom_instructions_file": ")" + file + "\"}");
    BOOST_REQUIRE(warnings.size() == 2u);
    BOOST_TEST(
        warnings[0].find("prompt.identity_file: the identity file " + file + " " + why) != std::string::npos,
        warnings[0]);
    BOOST_TEST(warnings[1].find("prompt.custom_instructions_file: the custom instructions file " + file +
                                " " + why) != std::string::npos,
               warnings[1]);
    PromptConfig prompt{.identity_file = file, .custom_instructions_file = file};
    PromptInputs in{.config = &prompt};
    AssembledPrompt assembled = assemble_prompt(in);
    BOOST_TEST(assembled.text.find(default_identity()) == 0u);
    BOOST_TEST(assembled.segments.size() == 1u);
  }
  // A stored configuration (a bundle's) names files that are never looked at.
  Config stored;
  std::vector<std::string> none;
  CHECK_OK(parse_config(R"({"prompt": {"identity_file": ")" + dir.sub("fifo") + R"("}})", "stored", &stored,
                        &none));
  BOOST_TEST(none.empty());
}

BOOST_AUTO_TEST_CASE(bad_values_are_rejected_with_their_key_path) {
  struct Case {
    std::string text;
    std::string message;
  };
  std::vector<Case> cases = {
      {R"({"retry": {"max_retries": -1}})",
       "c.json: retry.max_retries: must be a whole number from 0 to 100, got -1"},
      {R"({"retry": {"base_delay_ms": 5000, "max_delay_ms": 10}})",
       "c.json: retry.base_delay_ms: is 5000, more than max_delay_ms (10)"},
      {R"({"retry": {"retryable_statuses": [42]}})",
       "c.json: retry.retryable_statuses[0]: must be an HTTP status"},
      {R"({"session": {"max_turns": 0}})", "c.json: session.max_turns: must be a whole number from 1"},
      {R"({"session": {"instructions": 5}})", "c.json: session.instructions: must be a string"},
      {R"({"tools": {"enabled": ["shel"]}})", "c.json: tools.enabled[0]: \"shel\" is not a built-in tool"},
      {R"({"tools": {"shell": {"blocked_patterns": ["("]}}})", "c.json: tools.shell.blocked_patterns:"},
      {R"({"tools": {"shell": {"timeout_ms": 5000, "max_timeout_ms": 1000}}})",
       "c.json: tools.shell.timeout_ms: is 5000, more than tools.shell.max_timeout_ms (1000)"},
      {R"({"tools": {"shell": {"timeout_ms": 700000}}})",
       "c.json: tools.shell.timeout_ms: is 700000, more than tools.shell.max_timeout_ms (600000)"},
      {R"({"tools": {"env": {"inherit": "some"}}})",
       "c.json: tools.env: inherit \"some\" must be \"all\", \"core\" or \"none\""},
      {R"({"tools": {"env": {"include": ["GH_TOKEN", ""]}}})", "c.json: tools.env: include[1] is empty"},
      {R"({"tools": {"env": {"exclude": ["A B"]}}})",
       "c.json: tools.env: exclude[0] \"A B\" is not a variable name"},
      {R"({"tools": {"env": {"include": ["X"], "exclude": ["X"]}}})",
       "c.json: tools.env: \"X\" is in both include and exclude"},
      {R"({"tools": {"env": {"include": "GH_TOKEN"}}})",
       "c.json: tools.env.include: must be an array of strings"},
      {R"({"tools": {"env": []}})", "c.json: tools.env: must be an object"},
      {R"({"tools": {"sandbox": "strict"}})",
       "c.json: tools.sandbox: must be \"auto\", \"off\", \"workspace-write\" or \"read-only\", got "
       "\"strict\""},
      {R"({"tools": {"network": false}})", "c.json: tools.network: must be a string"},
      {R"({"tools": {"network": "offline"}})",
       "c.json: tools.network: must be \"on\" or \"off\", got \"offline\""},
      {R"({"tools": {"sandbox_writable": ["/ok", "rel"]}})",
       "c.json: tools.sandbox_writable[1]: must be an absolute path, got \"rel\""},
      {R"({"hooks": [{"name": "h", "event": "BeforeLunch", "command": "x"}]})",
       "c.json: hooks[0].event: \"BeforeLunch\" is not a hook event"},
      {R"({"hooks": [{"name": "h", "event": "TurnEnd", "matcher": "(", "command": "x"}]})",
       "c.json: hooks[0].matcher: \"(\" is not a valid regular expression: missing ) (at byte 1, the end)"},
      {R"({"hooks": [{"name": "h", "event": "TurnEnd"}]})",
       "c.json: hooks[0].command: must be a command line string"},
      {R"({"provider": {"name": "gpt"}})", "c.json: provider.name: \"gpt\" is not a provider of this build"},
      {R"({"prices": {"m": {"input_per_mtok": "cheap"}}})",
       "c.json: prices.m.input_per_mtok: must be a number >= 0"},
      {"[1]", "c.json: the file: must be an object"},
  };
  for (const auto& c : cases) {
    Config config;
    std::vector<std::string> warnings;
    Status s = parse_config(c.text, "c.json", &config, &warnings);
    BOOST_TEST(s.is_invalid_argument(), c.text);
    BOOST_TEST(s.message().find(c.message) == 0u, s.message() << " | expected: " << c.message);
  }
}

BOOST_AUTO_TEST_SUITE_END()
