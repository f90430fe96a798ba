// What an embedding service relies on when things go wrong: a turn budget
// that ends in a stop (not an invented answer), status codes that each mean
// one thing, options checked like a config file, tools and hooks that
// overrun their time-outs without wedging the runtime, and a process left as
// the runtime found it.
#define BOOST_TEST_MODULE runtime_limits_test
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <sys/prctl.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include "base/log_sink.h"
#include "base/version.h"
#include "events/fold.h"
#include "replay/replayer.h"
#include "runtime/runtime.h"
#include "storage/event_log.h"
#include "storage/session_journal.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;

namespace {

// A latch a test opens to let a stuck tool or hook return.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return open; });
  }
};

struct LimitsFixture {
  testing::TempDir dir;
  std::unique_ptr<Runtime> rt;

  Config config(const std::string& scenario_json) {
    Config c;
    c.provider.scenario = dir.sub("scenario.json");
    std::ofstream(c.provider.scenario) << scenario_json;
    c.workspace = dir.path();
    return c;
  }

  void open(const std::string& scenario_json, Runtime::Options extra = {}) {
    extra.home = dir.sub("home");
    extra.config = config(scenario_json);
    CHECK_OK(Runtime::open(std::move(extra), &rt));
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

  // A session whose loop stopped closes its actor a moment after wait()
  // answers; until then it still runs here (busy to a resume).
  void until_closed() {
    for (int i = 0; i < 2000 && rt->live_sessions() > 0; ++i) std::this_thread::sleep_for(1ms);
    BOOST_REQUIRE(rt->live_sessions() == 0u);
  }

  uint64_t last_seq(const std::string& id) {
    auto all = events(id);
    return all.empty() ? 0 : all.back().seq;
  }
};

ToolDefinition tool(std::string name, bool blocking, ToolFunction run, std::chrono::milliseconds timeout = 0ms) {
  return ToolDefinition{.spec = {.name = std::move(name), .description = "test", .schema = JsonText{R"({"type":"object"})"}},
                        .blocking = blocking,
                        .run = std::move(run),
                        .timeout = timeout};
}

constexpr const char* kThreeCalls = R"({"replies": [
    {"tool_calls": [{"name": "note", "args": {}}]},
    {"tool_calls": [{"name": "note", "args": {}}]},
    {"tool_calls": [{"name": "note", "args": {}}]},
    {"text": "done"}]})";

