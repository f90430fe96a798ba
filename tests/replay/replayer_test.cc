// Replay-to-reproduce: sessions recorded by the real runtime (scripted
// provider, real built-in tools in a workspace) replayed with the same and
// with changed code and configuration.
#define BOOST_TEST_MODULE replayer_test
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "replay/replayer.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "runtime/session_setup.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The files under `dir`, relative, sorted.
std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

struct ReplayFixture {
  testing::TempDir dir;
  Config config;
  std::unique_ptr<Runtime> rt;
  std::vector<HookDefinition> cpp_hooks;  // registered in the recording runtime

  ReplayFixture() {
    fs::create_directories(dir.sub("ws"));
    config.workspace = dir.sub("ws");
  }

  // Records session `id` on `scenario_json` (a path when it ends in .json).
  SessionOutcome record(const std::string& scenario, const std::string& task, const std::string& id = "s1") {
    if (scenario.size() > 5 && scenario.compare(scenario.size() - 5, 5, ".json") == 0) {
      config.provider.scenario = scenario;
    } else {
      config.provider.scenario = dir.sub("scenario.json");
      std::ofstream(config.provider.scenario) << scenario;
    }
    rt.reset();  // a runtime plays the scenario it opened with
    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
    for (auto& h : cpp_hooks) CHECK_OK(rt->register_hook(h));
    cpp_hooks.clear();
    std::string sid;
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = task}, &sid));
    SessionOutcome out;
    CHECK_OK(rt->wait(sid, 60s, &out));
    return out;
  }

  // Replays `id` with `replay_config`, the built-in tools it enables, its
  // hooks and `extra_hooks`; `edit_tools` may change the registry.
  ReplayReport replay(const std::string& id, const Config& replay_config, std::vector<HookDefinition> extra_hooks = {},
                      std::function<void(ToolRegistry&)> edit_tools = {}, uint64_t until_turn = 0) {
    ReplayOptions options{.tools = std::make_shared<ToolRegistry>(),
                          .hooks = std::make_shared<HookRegistry>(),
                          .settings =
                              [&replay_config](const SessionState& s) {
                                return session_settings(replay_config, s.workspace, s.max_turns, s.instructions);
                              },
                          .until_turn = until_turn};
    CHECK_OK(add_builtin_tools(replay_config, nullptr, options.tools.get()));
    CHECK_OK(add_config_hooks(replay_config, options.hooks.get()));
    for (auto& h : extra_hooks) CHECK_OK(options.hooks->add(std::move(h)));
    if (edit_tools) edit_tools(*options.tools);
    ReplayReport report;
    CHECK_OK(replay_session(runtime_log(*rt), id, options, &report));
    return report;
  }

  uint64_t last_seq(const std::string& id) {
    uint64_t last = 0;
    CHECK_OK(runtime_log(*rt).last_seq(id, &last));
    return last;
  }

  Event recorded(const std::string& id, uint64_t seq) {
    std::vector<Event> events;
    CHECK_OK(runtime_log(*rt).read(id, seq, seq, &events));
    BOOST_REQUIRE(events.size() == 1u);
    return events[0];
  }

  // The seq of the first recorded event of type T.
  template <class T>
  uint64_t first_seq(const std::string& id) {
    std::vector<Event> events;
    CHECK_OK(rt->read_events(id, 1, &events));
    for (const auto& e : events) {
      if (std::holds_alternative<T>(e.body)) return e.seq;
    }
    BOOST_FAIL("no such event recorded");
    return 0;
  }
};

const char* kTwoTurnsWithRetry = R"({"replies": [
    {"text": "Writing a file.", "tool_calls": [{"name": "write_file", "args": {"path": "made.txt", "content": "x\n"}}]},
    {"error": {"status": 429, "retry_after_ms": 300}},
    {"text": "Counting.", "tool_calls": [{"name": "shell", "args": {"command": "echo hi > shell-made.txt; ls | wc -l"}}]},
    {"text": "Done."},
    {"text": "Again."}, {"text": "Forked."}, {"text": "Spare."}]})";

