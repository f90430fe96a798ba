// The runtime on the real, multi-threaded scheduler: many sessions at once,
// the built-in tools in a workspace, command hooks, supervision under load.
#define BOOST_TEST_MODULE runtime_test
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/actor_scheduler.h"
#include "actors/caf_types.h"
#include "actors/provider/scripted_provider.h"
#include "actors/session/context_trim.h"
#include "actors/tool/tool_actor.h"
#include "events/fold.h"
#include "replay/fault_plan.h"
#include "replay/verify.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "storage/event_log.h"
#include "storage/session_journal.h"
#include "tests/support/gated_sync_fs.h"
#include "tests/support/printing.h"
#include "tests/support/proc_watch.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;

namespace {

std::string write_file(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.sub(name);
  std::ofstream(path) << text;
  return path;
}

struct RuntimeFixture {
  testing::TempDir dir;
  std::unique_ptr<Runtime> rt;

  void open(const std::string& scenario_json, Config config = {}) {
    config.provider.scenario = write_file(dir, "scenario.json", scenario_json);
    config.workspace = dir.path();
    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
  }

  SessionOutcome run(const std::string& task, const std::string& id = "") {
    std::string sid;
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = task}, &sid));
    SessionOutcome out;
    CHECK_OK(rt->wait(sid, 60s, &out));
    return out;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(runtime, RuntimeFixture)

BOOST_AUTO_TEST_CASE(fifty_sessions_at_once_complete_with_separate_logs) {
  open(R"({"replies": [
      {"text": "step one", "tool_calls": [{"name": "tally", "args": {"n": 1}}]},
      {"text": "step two", "tool_calls": [{"name": "tally", "args": {"n": 2}}, {"name": "tally", "args": {"n": 3}}]},
      {"text": "finished"}]})");
  std::atomic<int> tallies{0};
  CHECK_OK(rt->register_tool(ToolDefinition{
      .spec = {.name = "tally", .description = "counts", .schema = JsonText{R"({"type":"object"})"}},
      .blocking = false,
      .run = [&](const nlohmann::json& args, const ToolContext& ctx) {
        ++tallies;
        return ToolResult{.output = ctx.session_id + " saw " + std::to_string(args.value("n", 0))};
      }}));
  constexpr int kSessions = 50;
  std::vector<std::string> ids;
  std::mutex mu;
  std::map<std::string, std::vector<Event>> heard;
  for (int i = 0; i < kSessions; ++i) {
    std::string id = "par-" + std::to_string(i);
    CHECK_OK(rt->start_session(SessionOptions{.id = id,
                                              .task = "task " + std::to_string(i),
                                              .on_event =
                                                  [&, id](const Event& e) {
                                                    std::lock_guard lock(mu);
                                                    heard[id].push_back(e);
                                                  }},
                               nullptr));
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    SessionOutcome o;
    CHECK_OK(rt->wait(id, 60s, &o));
    BOOST_TEST((o.status == SessionStatus::kCompleted), id);
    BOOST_TEST(o.final_answer == "finished");
    BOOST_TEST(o.turns == 3u);
  }
  BOOST_TEST(tallies.load() == kSessions * 3);
  VerifyReport report;
  CHECK_OK(verify_all(runtime_log(*rt), &report));
  BOOST_TEST(report.ok());
  BOOST_TEST(report.sessions.size() == static_cast<size_t>(kSessions));
  for (const auto& id : ids) {
    std::vector<Event> events;
    CHECK_OK(rt->read_events(id, 1, &events));
    SessionState state;
    CHECK_OK(fold(events, &state));
    // Each log holds its own session only: its task, its tool outputs.
    BOOST_TEST(state.messages[0].text == "task " + id.substr(4));
    for (const auto& m : state.messages) {
      if (m.role == Role::kTool) BOOST_TEST(m.text.rfind(id + " saw", 0) == 0u, m.text);
    }
    BOOST_TEST(state.tool_calls == 3u);
    std::lock_guard lock(mu);
    // Every event, the opening ones included, published in log order.
    BOOST_REQUIRE(heard[id].size() == events.size());
    for (size_t i = 0; i < events.size(); ++i) BOOST_TEST((heard[id][i] == events[i]));
  }
}

BOOST_AUTO_TEST_CASE(built_in_tools_work_in_the_workspace_and_refuse_to_leave_it) {
  open(R"({"replies": [
      {"tool_calls": [{"name": "write_file", "args": {"path": "out/a.txt", "content": "alpha\n"}},
                      {"name": "shell", "args": {"command": "cat out/a.txt; pwd"}},
                      {"name": "read_file", "args": {"path": "../outside.txt"}},
                      {"name": "list_dir", "args": {"path": "out"}}]},
      {"text": "done"}]})");
  SessionOutcome o = run("use the tools", "tools");
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  std::vector<Event> events;
  CHECK_OK(rt->read_events("tools", 1, &events));
  std::vector<ToolCompleted> done;
  for (const auto& e : events) {
    if (const auto* c = get_if<ToolCompleted>(e)) done.push_back(*c);
  }
  BOOST_REQUIRE(done.size() == 4u);
  BOOST_TEST(!done[0].is_error);
  BOOST_TEST(done[1].output.find("alpha\n" + std::filesystem::canonical(dir.path()).string()) == 0u,
             done[1].output);
  BOOST_TEST(done[2].is_error);
  BOOST_TEST(done[2].output.find("outside the workspace") != std::string::npos, done[2].output);
  BOOST_TEST(done[3].output.find("a.txt") != std::string::npos);
  BOOST_TEST(std::filesystem::exists(dir.sub("out/a.txt")));
}

BOOST_AUTO_TEST_CASE(a_command_hook_from_the_config_denies_a_call) {
  std::string script = write_file(dir, "guard.sh",
                                  "#!/bin/sh\ncase \"$(cat)\" in *'rm -rf'*) "
                                  "echo '{\"decision\":\"deny\",\"reason\":\"destructive\"}';; *) echo "
                                  "'{\"decision\":\"allow\"}';; esac\n");
  Config config;
  config.hooks.push_back(HookConfig{.name = "guard",
                                    .event = HookEvent::kPreToolUse,
                                    .matcher = "^shell$",
                                    .command = {"/bin/sh", script},
                                    .timeout_ms = 5000});
  open(R"({"replies": [{"tool_calls": [{"name": "shell", "args": {"command": "rm -rf ./important"}},
                                       {"name": "shell", "args": {"command": "echo safe"}}]},
                       {"text": "ok"}]})",
       config);
  std::filesystem::create_directories(dir.sub("important"));
  SessionOutcome o = run("clean up", "hooked");
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(std::filesystem::exists(dir.sub("important")));  // the hook stopped it
  std::vector<Event> events;
  CHECK_OK(rt->read_events("hooked", 1, &events));
  std::vector<std::string> decisions;
  std::vector<ToolCompleted> done;
  for (const auto& e : events) {
    if (const auto* h = get_if<HookDecided>(e)) decisions.push_back(h->hook_name + ":" + h->decision);
    if (const auto* c = get_if<ToolCompleted>(e)) done.push_back(*c);
  }
  BOOST_TEST((decisions == std::vector<std::string>{"guard:deny", "guard:allow"}));
  BOOST_REQUIRE(done.size() == 2u);
  BOOST_TEST(done[0].output == "The call was denied: destructive");
  BOOST_TEST(done[1].output == "safe\n");
}