ToolDefinition note_tool() {
  return tool("note", false, [](const nlohmann::json&, const ToolContext&) { return ToolResult{.output = "noted"}; });
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(runtime_limits, LimitsFixture)

// Out of turns: stopped (session.stopped "max_turns", resumable), no final
// answer made up from an intermediate step; a resume must raise the budget,
// which session.resumed records, and then the session finishes. The replay
// of the whole run is identical.
BOOST_AUTO_TEST_CASE(running_out_of_turns_stops_the_session_and_a_larger_budget_goes_on) {
  open(kThreeCalls);
  CHECK_OK(rt->register_tool(note_tool()));
  CHECK_OK(rt->start_session(SessionOptions{.id = "budget", .task = "go", .max_turns = 2}, nullptr));
  SessionOutcome o;
  CHECK_OK(rt->wait("budget", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kRunning));  // it did not finish
  BOOST_TEST(o.stop_reason == "max_turns");
  BOOST_TEST(o.final_answer.empty());
  BOOST_TEST(o.error.find("all 2 turns") != std::string::npos, o.error);
  BOOST_TEST(o.turns == 2u);
  auto all = events("budget");
  const auto* stopped = get_if<SessionStopped>(all.back());
  BOOST_REQUIRE_MESSAGE(stopped != nullptr, "the last event is " << all.back().type_name());
  BOOST_TEST(stopped->reason == "max_turns");
  BOOST_TEST(of_type<SessionCompleted>("budget").empty());

  until_closed();
  const uint64_t before = last_seq("budget");
  Status same = rt->resume_session("budget", Runtime::ResumeOptions{});
  BOOST_TEST(same.is_invalid_argument(), same.to_string());
  BOOST_TEST(same.message().find("--max-turns") != std::string::npos, same.message());
  std::vector<SessionSummary> rows;
  CHECK_OK(rt->list_sessions(SessionFilter{}, &rows));
  BOOST_REQUIRE(rows.size() == 1u);
  BOOST_TEST(rows[0].status == "stopped");
  BOOST_TEST(rows[0].stop_reason == "max_turns");

  // The same budget again changes nothing; resume_unfinished leaves it be.
  BOOST_TEST(rt->resume_session("budget", Runtime::ResumeOptions{.max_turns = 2}).is_invalid_argument());
  std::vector<ResumedSession> report;
  CHECK_OK(rt->resume_unfinished(Runtime::ResumeOptions{}, &report));
  BOOST_TEST(report.empty());
  BOOST_TEST(last_seq("budget") == before);
  BOOST_TEST(rt->resume_session("budget", Runtime::ResumeOptions{.max_turns = 2'000'000}).is_invalid_argument());

  CHECK_OK(rt->resume_session("budget", Runtime::ResumeOptions{.max_turns = 5}));
  CHECK_OK(rt->wait("budget", 60s, &o));
  BOOST_TEST((o.status == SessionStatus::kCompleted));
  BOOST_TEST(o.final_answer == "done");
  BOOST_TEST(o.turns == 4u);
  auto resumed = of_type<SessionResumed>("budget");
  BOOST_REQUIRE(resumed.size() == 1u);
  BOOST_TEST(resumed[0].max_turns == 5u);

  ReplayReport replayed;
  CHECK_OK(rt->replay("budget", 0, &replayed));
  BOOST_TEST(replayed.identical(), "diverged at seq " << (replayed.divergence ? replayed.divergence->seq : 0));
}

// A run that stopped at its turn budget and a close that comes at once
// (before its actor has closed): the close records no second
// session.stopped over the first, whose reason stands.
BOOST_AUTO_TEST_CASE(a_close_right_after_a_run_stopped_adds_no_second_stop) {
  for (int i = 0; i < 40; ++i) {
    open(kThreeCalls);
    CHECK_OK(rt->register_tool(note_tool()));
    const std::string id = "b" + std::to_string(i);
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "go", .max_turns = 1}, nullptr));
    SessionOutcome o;
    CHECK_OK(rt->wait(id, 60s, &o));
    BOOST_REQUIRE(o.stop_reason == "max_turns");
    rt.reset();
    open(kThreeCalls);
    auto stops = of_type<SessionStopped>(id);
    BOOST_REQUIRE_MESSAGE(stops.size() == 1u, "run " << i << ": " << stops.size() << " session.stopped, the last "
                                                       << (stops.empty() ? "" : stops.back().reason));
    BOOST_TEST(stops[0].reason == "max_turns");
    rt.reset();
  }
}

// timed_out, already_finished, needs_resume and not_found, each for its own
// case; a message to a session that needs a resume writes nothing.
BOOST_AUTO_TEST_CASE(status_codes_name_one_situation_each) {
  {
    // A session whose process died mid-turn: opened, a turn begun, no end.
    std::unique_ptr<EventLog> log;
    std::filesystem::create_directories(dir.sub("home"));
    CHECK_OK(EventLog::open(EventLog::Options{.path = dir.sub("home/log")}, &log));
    std::unique_ptr<SessionJournal> journal;
    CHECK_OK(SessionJournal::create(
        log.get(), "crashed",
        {SessionStarted{.agent_id = "test", .provider = "scripted", .model = "scripted-1", .workspace = dir.path(),
                        .max_turns = 5},
         UserMessage{.text = "go"}},
        JournalOptions{}, &journal));
    CHECK_OK(journal->append_synced({TurnStarted{1}}));
  }
  open(R"({"replies": [{"text": "slow", "latency_ms": 3000}, {"text": "again"}]})");
  const uint64_t crashed_seq = last_seq("crashed");
  SessionOutcome o;
  Status s = rt->send_message("crashed", "hello?");
  BOOST_TEST(s.is_needs_resume(), s.to_string());
  BOOST_TEST(last_seq("crashed") == crashed_seq);  // nothing written on the way
  s = rt->wait("crashed", 100ms, &o);
  BOOST_TEST(s.is_needs_resume(), s.to_string());
  BOOST_TEST(rt->wait("nobody", 100ms, &o).is_not_found());
  BOOST_TEST(rt->resume_session("nobody", Runtime::ResumeOptions{}).is_not_found());
  BOOST_TEST(rt->send_message("nobody", "hi").is_not_found());

  CHECK_OK(rt->start_session(SessionOptions{.id = "slow", .task = "go"}, nullptr));
  s = rt->wait("slow", 200ms, &o);
  BOOST_TEST(s.is_timed_out(), s.to_string());
  CHECK_OK(rt->wait("slow", 60s, &o));
  BOOST_TEST(o.final_answer == "slow");
  until_closed();
  s = rt->resume_session("slow", Runtime::ResumeOptions{});
  BOOST_TEST(s.is_already_finished(), s.to_string());
  BOOST_TEST(s.message().find("send_message") != std::string::npos, s.message());
  // A finished session takes a message: it is woken from its log.
  CHECK_OK(rt->send_message("slow", "once more"));
  CHECK_OK(rt->wait("slow", 60s, &o));
  BOOST_TEST(o.final_answer == "again");

  // And the crashed one goes on once resumed.
  CHECK_OK(rt->resume_session("crashed", Runtime::ResumeOptions{.follow_ups = {"hello?"}}));
  CHECK_OK(rt->wait("crashed", 60s, &o));
  BOOST_TEST(o.turns >= 1u);
}