void require_diverged(const ReplayReport& r) {
  BOOST_REQUIRE_MESSAGE(r.divergence.has_value(), "the replay was identical: " << r.events << " events");
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(replayer, ReplayFixture)

BOOST_AUTO_TEST_CASE(shipped_scenarios_replay_identically_and_the_replay_touches_nothing) {
  int n = 0;
  for (const char* name : {"quickstart.json", "embed.json", "demo.json", "torture.json"}) {
    std::string id = "shipped" + std::to_string(++n);
    record(std::string(PROJECT_DIR) + "/examples/scenarios/" + name, "do the task", id);
    // What the run made is removed: a replay that ran a tool would make it again.
    fs::remove_all(dir.sub("ws"));
    fs::create_directories(dir.sub("ws"));
    ReplayReport r = replay(id, config);
    BOOST_TEST(r.identical(), name << ": diverged at seq " << (r.divergence ? r.divergence->seq : 0));
    BOOST_TEST(r.events == last_seq(id), name);
    BOOST_TEST(r.turns > 0u, name);
    BOOST_TEST(files_under(dir.sub("ws")).empty(), name << ": the replay wrote into the workspace");
  }
}

BOOST_AUTO_TEST_CASE(until_turn_stops_after_that_checkpoint) {
  record(kTwoTurnsWithRetry, "go");
  ReplayReport r = replay("s1", config, {}, {}, 1);
  BOOST_TEST(r.identical());
  BOOST_TEST(r.turns == 1u);
  BOOST_TEST(r.events < last_seq("s1"));
  BOOST_TEST(std::holds_alternative<TurnCommitted>(recorded("s1", r.events).body));
}

BOOST_AUTO_TEST_CASE(a_changed_identity_prompt_diverges_at_the_first_prompt) {
  record(kTwoTurnsWithRetry, "go");
  Config changed = config;
  changed.prompt.identity = "You are another agent.";
  ReplayReport r = replay("s1", changed);
  require_diverged(r);
  BOOST_TEST(r.divergence->seq == first_seq<PromptAssembled>("s1"));
  BOOST_TEST(r.divergence->turn == 1u);
  BOOST_REQUIRE(r.divergence->actual.has_value());
  BOOST_TEST(r.divergence->actual->type_name() == "prompt.assembled");
  bool digest = false;
  for (const auto& f : r.divergence->fields) digest |= f.field == "digest";
  BOOST_TEST(digest);
  BOOST_TEST(r.divergence->before.size() == 3u);
}

BOOST_AUTO_TEST_CASE(an_added_pre_tool_use_deny_hook_diverges_where_the_call_was_requested) {
  record(kTwoTurnsWithRetry, "go");
  std::vector<HookDefinition> deny{HookDefinition{
      .name = "no-writes",
      .event = HookEvent::kPreToolUse,
      .matcher = "^write_file$",
      .function = [](const HookInput&) {
        return HookDecision{.hook_name = "no-writes", .decision = Decision::kDeny, .reason = "read-only"};
      }}};
  ReplayReport r = replay("s1", config, std::move(deny));
  require_diverged(r);
  BOOST_TEST(r.divergence->seq == first_seq<ToolRequested>("s1"));
  BOOST_REQUIRE(!r.divergence->fields.empty());
  BOOST_TEST(r.divergence->fields[0].field == "type");
  BOOST_TEST(r.divergence->fields[0].expected == "tool.requested");
  BOOST_TEST(r.divergence->fields[0].actual == "hook.decided");
  BOOST_TEST(get_if<HookDecided>(*r.divergence->actual)->decision == "deny");
}

BOOST_AUTO_TEST_CASE(a_tool_schema_changed_by_the_embedding_program_diverges_at_the_prompt) {
  record(kTwoTurnsWithRetry, "go");
  ReplayReport r = replay("s1", config, {}, [](ToolRegistry& tools) {
    auto shell = tools.find("shell");
    BOOST_REQUIRE(shell);
    ToolDefinition changed = *shell;
    changed.spec.schema = JsonText{R"({"type":"object","properties":{"cmd":{"type":"string"}}})"};
    BOOST_REQUIRE(tools.remove("shell"));
    CHECK_OK(tools.add(std::move(changed)));
  });
  require_diverged(r);
  BOOST_TEST(r.divergence->seq == first_seq<PromptAssembled>("s1"));
  bool segments = false;
  for (const auto& f : r.divergence->fields) segments |= f.field == "segments";
  BOOST_TEST(segments);
}

BOOST_AUTO_TEST_CASE(fewer_retries_diverge_at_the_failed_attempt) {
  record(kTwoTurnsWithRetry, "go");
  Config changed = config;
  changed.retry.max_retries = 0;
  ReplayReport r = replay("s1", changed);
  require_diverged(r);
  BOOST_TEST(r.divergence->seq == first_seq<LlmFailed>("s1"));
  BOOST_TEST(r.divergence->turn == 2u);
  std::vector<std::string> fields;
  for (const auto& f : r.divergence->fields) fields.push_back(f.field);
  BOOST_TEST((fields == std::vector<std::string>{"retry_delay_ms", "will_retry"}));
}

BOOST_AUTO_TEST_CASE(a_smaller_context_budget_diverges_where_the_context_is_trimmed) {
  record(kTwoTurnsWithRetry, "go");
  Config changed = config;
  changed.context_max_chars = 60;
  ReplayReport r = replay("s1", changed);
  require_diverged(r);
  BOOST_REQUIRE(r.divergence->actual.has_value());
  BOOST_TEST(r.divergence->actual->type_name() == "context.trimmed");
  BOOST_TEST(r.divergence->expected->type_name() == "llm.requested");
}

BOOST_AUTO_TEST_CASE(a_cpp_hook_runs_for_real_and_a_changed_decision_diverges_at_it) {
  auto hook = [](Decision d) {
    return HookDefinition{.name = "turn-end", .event = HookEvent::kTurnEnd, .function = [d](const HookInput&) {
                            return HookDecision{.hook_name = "turn-end", .decision = d, .message = "noted"};
                          }};
  };
  cpp_hooks.push_back(hook(Decision::kAppendContext));
  record(kTwoTurnsWithRetry, "go");
  BOOST_TEST(replay("s1", config, {hook(Decision::kAppendContext)}).identical());
  ReplayReport r = replay("s1", config, {hook(Decision::kSystemMessage)});
  require_diverged(r);
  BOOST_TEST(r.divergence->seq == first_seq<HookDecided>("s1"));
  BOOST_REQUIRE(!r.divergence->fields.empty());
  BOOST_TEST(r.divergence->fields[0].field == "decision");
  // Without the hook the replay misses its decision.
  ReplayReport missing = replay("s1", config);
  require_diverged(missing);
  BOOST_TEST(missing.divergence->seq == first_seq<HookDecided>("s1"));
}

BOOST_AUTO_TEST_CASE(an_embedding_program_replays_through_its_runtime_with_its_own_hooks) {
  auto hook = [](std::string reason) {
    return HookDefinition{.name = "gate",
                          .event = HookEvent::kPreToolUse,
                          .function = [reason](const HookInput&) {
                            return HookDecision{.hook_name = "gate", .decision = Decision::kAllow, .reason = reason};
                          }};
  };
  cpp_hooks.push_back(hook("fine"));
  record(kTwoTurnsWithRetry, "go");
  ReplayReport same;
  CHECK_OK(rt->replay("s1", 0, &same));
  BOOST_TEST(same.identical());
  BOOST_TEST(same.events == last_seq("s1"));
  BOOST_REQUIRE(rt->unregister_hook("gate"));
  CHECK_OK(rt->register_hook(hook("changed")));
  ReplayReport changed;
  CHECK_OK(rt->replay("s1", 0, &changed));
  require_diverged(changed);
  BOOST_TEST(changed.divergence->seq == first_seq<HookDecided>("s1"));
  BOOST_TEST(changed.divergence->fields[0].field == "reason");
}

BOOST_AUTO_TEST_CASE(a_further_user_message_and_a_fork_replay_identically) {
  record(kTwoTurnsWithRetry, "go");
  CHECK_OK(rt->send_message("s1", "and again"));
  SessionOutcome out;
  CHECK_OK(rt->wait("s1", 60s, &out));
  BOOST_TEST(replay("s1", config).identical());
  std::string fork;
  CHECK_OK(rt->fork_session("s1", 1, Runtime::ForkOptions{.id = "f1", .task = "a different second turn"}, &fork));
  CHECK_OK(rt->wait(fork, 60s, &out));
  ReplayReport r = replay("f1", config);
  BOOST_TEST(r.identical(), "diverged at seq " << (r.divergence ? r.divergence->seq : 0));
  BOOST_TEST(r.history > 0u);
  BOOST_TEST(r.events == last_seq("f1"));
}

// A run stopped mid-tool (the runtime closed: session.stopped), then resumed
// in step or turn mode by another runtime: it replays as it ran, stop included,
// and so does the run as it stood when it was stopped.
BOOST_AUTO_TEST_CASE(a_stopped_and_resumed_run_replays_identically) {
  for (auto mode : {Runtime::ResumeMode::kStep, Runtime::ResumeMode::kTurn}) {
    const std::string id = mode == Runtime::ResumeMode::kStep ? "stopped-step" : "stopped-turn";
    config.provider.scenario = dir.sub("stop.json");
    // (the call waits the first time only: turn mode runs it again)
    std::ofstream(config.provider.scenario) << R"({"replies": [
        {"text": "Waiting.", "tool_calls": [{"name": "shell", "args": {"command": "test -e )" << id
                                            << R"( || { touch )" << id << R"(; sleep 30; }"}}]},
        {"text": "Waiting again.", "tool_calls": [{"name": "shell", "args": {"command": "true"}}]},
        {"text": "Done."}]})";
    rt.reset();
    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
    std::string sid;
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "wait"}, &sid));
    bool running = false;
    for (int i = 0; i < 1000 && !running; ++i) {
      std::vector<Event> events;
      CHECK_OK(rt->read_events(id, 1, &events));
      for (const auto& e : events) running = running || std::holds_alternative<ToolRequested>(e.body);
      if (!running) std::this_thread::sleep_for(10ms);
    }
    BOOST_REQUIRE(running);
    rt->set_stop_reason("the test stopped it");
    rt.reset();  // stops the session mid-call

    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
    const uint64_t stopped_at = last_seq(id);
    const Event stop = recorded(id, stopped_at);
    const auto* stopped = get_if<SessionStopped>(stop);
    BOOST_REQUIRE_MESSAGE(stopped != nullptr, "the last event is " << stop.type_name());
    BOOST_TEST(stopped->reason == "the test stopped it");
    BOOST_TEST(stopped->pid == static_cast<int64_t>(::getpid()));
    ReplayReport at_stop = replay(id, config);
    BOOST_TEST(at_stop.identical(), "diverged at seq " << (at_stop.divergence ? at_stop.divergence->seq : 0));
    BOOST_TEST(at_stop.events == stopped_at);

    CHECK_OK(rt->resume_session(id, Runtime::ResumeOptions{.mode = mode}));
    SessionOutcome out;
    CHECK_OK(rt->wait(id, 60s, &out));
    BOOST_TEST((out.status == SessionStatus::kCompleted), out.error);
    ReplayReport r = replay(id, config);
    BOOST_TEST(r.identical(), id << " diverged at seq " << (r.divergence ? r.divergence->seq : 0));
    BOOST_TEST(r.events == last_seq(id));
    BOOST_TEST(r.resumes == 1u);
  }
}