BOOST_AUTO_TEST_CASE(subscribers_hear_events_and_deltas) {
  open(R"({"replies": [{"text": "a fairly long answer that arrives in several streamed pieces"}]})");
  std::mutex mu;
  std::string streamed;
  std::vector<std::string> types;
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.task = "stream",
                                            .on_event =
                                                [&](const Event& e) {
                                                  std::lock_guard lock(mu);
                                                  types.emplace_back(e.type_name());
                                                },
                                            .on_delta =
                                                [&](const StreamDelta& d) {
                                                  std::lock_guard lock(mu);
                                                  streamed += d.text;
                                                }},
                             &id));
  SessionOutcome o;
  CHECK_OK(rt->wait(id, 30s, &o));
  std::lock_guard lock(mu);  // wait() returns once the subscriber has everything
  BOOST_TEST(streamed == o.final_answer);
  BOOST_TEST(types.back() == "turn.committed");
  BOOST_TEST(rt->send_message("nobody", "hi").is_not_found());
  BOOST_TEST(rt->wait("nobody", 1s, &o).is_not_found());
}

BOOST_AUTO_TEST_CASE(a_provider_failure_after_retries_leaves_the_session_usable) {
  Config config;
  config.retry.base_delay_ms = 1;
  config.retry.max_delay_ms = 5;
  open(R"({"replies": [{"error": {"status": 500}}, {"error": {"status": 500}}, {"error": {"status": 500}},
                       {"error": {"status": 500}}, {"text": "recovered"}]})",
       config);
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.task = "x"}, &id));
  SessionOutcome o;
  CHECK_OK(rt->wait(id, 30s, &o));
  BOOST_TEST((o.status == SessionStatus::kFailed));
  CHECK_OK(rt->send_message(id, "please try again"));
  std::this_thread::sleep_for(10ms);
  CHECK_OK(rt->wait(id, 30s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(o.final_answer == "recovered");
}

BOOST_AUTO_TEST_CASE(a_finished_session_releases_its_actor_and_a_message_wakes_it_from_its_log) {
  open(R"({"replies": [{"text": "first answer"}, {"text": "second answer"}]})");
  std::atomic<int> heard{0};
  std::string id;
  // A slow subscriber: the session closes only once it has handled everything.
  CHECK_OK(rt->start_session(SessionOptions{.task = "go",
                                            .on_event =
                                                [&](const Event&) {
                                                  std::this_thread::sleep_for(3ms);
                                                  ++heard;
                                                }},
                             &id));
  // Its actor, its state and its subscriber are released once it is idle.
  for (int i = 0; i < 400 && (rt->live_sessions() > 0 || heard.load() == 0); ++i) std::this_thread::sleep_for(5ms);
  BOOST_TEST(rt->live_sessions() == 0u);
  std::vector<Event> logged;
  CHECK_OK(rt->read_events(id, 1, &logged));
  BOOST_TEST(heard.load() == static_cast<int>(logged.size()));
  SessionOutcome first;
  CHECK_OK(rt->wait(id, 60s, &first));  // after it closed: from memory
  BOOST_TEST(first.final_answer == "first answer");
  SessionOutcome again;
  CHECK_OK(rt->wait(id, 1s, &again));  // still answered, from memory
  BOOST_TEST(again.final_answer == "first answer");
  // A message wakes it: rebuilt from its log, it goes on with the conversation.
  CHECK_OK(rt->send_message(id, "and then?"));
  SessionOutcome second;
  CHECK_OK(rt->wait(id, 60s, &second));
  BOOST_TEST(second.final_answer == "second answer");
  BOOST_TEST(second.turns == 2u);
  for (int i = 0; i < 400 && rt->live_sessions() > 0; ++i) std::this_thread::sleep_for(5ms);
  BOOST_TEST(rt->live_sessions() == 0u);
  VerifyReport report;
  CHECK_OK(verify_session(runtime_log(*rt), id, &report));
  BOOST_TEST(report.ok());
  // An unknown session is still unknown.
  BOOST_TEST(rt->send_message("nobody", "hello?").is_not_found());
  SessionOutcome none;
  BOOST_TEST(rt->wait("nobody", 100ms, &none).is_not_found());
}

BOOST_AUTO_TEST_CASE(read_events_reads_a_session_from_a_seq_and_refuses_an_unknown_one) {
  open(R"({"replies": [{"text": "done"}]})");
  SessionOutcome out = run("go", "reader");
  BOOST_TEST(out.final_answer == "done");
  std::vector<Event> all;
  CHECK_OK(rt->read_events("reader", 1, &all));
  BOOST_REQUIRE(all.size() == out.last_seq);
  for (size_t i = 0; i < all.size(); ++i) BOOST_TEST(all[i].seq == i + 1);
  BOOST_TEST(all.front().type_name() == "session.started");
  std::vector<Event> tail;
  CHECK_OK(rt->read_events("reader", 3, &tail));
  BOOST_REQUIRE(tail.size() == all.size() - 2);
  BOOST_TEST((tail.front() == all[2]));
  std::vector<Event> none;
  CHECK_OK(rt->read_events("reader", out.last_seq + 1, &none));
  BOOST_TEST(none.empty());
  BOOST_TEST(rt->read_events("nobody", 1, &none).is_not_found());
  BOOST_TEST(none.empty());
}

BOOST_AUTO_TEST_CASE(many_sessions_in_one_runtime_leave_no_actor_behind) {
  std::string replies;
  open(R"({"replies": [{"text": "ok"}]})");
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i) {
    std::string id;
    CHECK_OK(rt->start_session(SessionOptions{.task = "go"}, &id));
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    SessionOutcome o;
    CHECK_OK(rt->wait(id, 60s, &o));
    BOOST_TEST((o.status == SessionStatus::kCompleted));
  }
  for (int i = 0; i < 400 && rt->live_sessions() > 0; ++i) std::this_thread::sleep_for(5ms);
  BOOST_TEST(rt->live_sessions() == 0u);
}