// Options built in code are held to the config file's rules, with its messages.
BOOST_AUTO_TEST_CASE(options_are_checked_by_the_config_files_rules) {
  struct Case {
    std::function<void(Config&)> change;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](Config& c) { c.max_turns = 0; },
       "Runtime::Options::config: session.max_turns: must be a whole number from 1 to 1000000, got 0"},
      {[](Config& c) { c.retry.max_retries = 100'000; }, "Runtime::Options::config: retry.max_retries: must be"},
      {[](Config& c) { c.tool_timeout_ms = 0; }, "Runtime::Options::config: tools.call_timeout_ms: must be"},
  };
  for (const auto& c : cases) {
    Config bad = config(R"({"replies": [{"text": "x"}]})");
    c.change(bad);
    std::unique_ptr<Runtime> none;
    Status s = Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = bad}, &none);
    BOOST_TEST(s.is_invalid_argument(), s.to_string());
    BOOST_TEST(s.message().find(c.message) == 0u, s.message());
    BOOST_TEST(!none);
  }
  // The file's own message for the same mistake.
  Config from_file;
  std::vector<std::string> warnings;
  Status file = parse_config(R"({"session": {"max_turns": 0}})", "Runtime::Options::config", &from_file, &warnings);
  BOOST_TEST(file.message() == cases[0].message);

  open(R"({"replies": [{"text": "x"}]})");
  Status s = rt->start_session(SessionOptions{.task = "go", .max_turns = 2'000'000}, nullptr);
  BOOST_TEST(s.is_invalid_argument(), s.to_string());
  BOOST_TEST(s.message().find("SessionOptions::max_turns: session.max_turns: must be a whole number from 1 to 1000000") ==
                 0u,
             s.message());
  std::vector<SessionSummary> rows;
  CHECK_OK(rt->list_sessions(SessionFilter{}, &rows));
  BOOST_TEST(rows.empty());  // nothing was started
}

// A non-blocking C++ tool that hangs past its time-out: the session gets a
// timed-out result (the tool asked to stop first), the next call of the same
// tool runs on a new worker, and closing the runtime returns within its
// bound though the call never returned.
BOOST_AUTO_TEST_CASE(a_hung_inline_tool_is_abandoned_without_poisoning_later_calls) {
  auto gate = std::make_shared<Gate>();
  auto entered = std::make_shared<std::atomic<int>>(0);
  auto saw_stop = std::make_shared<std::atomic<bool>>(false);
  open(R"({"replies": [
      {"tool_calls": [{"name": "stuck", "args": {}}]},
      {"tool_calls": [{"name": "stuck", "args": {}}]},
      {"text": "done"}]})",
       Runtime::Options{.shutdown_timeout = 500ms});
  CHECK_OK(rt->register_tool(tool(
      "stuck", /*blocking=*/false,
      [gate, entered, saw_stop](const nlohmann::json&, const ToolContext& ctx) {
        if (++*entered == 1) {
          std::stop_callback heard(ctx.stop, [saw_stop] { *saw_stop = true; });
          gate->wait();  // ignores the token: hangs until the test lets it go
        }
        return ToolResult{.output = "call " + std::to_string(entered->load())};
      },
      300ms)));
  const auto start = std::chrono::steady_clock::now();
  CHECK_OK(rt->start_session(SessionOptions{.id = "hung", .task = "go"}, nullptr));
  SessionOutcome o;
  CHECK_OK(rt->wait("hung", 30s, &o));
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(o.final_answer == "done");
  BOOST_TEST(entered->load() == 2);  // entered again on a new worker
  BOOST_TEST(saw_stop->load());      // asked to stop at its time-out
  auto done = of_type<ToolCompleted>("hung");
  BOOST_REQUIRE(done.size() == 2u);
  BOOST_TEST(done[0].timed_out);
  BOOST_TEST(done[0].is_error);
  BOOST_TEST(done[0].output.find("abandoned") != std::string::npos, done[0].output);
  BOOST_TEST(done[1].output == "call 2");
  BOOST_TEST(!done[1].timed_out);
  BOOST_TEST((took < 10s));  // 300 ms + the 2 s grace, not the session's 15 minutes

  // Closing while the first call is still inside the tool: bounded.
  const auto closing = std::chrono::steady_clock::now();
  rt.reset();
  BOOST_TEST((std::chrono::steady_clock::now() - closing < 3s));
  gate->release();  // the abandoned thread ends
}