// A finished session woken for a message by a runtime configured otherwise:
// the wake records the new configuration, and a replay that follows the
// records goes on as it says from there.
BOOST_AUTO_TEST_CASE(a_session_woken_with_another_configuration_replays_as_recorded) {
  config.prompt.identity = "You are the first agent.";
  record(kTwoTurnsWithRetry, "go");
  const Config first = config;
  rt.reset();
  config.prompt.identity = "You are the second agent.";
  CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
  CHECK_OK(rt->send_message("s1", "and again"));
  SessionOutcome out;
  CHECK_OK(rt->wait("s1", 60s, &out));
  std::vector<Event> events;
  CHECK_OK(rt->read_events("s1", 1, &events));
  std::vector<uint64_t> records;
  for (const auto& e : events)
    if (std::holds_alternative<SessionConfigured>(e.body)) records.push_back(e.seq);
  BOOST_REQUIRE(records.size() == 2u);
  const Event& next = events[records[1]];  // the one after the record
  BOOST_TEST(std::holds_alternative<UserMessage>(next.body), next.type_name());

  // Started as the session started, and told nothing of the change: it diverges at the next prompt.
  ReplayReport stale = replay("s1", first);
  require_diverged(stale);
  BOOST_TEST(stale.divergence->expected->type_name() == "prompt.assembled");
  BOOST_TEST(stale.divergence->seq > records[1]);

  // Following the records: identical.
  ReplayOptions options{.tools = std::make_shared<ToolRegistry>(),
                        .hooks = std::make_shared<HookRegistry>(),
                        .settings = [&first](const SessionState& s) {
                          return session_settings(first, s.workspace, s.max_turns, s.instructions);
                        }};
  CHECK_OK(add_builtin_tools(first, nullptr, options.tools.get()));
  auto changed = std::make_shared<Config>();
  options.reconfigure = [changed](const SessionConfigured& recorded, ReplayConfiguration* then) {
    std::vector<std::string> warnings;
    CARAPACE_RETURN_IF_ERROR(parse_config(recorded.config.text, "recorded", changed.get(), &warnings));
    then->settings = [changed](const SessionState& s) {
      return session_settings(*changed, s.workspace, s.max_turns, s.instructions);
    };
    return Status();
  };
  ReplayReport followed;
  CHECK_OK(replay_session(runtime_log(*rt), "s1", options, &followed));
  BOOST_TEST(followed.identical(), "diverged at seq " << (followed.divergence ? followed.divergence->seq : 0));
  BOOST_TEST(changed->prompt.identity == "You are the second agent.");
}

BOOST_AUTO_TEST_CASE(an_unknown_session_is_not_found) {
  record(kTwoTurnsWithRetry, "go");
  ReplayOptions options{.tools = std::make_shared<ToolRegistry>(),
                        .hooks = std::make_shared<HookRegistry>(),
                        .settings = [this](const SessionState& s) {
                          return session_settings(config, s.workspace, s.max_turns, s.instructions);
                        }};
  ReplayReport report;
  BOOST_TEST(replay_session(runtime_log(*rt), "nobody", options, &report).is_not_found());
}

BOOST_AUTO_TEST_SUITE_END()