BOOST_AUTO_TEST_CASE(every_method_may_be_called_from_several_threads_at_once) {
  open(R"({"replies": [{"text": "one"}, {"text": "two"}, {"text": "three"}]})");
  std::atomic<int> failures{0};
  auto worker = [&](int t) {
    for (int i = 0; i < 15; ++i) {
      std::string id;
      Status s = rt->start_session(SessionOptions{.task = "go"}, &id);
      if (!s.ok()) ++failures;
      uint64_t sub = 0;
      if (rt->subscribe(id, [](const Event&) {}, nullptr, &sub).ok()) rt->unsubscribe(sub);
      std::string tool = "t" + std::to_string(t) + "_" + std::to_string(i);
      if (!rt->register_tool(ToolDefinition{.spec = {.name = tool, .description = "x"},
                                            .blocking = false,
                                            .run = [](const nlohmann::json&, const ToolContext&) {
                                              return ToolResult{.output = "ok"};
                                            }})
               .ok())
        ++failures;
      SessionOutcome o;
      if (!rt->wait(id, 60s, &o).ok() || o.final_answer != "one") ++failures;
      if (!rt->send_message(id, "more").ok()) ++failures;  // wakes it if it closed meanwhile
      if (!rt->wait(id, 60s, &o).ok() || o.final_answer != "two") ++failures;
      if (!rt->unregister_tool(tool)) ++failures;
      rt->live_sessions();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  BOOST_TEST(failures.load() == 0);
  VerifyReport report;
  CHECK_OK(verify_all(runtime_log(*rt), &report));
  BOOST_TEST(report.ok());
  BOOST_TEST(report.sessions.size() == 60u);
}

BOOST_AUTO_TEST_CASE(bad_input_gets_clear_errors) {
  // The model takes its time: "once" is still running when it is resumed below.
  open(R"({"replies": [{"text": "x", "latency_ms": 5000}]})");
  std::string id;
  BOOST_TEST(rt->start_session(SessionOptions{.task = ""}, &id).is_invalid_argument());
  BOOST_TEST(rt->start_session(SessionOptions{.id = "bad id", .task = "x"}, &id).is_invalid_argument());
  Status s = rt->start_session(SessionOptions{.task = "x", .workspace = dir.sub("missing")}, &id);
  BOOST_TEST(!s.ok());
  BOOST_TEST(s.message().find("missing") != std::string::npos);
  CHECK_OK(rt->start_session(SessionOptions{.id = "once", .task = "x"}, &id));
  BOOST_TEST(
      rt->start_session(SessionOptions{.id = "once", .task = "x"}, &id).message().find("already exists") !=
      std::string::npos);
  std::unique_ptr<Runtime> second;
  Config config;
  config.provider.scenario = dir.sub("scenario.json");
  s = Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &second);
  BOOST_TEST(s.is_busy(), s.to_string());  // one writer per home
  s = rt->resume_session("once", Runtime::ResumeOptions{});
  BOOST_TEST(s.is_busy(), s.to_string());  // it runs in this runtime already
  BOOST_TEST(rt->resume_session("nobody", Runtime::ResumeOptions{}).is_not_found());
  BOOST_TEST(rt->fork_session("nobody", 1, Runtime::ForkOptions{}, &id).is_not_found());
  Status no_turn = rt->fork_session("once", 7, Runtime::ForkOptions{}, &id);
  BOOST_TEST(no_turn.message().find("has no checkpoint for turn 7") != std::string::npos,
             no_turn.to_string());
  Config no_scenario;
  s = Runtime::open(Runtime::Options{.home = dir.sub("other"), .config = no_scenario, .builtin_tools = true}, &second);
  BOOST_TEST(s.message().find("needs a scenario file") != std::string::npos);
}

// Destroying the runtime in the middle of a shell call ends the call and
// everything it started, detached or not, at once.
BOOST_AUTO_TEST_CASE(a_runtime_destroyed_mid_call_kills_every_process_the_call_started) {
  open(R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command":
          "setsid sleep 1042 & nohup sleep 1043 >/dev/null 2>&1 & sleep 1041; echo finished > f",
          "timeout_ms": 600000}}]},
      {"text": "done"}]})");
  std::string sid;
  CHECK_OK(rt->start_session(SessionOptions{.id = "mid-call", .task = "sleep"}, &sid));
  const std::vector<std::vector<std::string>> sleeps = {{"sleep", "1041"}, {"sleep", "1042"}, {"sleep", "1043"}};
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  auto running = [&] {
    for (const auto& argv : sleeps) {
      if (testing::find_processes(argv).empty()) return false;
    }
    return true;
  };
  while (!running() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  BOOST_REQUIRE(running());
  const auto start = std::chrono::steady_clock::now();
  rt.reset();
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
  BOOST_TEST(testing::survivors(sleeps, 0ms) == 0u);
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(!std::filesystem::exists(dir.sub("f")));
  // The stop is recorded, last, with the default reason: stopped, not crashed.
  open(R"({"replies": [{"text": "done"}]})");
  std::vector<Event> events;
  CHECK_OK(rt->read_events("mid-call", 1, &events));
  BOOST_REQUIRE(!events.empty());
  const auto* stopped = get_if<SessionStopped>(events.back());
  BOOST_REQUIRE_MESSAGE(stopped != nullptr, "the last event is " << events.back().type_name());
  BOOST_TEST(stopped->reason == "the runtime was closed");
  BOOST_TEST(std::holds_alternative<ToolRequested>(events[events.size() - 2].body));
}

// Runtime::stop ends one session: its tool's processes killed, the stop
// recorded last with its reason, wait() answering at once; the other
// session runs on to its end; the stopped one resumes.
BOOST_AUTO_TEST_CASE(stop_ends_one_session_and_leaves_the_others_running) {
  open(R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "sleep 2.5 && echo ok > finished", "timeout_ms": 600000}}]},
      {"text": "done"}]})");
  std::filesystem::create_directories(dir.sub("ws-a"));
  std::filesystem::create_directories(dir.sub("ws-b"));
  std::string a, b;
  std::mutex heard_mu;
  std::vector<uint64_t> heard_before;  // what the first run's subscriber was handed
  CHECK_OK(rt->start_session(SessionOptions{.id = "stop-a",
                                            .task = "sleep",
                                            .workspace = dir.sub("ws-a"),
                                            .on_event =
                                                [&](const Event& e) {
                                                  std::lock_guard lock(heard_mu);
                                                  heard_before.push_back(e.seq);
                                                }},
                                 &a));
  CHECK_OK(rt->start_session(SessionOptions{.id = "stop-b", .task = "sleep", .workspace = dir.sub("ws-b")}, &b));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (testing::find_processes({"sleep", "2.5"}).size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  BOOST_REQUIRE(testing::find_processes({"sleep", "2.5"}).size() == 2u);

  const auto start = std::chrono::steady_clock::now();
  CHECK_OK(rt->stop("stop-a", "cancelled by the test"));
  BOOST_TEST((std::chrono::steady_clock::now() - start < 2s));
  std::this_thread::sleep_for(100ms);
  BOOST_TEST(testing::find_processes({"sleep", "2.5"}).size() == 1u);  // b's
  SessionOutcome stopped;
  CHECK_OK(rt->wait("stop-a", 1s, &stopped));
  BOOST_TEST((stopped.status == SessionStatus::kRunning));
  BOOST_TEST(stopped.stop_reason == "stopped");
  BOOST_TEST(stopped.error == "cancelled by the test");
  BOOST_TEST(rt->stop("stop-a", "again").is_not_found());
  BOOST_TEST(rt->stop("nobody", "why").is_not_found());

  SessionOutcome other;
  CHECK_OK(rt->wait("stop-b", 60s, &other));
  BOOST_TEST((other.status == SessionStatus::kCompleted));
  BOOST_TEST(std::filesystem::exists(dir.sub("ws-b/finished")));
  BOOST_TEST(!std::filesystem::exists(dir.sub("ws-a/finished")));

  std::vector<Event> events;
  CHECK_OK(rt->read_events("stop-a", 1, &events));
  BOOST_REQUIRE(events.size() >= 2u);
  const auto* recorded = get_if<SessionStopped>(events.back());
  BOOST_REQUIRE_MESSAGE(recorded != nullptr, "the last event is " << events.back().type_name());
  BOOST_TEST(recorded->reason == "cancelled by the test");
  BOOST_TEST(std::holds_alternative<ToolRequested>(events[events.size() - 2].body));

  // It goes on from there: the interrupted call reported, the session
  // finished; the stopped run's subscription ended with it (no event twice).
  const uint64_t stop_seq = events.back().seq;
  CHECK_OK(rt->resume_session("stop-a", Runtime::ResumeOptions{}));
  SessionOutcome resumed;
  CHECK_OK(rt->wait("stop-a", 60s, &resumed));
  BOOST_TEST((resumed.status == SessionStatus::kCompleted));
  {
    std::lock_guard lock(heard_mu);
    BOOST_REQUIRE(!heard_before.empty());
    BOOST_TEST(*std::max_element(heard_before.begin(), heard_before.end()) < stop_seq);
  }
  BOOST_TEST(!std::filesystem::exists(dir.sub("ws-a/finished")));  // not run again
}