// A tool that heeds its token ends at its time-out with its own result; a
// stop of its session trips the token too.
BOOST_AUTO_TEST_CASE(a_tool_that_heeds_its_stop_token_ends_on_time_out_and_on_stop) {
  auto stops = std::make_shared<std::atomic<int>>(0);
  open(R"({"replies": [
      {"tool_calls": [{"name": "wait_for_stop", "args": {}}]},
      {"tool_calls": [{"name": "wait_for_stop", "args": {}}]},
      {"text": "done"}]})");
  auto run = [stops](const nlohmann::json&, const ToolContext& ctx) {
    while (!ctx.stop.stop_requested()) std::this_thread::sleep_for(5ms);
    ++*stops;
    const bool in_time = std::chrono::steady_clock::now() >= ctx.deadline;
    return ToolResult{.output = in_time ? "stopped at my deadline" : "stopped early"};
  };
  CHECK_OK(rt->register_tool(tool("wait_for_stop", /*blocking=*/true, run, 200ms)));
  CHECK_OK(rt->start_session(SessionOptions{.id = "heeds", .task = "go"}, nullptr));
  SessionOutcome o;
  CHECK_OK(rt->wait("heeds", 30s, &o));
  BOOST_TEST(o.final_answer == "done");
  auto done = of_type<ToolCompleted>("heeds");
  BOOST_REQUIRE(done.size() == 2u);
  BOOST_TEST(done[0].output == "stopped at my deadline");  // its own result, within the grace
  BOOST_TEST(done[0].timed_out);
  BOOST_TEST(done[0].duration_ms < 2000u);
  BOOST_TEST(stops->load() == 2);

  // No time-out of its own (the config's 15 minutes): Runtime::stop ends it.
  BOOST_TEST(rt->unregister_tool("wait_for_stop"));
  CHECK_OK(rt->register_tool(tool("wait_for_stop", /*blocking=*/true, run)));
  CHECK_OK(rt->start_session(SessionOptions{.id = "stop-me", .task = "go"}, nullptr));
  while (of_type<ToolRequested>("stop-me").empty()) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(50ms);
  CHECK_OK(rt->stop("stop-me", "the test stops it"));
  for (int i = 0; i < 200 && stops->load() < 3; ++i) std::this_thread::sleep_for(5ms);
  BOOST_TEST(stops->load() == 3);
}