// What an embedder needs to run sessions as a service: on_complete once
// per session (no blocking wait); list_sessions with the statuses of
// `carapace sessions` (a session whose writer died, a stopped one, a
// completed one), filtered, newest first; resume_unfinished resumes the
// crashed and the stopped ones and reports each.
BOOST_AUTO_TEST_CASE(list_sessions_resume_unfinished_and_on_complete) {
  const std::string scenario = R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "sleep 1037", "timeout_ms": 600000}}]},
      {"text": "done"}]})";
  open(scenario);
  rt.reset();  // the home exists
  {
    // A session whose writer died in its first turn, as a killed process leaves it.
    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = dir.sub("home/log")}, &log));
    std::unique_ptr<SessionJournal> journal;
    CHECK_OK(SessionJournal::create(log.get(), "dead-1",
                                    {SessionStarted{.agent_id = "carapace", .provider = "scripted",
                                                    .model = "scripted-1", .rng_seed = 1, .workspace = dir.path()},
                                     UserMessage{.text = "go"}},
                                    JournalOptions{}, &journal));
    CHECK_OK(journal->append_synced({TurnStarted{.turn = 1}}));
  }
  open(scenario);
  std::mutex mu;
  std::vector<SessionOutcome> completed;
  auto on_complete = [&](const SessionOutcome& o) {
    std::lock_guard lock(mu);
    completed.push_back(o);
  };
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.id = "long-1", .task = "sleep", .on_complete = on_complete}, &id));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (testing::find_processes({"sleep", "1037"}).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  BOOST_REQUIRE(!testing::find_processes({"sleep", "1037"}).empty());

  std::vector<SessionSummary> rows;
  CHECK_OK(rt->list_sessions(SessionFilter{}, &rows));
  BOOST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].id == "long-1");  // newest first
  BOOST_TEST(rows[0].status == "running");
  BOOST_TEST(rows[1].id == "dead-1");
  BOOST_TEST(rows[1].status == "crashed");

  CHECK_OK(rt->stop("long-1", "the test stops it"));
  {
    std::lock_guard lock(mu);
    BOOST_REQUIRE(completed.size() == 1u);  // called once, by the stop
    BOOST_TEST(completed[0].stop_reason == "stopped");
  }
  CHECK_OK(rt->list_sessions(SessionFilter{.status = "stopped"}, &rows));
  BOOST_REQUIRE(rows.size() == 1u);
  BOOST_TEST(rows[0].id == "long-1");
  CHECK_OK(rt->list_sessions(SessionFilter{.limit = 1}, &rows));
  BOOST_TEST(rows.size() == 1u);
  BOOST_TEST(rt->list_sessions(SessionFilter{.status = "sleeping"}, &rows).is_invalid_argument());

  // Both go on, each reported; each completes and says so once.
  std::vector<ResumedSession> report;
  CHECK_OK(rt->resume_unfinished(Runtime::ResumeOptions{.on_complete = on_complete}, &report));
  BOOST_REQUIRE(report.size() == 2u);
  BOOST_TEST(report[0].id == "dead-1");  // oldest first
  BOOST_TEST(report[0].was == "crashed");
  BOOST_TEST(report[1].id == "long-1");
  BOOST_TEST(report[1].was == "stopped");
  for (const auto& r : report) BOOST_TEST(r.status.ok(), r.id << ": " << r.status.to_string());
  SessionOutcome out;
  CHECK_OK(rt->wait("long-1", 60s, &out));
  BOOST_TEST((out.status == SessionStatus::kCompleted));
  // dead-1's open turn asks the model: the scenario's first reply, the long sleep. Stopped there.
  const auto asleep = std::chrono::steady_clock::now() + 20s;
  while (testing::find_processes({"sleep", "1037"}).empty() && std::chrono::steady_clock::now() < asleep) {
    std::this_thread::sleep_for(10ms);
  }
  BOOST_REQUIRE(!testing::find_processes({"sleep", "1037"}).empty());
  CHECK_OK(rt->stop("dead-1", "done with it"));
  {
    std::lock_guard lock(mu);
    BOOST_TEST(completed.size() == 3u);  // long-1's stop and completion, dead-1's stop
  }
  CHECK_OK(rt->list_sessions(SessionFilter{.status = "crashed"}, &rows));
  BOOST_TEST(rows.empty());
}

// A run with a deadline is stopped when it passes, as Runtime::stop does;
// one that ends first is left alone, and so is its next run.
BOOST_AUTO_TEST_CASE(a_deadline_stops_a_run_that_is_still_going) {
  open(R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "sleep 1038", "timeout_ms": 600000}}]},
      {"text": "done"},
      {"tool_calls": [{"name": "shell", "args": {"command": "sleep 1.5"}}]},
      {"text": "done again"}]})");
  const auto start = std::chrono::steady_clock::now();
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.id = "late", .task = "sleep", .deadline = 800ms}, &id));
  SessionOutcome out;
  Status waited;
  do {
    waited = rt->wait("late", 100ms, &out);
  } while (waited.is_timed_out() && std::chrono::steady_clock::now() - start < 20s);
  CHECK_OK(waited);
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST((took >= 800ms && took < 5s));
  BOOST_TEST(out.stop_reason == "stopped");
  BOOST_TEST(out.error == "its deadline of 800 ms passed");
  BOOST_TEST(testing::survivors({{"sleep", "1038"}}) == 0u);
  std::vector<Event> events;
  CHECK_OK(rt->read_events("late", 1, &events));
  const auto* stopped = get_if<SessionStopped>(events.back());
  BOOST_REQUIRE(stopped != nullptr);
  BOOST_TEST(stopped->reason == "its deadline of 800 ms passed");

  // Resumed with a deadline it keeps: it ends long before, and the deadline
  // goes with that run: the next one (a message, 1.5 s of shell) runs past it.
  CHECK_OK(rt->resume_session("late", Runtime::ResumeOptions{.deadline = 500ms}));
  CHECK_OK(rt->wait("late", 60s, &out));
  BOOST_TEST((out.status == SessionStatus::kCompleted));
  CHECK_OK(rt->send_message("late", "once more"));
  CHECK_OK(rt->wait("late", 60s, &out));
  BOOST_TEST((out.status == SessionStatus::kCompleted));
  BOOST_TEST(out.final_answer == "done again");
  events.clear();
  CHECK_OK(rt->read_events("late", 1, &events));
  size_t stops = 0;
  for (const auto& e : events) stops += std::holds_alternative<SessionStopped>(e.body);
  BOOST_TEST(stops == 1u);  // the first deadline's only
}

// unsubscribe() returns once no callback of the subscription runs or will;
// a callback that throws is reported and its subscription goes on.
BOOST_AUTO_TEST_CASE(unsubscribe_waits_for_callbacks_and_a_throwing_callback_goes_on) {
  nlohmann::json replies = nlohmann::json::array();
  for (int i = 0; i < 40; ++i) {
    replies.push_back({{"text", "step"}, {"tool_calls", {{{"name", "tally"}, {"args", {{"n", i}}}}}}});
  }
  replies.push_back({{"text", "finished"}});
  open(nlohmann::json{{"replies", replies}}.dump());
  CHECK_OK(rt->register_tool(ToolDefinition{
      .spec = {.name = "tally", .description = "counts", .schema = JsonText{R"({"type":"object"})"}},
      .blocking = false,
      .run = [](const nlohmann::json&, const ToolContext&) { return ToolResult{.output = "ok"}; }}));
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.id = "many", .task = "count", .max_turns = 50}, &id));

  constexpr int kSubscribers = 8;
  std::array<std::atomic<int>, kSubscribers> started{};
  std::array<uint64_t, kSubscribers> subs{};
  for (int i = 0; i < kSubscribers; ++i) {
    CHECK_OK(rt->subscribe(
        "many",
        [&started, i](const Event&) {
          ++started[i];
          std::this_thread::sleep_for(2ms);
        },
        nullptr, &subs[i]));
  }
  std::atomic<int> after_throw{0};
  std::atomic<bool> thrown{false};
  uint64_t thrower = 0;
  CHECK_OK(rt->subscribe(
      "many",
      [&](const Event&) {
        if (!thrown.exchange(true)) throw std::runtime_error("a callback that fails");
        ++after_throw;
      },
      nullptr, &thrower));
  std::array<int, kSubscribers> at_return{};
  for (int i = 0; i < kSubscribers; ++i) {
    while (started[i] < 3 + i) std::this_thread::sleep_for(1ms);
    rt->unsubscribe(subs[i]);
    at_return[i] = started[i];
  }
  SessionOutcome out;
  CHECK_OK(rt->wait("many", 60s, &out));
  BOOST_TEST((out.status == SessionStatus::kCompleted));
  for (int i = 0; i < kSubscribers; ++i) BOOST_TEST(started[i] == at_return[i], "subscriber " << i);
  BOOST_TEST(thrown.load());
  BOOST_TEST(after_throw > 100);  // every event after the one that threw
}

// close(drain): nothing new is taken; a run that ends within the drain
// ends as it would have (its call's result recorded, completed); one that
// does not is stopped when the runtime is destroyed, resumable.
BOOST_AUTO_TEST_CASE(close_drains_running_sessions_up_to_its_bound) {
  open(R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "sleep 0.6; echo slept", "timeout_ms": 600000}}]},
      {"text": "done"}]})");
  std::filesystem::create_directories(dir.sub("ws-short"));
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.id = "short", .task = "nap", .workspace = dir.sub("ws-short")}, &id));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (testing::find_processes({"sleep", "0.6"}).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  BOOST_REQUIRE(!testing::find_processes({"sleep", "0.6"}).empty());
  auto start = std::chrono::steady_clock::now();
  rt->close(10s);
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
  BOOST_TEST(rt->start_session(SessionOptions{.task = "more"}, &id).is_busy());
  BOOST_TEST(rt->send_message("short", "more").is_busy());
  SessionOutcome out;
  CHECK_OK(rt->wait("short", 1s, &out));
  BOOST_TEST((out.status == SessionStatus::kCompleted));
  rt.reset();

  // A run longer than the drain: close returns at the bound; the destructor stops it.
  open(R"({"replies": [
      {"tool_calls": [{"name": "shell", "args": {"command": "sleep 1040", "timeout_ms": 600000}}]},
      {"text": "done"}]})");
  CHECK_OK(rt->start_session(SessionOptions{.id = "long", .task = "sleep"}, &id));
  while (testing::find_processes({"sleep", "1040"}).empty() && std::chrono::steady_clock::now() < deadline + 20s) {
    std::this_thread::sleep_for(5ms);
  }
  start = std::chrono::steady_clock::now();
  rt->close(300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST((took >= 250ms && took < 3s));
  rt.reset();
  BOOST_TEST(testing::survivors({{"sleep", "1040"}}) == 0u);
  open(R"({"replies": [{"text": "done"}]})");
  std::vector<Event> events;
  CHECK_OK(rt->read_events("long", 1, &events));
  BOOST_TEST(std::holds_alternative<SessionStopped>(events.back().body), events.back().type_name());
  events.clear();
  CHECK_OK(rt->read_events("short", 1, &events));
  size_t completed_calls = 0;
  for (const auto& e : events) {
    if (const auto* c = get_if<ToolCompleted>(e)) completed_calls += !c->interrupted && c->output == "slept\n";
  }
  BOOST_TEST(completed_calls == 1u);  // its result, recorded
}

BOOST_AUTO_TEST_CASE(a_runtime_closed_after_its_sessions_finished_records_no_stop) {
  open(R"({"replies": [{"text": "done"}]})");
  BOOST_TEST((run("finish", "finished").status == SessionStatus::kCompleted));
  rt.reset();
  open(R"({"replies": [{"text": "done"}]})");
  std::vector<Event> events;
  CHECK_OK(rt->read_events("finished", 1, &events));
  BOOST_REQUIRE(!events.empty());
  BOOST_TEST(events.back().type_name() == "turn.committed");
  for (const auto& e : events) BOOST_TEST(!std::holds_alternative<SessionStopped>(e.body));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(a_runtime_can_borrow_the_programs_actor_system) {
  testing::TempDir dir;
  std::string scenario = write_file(dir, "s.json", R"({"replies": [{"text": "borrowed"}]})");
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  Config config;
  config.provider.scenario = scenario;
  config.workspace = dir.path();
  {
    std::unique_ptr<Runtime> rt;
    CHECK_OK(
        Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .system = &system, .builtin_tools = true}, &rt));
    BOOST_TEST((&rt->system() == &system));
    std::string id;
    CHECK_OK(rt->start_session(SessionOptions{.task = "x"}, &id));
    SessionOutcome o;
    CHECK_OK(rt->wait(id, 30s, &o));
    BOOST_TEST(o.final_answer == "borrowed");
  }  // the runtime stops its actors; the program's system goes on
  caf::scoped_actor self{system};
  BOOST_TEST(system.registry().running() <= 1u);  // at most the scoped actor itself
}

// The supervisor on real threads: a worker killed with calls in flight.
BOOST_AUTO_TEST_CASE(a_tool_worker_killed_with_calls_in_flight_answers_them_and_is_replaced) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  auto tools = std::make_shared<ToolRegistry>();
  std::atomic<int> runs{0};
  CHECK_OK(tools->add(ToolDefinition{.spec = {.name = "slow"},
                                     .blocking = false,  // runs inline in its worker, so the worker is busy
                                     .run = [&](const nlohmann::json&, const ToolContext&) {
                                       ++runs;
                                       std::this_thread::sleep_for(1s);
                                       return ToolResult{.output = "slow done"};
                                     }}));
  ToolSupervisorActor supervisor = spawn_tool_supervisor(system, tools);
  caf::scoped_actor self{system};
  ToolActor worker;
  self->request(supervisor, 5s, worker_atom::value, std::string("slow"))
      .receive([&](ToolActor& w) { worker = w; }, [](caf::error&) {});
  BOOST_REQUIRE(worker);
  auto call = [&](const std::string& id) {
    return ToolInvocation{.session_id = "s", .call = ToolCall{id, "slow", JsonText{"{}"}}};
  };
  // Call 1 keeps the worker busy; the kill queues in its mailbox, and call 2
  // queues behind it (CAF 0.17 does not put exits first): call 2 is lost
  // with the worker, and the supervisor must answer it.
  self->send(supervisor, call("c1"));
  std::this_thread::sleep_for(100ms);
  self->send_exit(worker, caf::exit_reason::kill);
  self->send(supervisor, call("c2"));
  std::map<std::string, ToolOutcome> outcomes;
  for (int i = 0; i < 2; ++i) {
    self->receive([&](ToolOutcome& o) { outcomes[o.call_id] = o; },
                  caf::after(10s) >> [] { BOOST_FAIL("no answer from the supervisor"); });
  }
  BOOST_TEST(outcomes["c1"].output == "slow done");
  BOOST_TEST(outcomes["c2"].is_error);
  BOOST_TEST(outcomes["c2"].output.find("the tool actor for slow") == 0u, outcomes["c2"].output);
  // The replacement serves the next call.
  ToolOutcome third;
  self->request(supervisor, 10s, call("c3")).receive([&](ToolOutcome& o) { third = o; }, [](caf::error&) {});
  BOOST_TEST(third.output == "slow done");
  ToolActor replacement;
  self->request(supervisor, 5s, worker_atom::value, std::string("slow"))
      .receive([&](ToolActor& w) { replacement = w; }, [](caf::error&) {});
  BOOST_TEST((replacement.address() != worker.address()));
  self->send_exit(supervisor, caf::exit_reason::user_shutdown);
}

namespace {

// A registry with "quick", an inline tool that answers "ok" at once.
std::shared_ptr<ToolRegistry> quick_tools() {
  auto tools = std::make_shared<ToolRegistry>();
  CHECK_OK(tools->add(ToolDefinition{
      .spec = {.name = "quick"}, .blocking = false, .run = [](const nlohmann::json&, const ToolContext&) {
        return ToolResult{.output = "ok"};
      }}));
  return tools;
}

}  // namespace