// A C++ hook that blocks holds up only the session that fired it; one that
// overruns its time-out is abandoned (skipped; a fail_closed one denies),
// and a fail_closed hook that throws denies.
BOOST_AUTO_TEST_CASE(hooks_run_concurrently_with_time_outs_and_fail_closed) {
  auto gate = std::make_shared<Gate>();
  open(R"({"replies": [{"tool_calls": [{"name": "note", "args": {}}]}, {"text": "done"}]})");
  CHECK_OK(rt->register_tool(note_tool()));
  CHECK_OK(rt->register_hook(HookDefinition{.name = "blocks-a",
                                            .event = HookEvent::kPreToolUse,
                                            .function =
                                                [gate](const HookInput& in) {
                                                  if (in.session_id == "a") gate->wait();
                                                  return HookDecision{.decision = Decision::kAllow};
                                                },
                                            .timeout_ms = 60'000}));
  CHECK_OK(rt->start_session(SessionOptions{.id = "a", .task = "go"}, nullptr));
  while (of_type<LlmResponded>("a").empty()) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(50ms);  // a's hook is blocked now
  CHECK_OK(rt->start_session(SessionOptions{.id = "b", .task = "go"}, nullptr));
  SessionOutcome o;
  CHECK_OK(rt->wait("b", 10s, &o));  // not held up by a's hook
  BOOST_TEST(o.final_answer == "done");
  BOOST_TEST(rt->wait("a", 10ms, &o).is_timed_out());
  gate->release();
  CHECK_OK(rt->wait("a", 10s, &o));
  BOOST_TEST(o.final_answer == "done");
  BOOST_TEST(rt->unregister_hook("blocks-a"));

  auto hanging = [](const HookInput&) {
    std::this_thread::sleep_for(3s);
    return HookDecision{.decision = Decision::kAllow};
  };
  // Skipped: the call goes ahead, the failure is recorded.
  CHECK_OK(rt->register_hook(HookDefinition{
      .name = "slow", .event = HookEvent::kPreToolUse, .function = hanging, .timeout_ms = 200}));
  CHECK_OK(rt->start_session(SessionOptions{.id = "open", .task = "go"}, nullptr));
  CHECK_OK(rt->wait("open", 10s, &o));
  auto decided = of_type<HookDecided>("open");
  bool failed = false;
  for (const auto& d : decided) failed |= d.hook_name == "slow" && d.decision == "failed";
  BOOST_TEST(failed);
  BOOST_TEST(!of_type<ToolCompleted>("open").at(0).is_error);
  BOOST_TEST(rt->unregister_hook("slow"));

  // Fail-closed: the time-out denies; so does a throw.
  for (int which = 0; which < 2; ++which) {
    const std::string id = which == 0 ? "closed-slow" : "closed-throws";
    HookFunction fn = hanging;
    if (which == 1) fn = [](const HookInput&) -> HookDecision { throw std::runtime_error("policy store down"); };
    CHECK_OK(rt->register_hook(HookDefinition{.name = "guard",
                                              .event = HookEvent::kPreToolUse,
                                              .function = fn,
                                              .timeout_ms = 200,
                                              .fail_closed = true}));
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "go"}, nullptr));
    CHECK_OK(rt->wait(id, 10s, &o));
    auto done = of_type<ToolCompleted>(id);
    BOOST_REQUIRE(done.size() == 1u);
    BOOST_TEST(done[0].is_error);
    BOOST_TEST(done[0].output.find("guard") != std::string::npos, done[0].output);
    BOOST_TEST(rt->unregister_hook("guard"));
  }
}

// Process-wide changes only when asked for, and undone at close.
BOOST_AUTO_TEST_CASE(process_wide_settings_are_opt_in_and_restored) {
  auto dumpable = [] { return ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); };
  auto subreaper = [] {
    int on = 0;
    ::prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0);
    return on;
  };
  BOOST_REQUIRE(dumpable() == 1);
  BOOST_REQUIRE(subreaper() == 0);
  open(R"({"replies": [{"text": "x"}]})");
  BOOST_TEST(dumpable() == 1);
  BOOST_TEST(subreaper() == 0);
  rt.reset();
  open(R"({"replies": [{"text": "x"}]})", Runtime::Options{.child_subreaper = true, .non_dumpable = true});
  BOOST_TEST(dumpable() == 0);
  BOOST_TEST(subreaper() == 1);
  rt.reset();
  BOOST_TEST(dumpable() == 1);
  BOOST_TEST(subreaper() == 0);
}