// A call's time-out is kept by the supervisor without a timer of its own:
// one per call stayed in the clock for the whole time-out (15 minutes by
// default) after the call answered.
BOOST_AUTO_TEST_CASE(tool_calls_that_answered_leave_no_timer_in_the_clock) {
  caf::actor_system_config cfg;
  configure_scheduler(cfg);
  caf::actor_system system{cfg};
  auto tools = quick_tools();
  ToolSupervisorActor supervisor = spawn_tool_supervisor(system, tools);
  caf::scoped_actor self{system};
  // Sent, not requested: a blocking actor's request leaves its own time-out
  // in the clock until it is due or the actor ends.
  for (int i = 0; i < 500; ++i) {
    ToolOutcome out;
    self->send(supervisor, ToolInvocation{.session_id = "s",
                                          .call = ToolCall{"c" + std::to_string(i), "quick", JsonText{"{}"}},
                                          .timeout_ms = 15 * 60 * 1000});
    self->receive([&](ToolOutcome& o) { out = o; }, caf::after(10s) >> [] { BOOST_FAIL("no answer"); });
    BOOST_REQUIRE(out.output == "ok");
  }
  std::optional<size_t> pending = scheduler_pending_timers(system);
  BOOST_REQUIRE(pending.has_value());
  BOOST_TEST(*pending <= 2u);  // the supervisor's one tick, at most
  self->send_exit(supervisor, caf::exit_reason::user_shutdown);
}

// Each call still ends at its own deadline: one shorter than the tick that
// is set, and one later than a tick that fires with nothing due.
BOOST_AUTO_TEST_CASE(tool_calls_expire_at_their_own_deadlines) {
  caf::actor_system_config cfg;
  configure_scheduler(cfg);
  caf::actor_system system{cfg};
  auto tools = quick_tools();
  CHECK_OK(tools->add(ToolDefinition{.spec = {.name = "until_stopped"},
                                     .blocking = true,
                                     .run = [](const nlohmann::json&, const ToolContext& ctx) {
                                       while (!ctx.stop.stop_requested()) std::this_thread::sleep_for(2ms);
                                       return ToolResult{.output = "stopped"};
                                     }}));
  ToolSupervisorActor supervisor = spawn_tool_supervisor(system, tools);
  caf::scoped_actor self{system};
  auto call = [&](const std::string& id, const std::string& tool, uint64_t timeout_ms) {
    ToolOutcome out;
    self->request(
            supervisor, 30s,
            ToolInvocation{
                .session_id = "s", .call = ToolCall{id, tool, JsonText{"{}"}}, .timeout_ms = timeout_ms})
        .receive([&](ToolOutcome& o) { out = o; }, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
    return out;
  };
  using Clock = std::chrono::steady_clock;
  // A tick is set for a minute from now; a call due in 200 ms needs its own.
  BOOST_TEST(call("a", "quick", 60'000).output == "ok");
  auto start = Clock::now();
  ToolOutcome b = call("b", "until_stopped", 200);
  auto took = Clock::now() - start;
  BOOST_TEST(b.timed_out);
  BOOST_TEST(b.output == "stopped");
  BOOST_TEST((took >= 190ms && took < 1500ms),
             std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  // A tick set for a call that answered fires with nothing due, and sets
  // one for the call after it, which is due later.
  BOOST_TEST(call("c", "quick", 300).output == "ok");
  std::this_thread::sleep_for(100ms);
  start = Clock::now();
  ToolOutcome d = call("d", "until_stopped", 300);
  took = Clock::now() - start;
  BOOST_TEST(d.timed_out);
  BOOST_TEST((took >= 290ms && took < 1600ms),
             std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  self->send_exit(supervisor, caf::exit_reason::user_shutdown);
}

namespace {

// A provider that says it blocks, as the HTTP providers do, answering from a scenario.
class BlockingScripted : public Provider {
 public:
  explicit BlockingScripted(Scenario scenario) : scripted_(std::move(scenario)) {}
  std::string name() const override { return "blocking-scripted"; }
  bool blocking() const override { return true; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override {
    return scripted_.call(request, on_delta);
  }

 private:
  ScriptedProvider scripted_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_blocking_provider_waits_out_an_injected_delay) {
  testing::TempDir dir;
  Scenario scenario;
  CHECK_OK(parse_scenario(R"({"replies": [{"text": "hello"}]})", "s.json", &scenario));
  std::shared_ptr<FaultPlan> plan;
  CHECK_OK(FaultPlan::parse(
      R"({"faults": [{"point": "provider.before_request", "action": "delay", "delay_ms": 300}]})",
      "plan.json", &plan));
  Config config;
  config.workspace = dir.path();
  std::unique_ptr<Runtime> rt;
  CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"),
                                          .config = config,
                                          .provider = std::make_shared<BlockingScripted>(scenario),
                                          .builtin_tools = true,
                                          .faults = plan},
                         &rt));
  auto start = std::chrono::steady_clock::now();
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.task = "hi"}, &id));
  SessionOutcome o;
  CHECK_OK(rt->wait(id, 60s, &o));
  auto elapsed = std::chrono::steady_clock::now() - start;
  BOOST_TEST(o.final_answer == "hello");
  BOOST_TEST((elapsed >= 300ms));  // a lower bound: the delay was carried out, not only recorded
  std::vector<Event> events;
  CHECK_OK(rt->read_events(id, 1, &events));
  std::vector<FaultInjected> faults;
  const LlmResponded* responded = nullptr;
  for (const auto& e : events) {
    if (const auto* f = get_if<FaultInjected>(e)) faults.push_back(*f);
    if (const auto* r = get_if<LlmResponded>(e)) responded = r;
  }
  BOOST_REQUIRE(faults.size() == 1u);
  BOOST_TEST(faults[0].point == "provider.before_request");
  BOOST_TEST(faults[0].action == "delay");
  BOOST_REQUIRE(responded != nullptr);
  BOOST_TEST(responded->latency_ms >= 300u);
}

BOOST_AUTO_TEST_CASE(a_resumed_session_keeps_its_own_turn_budget_and_instructions) {
  testing::TempDir dir;
  std::string scenario = write_file(dir, "scenario.json", R"({"replies": [
      {"tool_calls": [{"name": "note", "args": {}}]},
      {"tool_calls": [{"name": "note", "args": {}}]},
      {"tool_calls": [{"name": "note", "args": {}}]},
      {"text": "done"}]})");
  Config config;
  config.provider.scenario = scenario;
  config.workspace = dir.path();
  ToolDefinition note{.spec = {.name = "note", .description = "notes", .schema = JsonText{R"({"type":"object"})"}},
                      .blocking = false,
                      .run = [](const nlohmann::json&, const ToolContext&) { return ToolResult{.output = "ok"}; }};
  std::shared_ptr<FaultPlan> hang_on_turn_two;
  CHECK_OK(FaultPlan::parse(R"({"faults": [{"point": "provider.before_request", "action": "hang", "nth": 2}]})",
                            "plan.json", &hang_on_turn_two));
  std::string id = "budget";
  {
    std::unique_ptr<Runtime> rt;
    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true, .faults = hang_on_turn_two},
                           &rt));
    CHECK_OK(rt->register_tool(note));
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "go", .max_turns = 2, .instructions = "Be terse."},
                               nullptr));
    SessionOutcome o;
    BOOST_TEST(rt->wait(id, 500ms, &o).is_timed_out());  // turn 2's request hangs
  }  // the process "stops" with turn 2 open
  std::unique_ptr<Runtime> rt;
  CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
  CHECK_OK(rt->register_tool(note));
  CHECK_OK(rt->resume_session(id, Runtime::ResumeOptions{}));
  SessionOutcome o;
  CHECK_OK(rt->wait(id, 60s, &o));
  BOOST_TEST(o.stop_reason == "max_turns");  // not the configuration's 20 turns
  BOOST_TEST(o.turns == 2u);
  std::vector<Event> events;
  CHECK_OK(rt->read_events(id, 1, &events));
  std::vector<PromptAssembled> prompts;
  std::vector<LlmRequested> requests;
  for (const auto& e : events) {
    if (const auto* p = get_if<PromptAssembled>(e)) prompts.push_back(*p);
    if (const auto* r = get_if<LlmRequested>(e)) requests.push_back(*r);
  }
  // Turn 1 and turn 2; the resumed turn 2 rebuilt the very same prompt,
  // instructions and all (a different one would have been recorded again).
  BOOST_REQUIRE(prompts.size() == 2u);
  bool has_session_layer = false;
  for (const auto& s : prompts[1].segments) has_session_layer |= s.layer == "session";
  BOOST_TEST(has_session_layer);
  BOOST_REQUIRE(requests.size() == 3u);  // turn 1; turn 2 before the stop and after the resume
  BOOST_TEST((requests[2].request_digest == requests[1].request_digest));
  BOOST_TEST(requests[2].attempt == 1u);  // a request lost to the stop does not use up a retry
}

BOOST_AUTO_TEST_CASE(a_session_actor_that_fails_is_recovered_from_its_log_and_its_waiters_and_subscribers_go_on) {
  testing::TempDir dir;
  std::string scenario = write_file(dir, "scenario.json", R"({"replies": [
      {"tool_calls": [{"name": "note", "args": {}}]},
      {"tool_calls": [{"name": "note", "args": {}}]},
      {"text": "done"}]})");
  Config config;
  config.provider.scenario = scenario;
  config.workspace = dir.path();
  std::atomic<int> notes{0};
  ToolDefinition note{.spec = {.name = "note", .description = "notes", .schema = JsonText{R"({"type":"object"})"}},
                      .blocking = false,
                      .run = [&notes](const nlohmann::json&, const ToolContext&) {
                        ++notes;
                        return ToolResult{.output = "ok"};
                      }};
  // The session actor throws before its 9th step, in turn 2: as a bug would.
  std::shared_ptr<FaultPlan> plan;
  CHECK_OK(FaultPlan::parse(R"({"faults": [{"point": "session.actor", "action": "error", "nth": 9}]})", "plan.json",
                            &plan));
  std::unique_ptr<Runtime> rt;
  CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true, .faults = plan}, &rt));
  CHECK_OK(rt->register_tool(note));
  std::mutex mu;
  std::vector<uint64_t> heard;
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.task = "go",
                                            .on_event =
                                                [&](const Event& e) {
                                                  std::lock_guard lock(mu);
                                                  heard.push_back(e.seq);
                                                }},
                             &id));
  SessionOutcome o;
  CHECK_OK(rt->wait(id, 60s, &o));  // the same wait, across the replaced actor
  BOOST_TEST(o.final_answer == "done");
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  std::vector<Event> events;
  CHECK_OK(rt->read_events(id, 1, &events));
  size_t resumed = 0;
  for (const auto& e : events) resumed += get_if<SessionResumed>(e) != nullptr;
  BOOST_TEST(resumed == 1u);
  BOOST_TEST(notes.load() == 2);  // nothing ran twice
  VerifyReport report;
  CHECK_OK(verify_session(runtime_log(*rt), id, &report));
  BOOST_TEST(report.ok());
  // The subscriber heard the recovered actor's events too, to the end.
  std::lock_guard lock(mu);
  BOOST_REQUIRE(!heard.empty());
  BOOST_TEST(heard.back() == events.back().seq);
}