// The library logs nothing on stdout; a program's sink gets the lines at its
// level, and the default comes back when the sink is taken away.
BOOST_AUTO_TEST_CASE(the_library_logs_to_the_hosts_sink_and_never_to_stdout) {
  std::fflush(stdout);
  std::fflush(stderr);
  const std::string captured = dir.sub("stdout.txt"), captured_err = dir.sub("stderr.txt");
  int saved = ::dup(STDOUT_FILENO), saved_err = ::dup(STDERR_FILENO);
  int file = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err_file = ::open(captured_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  BOOST_REQUIRE(saved >= 0 && file >= 0 && saved_err >= 0 && err_file >= 0);
  ::dup2(file, STDOUT_FILENO);
  ::dup2(err_file, STDERR_FILENO);
  ::close(file);
  ::close(err_file);

  auto lines = std::make_shared<std::vector<std::pair<LogLevel, std::string>>>();
  auto mu = std::make_shared<std::mutex>();
  {
    open(R"({"replies": [{"tool_calls": [{"name": "note", "args": {}}]}, {"text": "done"}]})");
    CHECK_OK(rt->register_tool(note_tool()));
    CHECK_OK(rt->register_hook(HookDefinition{
        .name = "broken", .event = HookEvent::kPreToolUse, .function = [](const HookInput&) -> HookDecision {
          // What a hook's exception says may hold a key, or terminal controls.
          throw std::runtime_error("out of order \x1b[2J key sk-proj-Ab3dEf6hIj9kLm2nOp5q");
        }}));
    SessionOutcome o;
    CHECK_OK(rt->start_session(SessionOptions{.id = "quiet", .task = "go"}, nullptr));
    CHECK_OK(rt->wait("quiet", 30s, &o));  // warns, on stderr by default
    set_log_sink(
        [lines, mu](LogLevel level, std::string_view message) {
          std::lock_guard lock(*mu);
          lines->emplace_back(level, std::string(message));
        },
        LogLevel::kInfo);
    CHECK_OK(rt->start_session(SessionOptions{.id = "heard", .task = "go"}, nullptr));
    CHECK_OK(rt->wait("heard", 30s, &o));
    rt.reset();  // stops nothing: both finished
  }
  set_log_sink(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved, STDOUT_FILENO);
  ::dup2(saved_err, STDERR_FILENO);
  ::close(saved);
  ::close(saved_err);
  // The default destination, stderr: the warning, its key redacted, its
  // controls shown and not obeyed.
  std::ifstream err_in(captured_err);
  std::string on_stderr((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  BOOST_TEST(on_stderr.find("hook broken threw: out of order") != std::string::npos, on_stderr);
  BOOST_TEST(on_stderr.find("\x1b") == std::string::npos);
  BOOST_TEST(on_stderr.find("\\x1b[2J") != std::string::npos, on_stderr);
  BOOST_TEST(on_stderr.find("Ab3dEf6hIj9kLm2n") == std::string::npos, on_stderr);
  std::ifstream in(captured);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(written.empty(), written);
  std::lock_guard lock(*mu);
  bool warned = false;
  for (const auto& [level, text] : *lines) {
    warned |= level == LogLevel::kWarn && text.find("hook broken threw: out of order") != std::string::npos &&
              text.find("heard") != std::string::npos;
    BOOST_TEST(text.find("Ab3dEf6hIj9kLm2n") == std::string::npos, text);  // redacted for the sink too
  }
  BOOST_TEST(warned);
}

// An embedder that registers nothing offers the model no tool: the shell
// and the file tools come only when asked for.
BOOST_AUTO_TEST_CASE(a_runtime_offers_no_built_in_tool_unless_asked) {
  auto offered = [this](const std::string& id) {
    SessionOutcome o;
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = "go"}, nullptr));
    CHECK_OK(rt->wait(id, 30s, &o));
    auto configured = of_type<SessionConfigured>(id);
    BOOST_REQUIRE(!configured.empty());
    std::vector<std::string> names;
    for (const auto& t : nlohmann::json::parse(configured.back().tools.text)) names.push_back(t["name"]);
    return names;
  };
  open(R"({"replies": [{"text": "x"}, {"text": "y"}]})");
  BOOST_TEST(offered("bare").empty());
  rt.reset();
  open(R"({"replies": [{"text": "x"}, {"text": "y"}]})", Runtime::Options{.builtin_tools = true});
  auto names = offered("asked");
  BOOST_TEST((std::find(names.begin(), names.end(), "shell") != names.end()));
}

BOOST_AUTO_TEST_CASE(the_version_of_the_headers_is_the_librarys) {
  BOOST_TEST(std::string(version()) == CARAPACE_VERSION_STRING);
  BOOST_TEST(std::string(CARAPACE_VERSION_STRING) ==
             std::to_string(CARAPACE_VERSION_MAJOR) + "." + std::to_string(CARAPACE_VERSION_MINOR) + "." +
                 std::to_string(CARAPACE_VERSION_PATCH));
}

BOOST_AUTO_TEST_SUITE_END()