namespace {

// Answers from a scenario, records what each request carried, and says
// whether it reads the conversation as it is told to.
class MessageCountingProvider : public Provider {
 public:
  MessageCountingProvider(Scenario scenario, bool reads) : scripted_(std::move(scenario)), reads_(reads) {}
  std::string name() const override { return "scripted"; }
  bool blocking() const override { return false; }
  bool reads_messages() const override { return reads_; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override {
    std::lock_guard lock(mu);
    messages_sent.push_back(request.messages.size());
    chars_sent.push_back(request.message_chars);
    chars_of_messages.push_back(context_chars(request.messages));
    return scripted_.call(request, on_delta);
  }
  std::mutex mu;
  std::vector<size_t> messages_sent;
  std::vector<uint64_t> chars_sent;
  std::vector<uint64_t> chars_of_messages;

 private:
  ScriptedProvider scripted_;
  bool reads_;
};

// The scripted provider, which first reads the session's log as it is when
// the request arrives and keeps the last event's type and seq.
class LogReadingProvider : public Provider {
 public:
  explicit LogReadingProvider(Scenario scenario) : scripted_(std::move(scenario)) {}
  std::string name() const override { return "scripted"; }
  bool blocking() const override { return false; }
  bool reads_messages() const override { return false; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override {
    std::vector<Event> events;
    (void)(*runtime)->read_events(request.session_id, 1, &events);
    std::lock_guard lock(mu);
    last_seen.push_back(events.empty() ? std::string("nothing") : std::string(events.back().type_name()));
    return scripted_.call(request, on_delta);
  }
  std::unique_ptr<Runtime>* runtime = nullptr;
  std::mutex mu;
  std::vector<std::string> last_seen;

 private:
  ScriptedProvider scripted_;
};

}  // namespace

// A session writes the steps it makes between two moments it acts outside
// itself as one batch: a turn with one tool call is three writes (up to the
// model's request, up to the tool's, and the rest with the checkpoint), not
// one a step. And each is written before the session acts: the provider
// and the tool find their request the last event in the log, so that after
// a process crash the log says what was asked.
BOOST_AUTO_TEST_CASE(a_turn_is_written_in_three_batches_each_before_the_session_acts) {
  testing::TempDir dir;
  auto counting = std::make_shared<testing::GatedSyncFs>();  // never closed: it counts the WAL's writes
  Config config;
  config.workspace = dir.path();
  constexpr int kTurns = 20;
  config.max_turns = kTurns + 1;
  std::string replies;
  for (int i = 0; i < kTurns; ++i)
    replies += R"({"text": "t", "tool_calls": [{"name": "probe", "args": {}}]},)";
  Scenario scenario;
  CHECK_OK(parse_scenario(R"({"replies": [)" + replies + R"({"text": "done"}]})", "s.json", &scenario));
  auto provider = std::make_shared<LogReadingProvider>(scenario);
  Runtime::Options options{.home = dir.sub("home"), .config = config, .provider = provider};
  RuntimeInternals::TestKnobs knobs;
  knobs.file_system = counting;
  std::unique_ptr<Runtime> rt;
  CHECK_OK(RuntimeInternals::open(std::move(options), knobs, &rt));
  provider->runtime = &rt;
  std::mutex mu;
  std::vector<std::string> tool_saw;  // the last event when the tool ran, and whether it names the call
  CHECK_OK(rt->register_tool(ToolDefinition{
      .spec = {.name = "probe", .description = "reads the log", .idempotent = true},
      .blocking = false,
      .run = [&](const nlohmann::json&, const ToolContext& c) {
        std::vector<Event> events;
        (void)rt->read_events(c.session_id, 1, &events);
        const auto* requested = events.empty() ? nullptr : get_if<ToolRequested>(events.back());
        std::lock_guard lock(mu);
        tool_saw.push_back(requested == nullptr              ? "not tool.requested"
                           : requested->call_id == c.call_id ? "tool.requested"
                                                             : "another call's tool.requested");
        return ToolResult{.output = "ok"};
      }}));
  CHECK_OK(rt->start_session(SessionOptions{.id = "s", .task = "go"}, nullptr));
  // Counted from here: the session is created (its opening is durable).
  const uint64_t before = counting->wal_appends();
  SessionOutcome o;
  CHECK_OK(rt->wait("s", 60s, &o));
  const uint64_t writes = counting->wal_appends() - before;
  BOOST_REQUIRE_MESSAGE((o.status == SessionStatus::kCompleted), o.stop_reason << ": " << o.error);
  BOOST_TEST(o.turns == kTurns + 1u);
  std::vector<Event> events;
  CHECK_OK(rt->read_events("s", 1, &events));
  // 7 events a turn: a batch each would be 7 writes a turn.
  BOOST_TEST(events.size() >= 7u * kTurns);
  BOOST_TEST(writes <= 3u * kTurns + 6, writes << " WAL writes for " << kTurns + 1 << " turns");
  // Not fewer than two a turn. A session goes on to its next turn while the
  // batch with its checkpoint syncs; on a loaded machine RocksDB may write
  // that batch and the next turn's first in one group (59 writes for 21
  // turns, seen under `ctest -j2`). Each was still written before the
  // session acted: the provider and the tool checks below.
  BOOST_TEST(writes >= 2u * kTurns, writes << " WAL writes for " << kTurns + 1 << " turns");
  std::lock_guard lock(provider->mu);
  BOOST_REQUIRE_EQUAL(provider->last_seen.size(), kTurns + 1u);
  for (const auto& seen : provider->last_seen) BOOST_TEST(seen == "llm.requested");
  std::lock_guard tools_lock(mu);
  BOOST_REQUIRE_EQUAL(tool_saw.size(), static_cast<size_t>(kTurns));
  for (const auto& seen : tool_saw) BOOST_TEST(seen == "tool.requested");
}

BOOST_AUTO_TEST_CASE(a_provider_that_does_not_read_the_conversation_gets_its_size_without_a_copy) {
  Scenario scenario;
  CHECK_OK(parse_scenario(R"({"replies": [
      {"text": "one", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
      {"text": "two", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
      {"text": "done"}]})",
                          "s.json", &scenario));
  std::map<bool, std::shared_ptr<MessageCountingProvider>> providers;
  std::map<bool, std::vector<Event>> logs;
  for (bool reads : {true, false}) {
    testing::TempDir dir;
    Config config;
    config.workspace = dir.path();
    auto provider = std::make_shared<MessageCountingProvider>(scenario, reads);
    std::unique_ptr<Runtime> rt;
    CHECK_OK(Runtime::open(
        Runtime::Options{
            .home = dir.sub("home"), .config = config, .provider = provider, .builtin_tools = true},
        &rt));
    CHECK_OK(rt->start_session(SessionOptions{.id = "s", .task = "look twice"}, nullptr));
    SessionOutcome o;
    CHECK_OK(rt->wait("s", 60s, &o));
    BOOST_TEST((o.status == SessionStatus::kCompleted));
    CHECK_OK(rt->read_events("s", 1, &logs[reads]));
    providers[reads] = provider;
  }
  const auto& reading = *providers[true];
  const auto& not_reading = *providers[false];
  BOOST_REQUIRE_EQUAL(reading.messages_sent.size(), 3u);
  BOOST_REQUIRE_EQUAL(not_reading.messages_sent.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    // The reading provider gets the conversation, growing turn by turn; the
    // other gets none of it, only its size, which is the same.
    BOOST_TEST(reading.messages_sent[i] >= 1 + 2 * i);
    BOOST_TEST(not_reading.messages_sent[i] == 0u);
    BOOST_TEST(reading.chars_sent[i] == reading.chars_of_messages[i]);
    BOOST_TEST(not_reading.chars_sent[i] == reading.chars_of_messages[i]);
  }
  BOOST_TEST(reading.chars_sent[2] > reading.chars_sent[0]);
  // What the scripted answers estimate from that size (no usage in the
  // scenario) is recorded alike: the two logs hold the same replies.
  std::vector<TokenUsage> usage[2];
  for (bool reads : {true, false}) {
    for (const auto& e : logs[reads]) {
      if (const auto* r = get_if<LlmResponded>(e)) usage[reads].push_back(r->usage);
    }
  }
  BOOST_REQUIRE_EQUAL(usage[1].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST(usage[0][i].input == usage[1][i].input);
    BOOST_TEST(usage[0][i].output == usage[1][i].output);
  }
}

// A turn does not wait for the sync of the checkpoint before it: it runs
// while that sync is in flight, and the turn after it waits (a session is
// never more than one checkpoint ahead of what is durable). Subscribers
// hear what follows a durable write only once it is durable.
BOOST_AUTO_TEST_CASE(a_turn_overlaps_the_sync_of_the_checkpoint_before_it_and_no_more) {
  testing::TempDir dir;
  auto gate = std::make_shared<testing::GatedSyncFs>();
  Config config;
  config.workspace = dir.path();
  // The first answer comes after 300 ms: the gate is closed by then.
  config.provider.scenario = write_file(dir, "scenario.json", R"({"replies": [
      {"text": "one", "latency_ms": 300, "tool_calls": [{"name": "noop", "args": {}}]},
      {"text": "two", "tool_calls": [{"name": "noop", "args": {}}]},
      {"text": "three", "tool_calls": [{"name": "noop", "args": {}}]},
      {"text": "done"}]})");
  std::mutex mu;
  std::vector<uint64_t> heard;
  Runtime::Options options{.home = dir.sub("home"), .config = config};
  options.observe = [&](const std::string&, const Event& e) {
    std::lock_guard lock(mu);
    heard.push_back(e.seq);
  };
  RuntimeInternals::TestKnobs knobs;
  knobs.file_system = gate;
  std::unique_ptr<Runtime> rt;
  CHECK_OK(RuntimeInternals::open(std::move(options), knobs, &rt));
  struct OpenOnExit {
    testing::GatedSyncFs* gate;
    ~OpenOnExit() { gate->open_gate(); }
  } open_on_exit{gate.get()};  // before the runtime closes, whatever happens
  CHECK_OK(rt->register_tool(ToolDefinition{
      .spec = {.name = "noop", .description = "does nothing", .idempotent = true},
      .blocking = false,
      .run = [](const nlohmann::json&, const ToolContext&) { return ToolResult{.output = "ok"}; }}));
  CHECK_OK(rt->start_session(SessionOptions{.id = "s", .task = "go"}, nullptr));
  gate->close_gate();

  // Turn 1's checkpoint waits at the gate; turn 2 runs to its own checkpoint.
  auto committed = [&](std::vector<Event>* events) {
    events->clear();
    CHECK_OK(rt->read_events("s", 1, events));
    std::map<uint64_t, uint64_t> seq_of_turn;
    for (const auto& e : *events) {
      if (const auto* c = get_if<TurnCommitted>(e)) seq_of_turn[c->turn] = e.seq;
    }
    return seq_of_turn;
  };
  std::vector<Event> events;
  std::map<uint64_t, uint64_t> seq_of_turn;
  for (int i = 0; i < 1000 && !seq_of_turn.contains(2); ++i) {
    std::this_thread::sleep_for(10ms);
    seq_of_turn = committed(&events);
  }
  BOOST_REQUIRE_MESSAGE(seq_of_turn.contains(2), "turn 2 did not run while turn 1's checkpoint was syncing");
  BOOST_TEST(gate->held() == 1);
  // Turn 3 waits for turn 1's checkpoint.
  std::this_thread::sleep_for(300ms);
  seq_of_turn = committed(&events);
  BOOST_TEST(events.back().seq == seq_of_turn[2]);
  for (const auto& e : events) {
    if (const auto* t = get_if<TurnStarted>(e)) {
      BOOST_TEST(t->turn < 3u, "turn " << t->turn << " started before turn 1's checkpoint was durable");
    }
  }
  {
    std::lock_guard lock(mu);
    BOOST_REQUIRE(!heard.empty());
    BOOST_TEST(heard.back() < seq_of_turn[1]);
  }

  gate->open_gate();
  SessionOutcome o;
  CHECK_OK(rt->wait("s", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(o.turns == 4u);
  events.clear();
  CHECK_OK(rt->read_events("s", 1, &events));
  // The observer hears through the session's subscriber, maybe after the wait.
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(mu);
      if (heard.size() >= events.size()) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::lock_guard lock(mu);
  BOOST_REQUIRE_EQUAL(heard.size(), events.size());
  for (size_t i = 0; i < heard.size(); ++i) BOOST_TEST(heard[i] == i + 1);
}
