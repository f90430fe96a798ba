// A whole agent session over each HTTP provider, run by the real carapace
// binary against a loopback server that plays a deterministic model: killed
// with SIGKILL in the middle of a streamed answer, resumed, killed again
// while a tool runs, resumed again, and finished. Step mode never sends a
// request whose answer was recorded; every request the server got is an
// llm.requested in the log; the API key (a canary in the environment) is in
// no output and nowhere under the home.
#define BOOST_TEST_MODULE provider_resume_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "base/child_process.h"
#include "events/fold.h"
#include "replay/verify.h"
#include "storage/body_store.h"
#include "storage/event_log.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_model.h"
#include "tests/support/home_scan.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace carapace::testing;
using nlohmann::json;

namespace {

const std::string kCanary = "sk-canary-resume-Hq3Lw9Zr2Xt7Mv5Nb8Kc1Pj4";

struct Agent {
  std::string format;
  TempDir dir;
  MockLlmServer server;
  std::atomic<bool> stall_armed{true};

  explicit Agent(std::string f) : format(std::move(f)) {
    std::filesystem::create_directories(dir.sub("ws"));
    ::unsetenv("OPENAI_BASE_URL");
    ::unsetenv("ANTHROPIC_BASE_URL");
    ::setenv(format == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY", kCanary.c_str(), 1);
    // The first task's shell call sleeps (a test kills the process while it
    // runs); the first time the model is asked for it, its answer stalls
    // halfway through the stream.
    server.set_handler([this](const MockRequest& r, size_t) {
      Conversation c = read_conversation(format, r.body);
      FakeModel model{.format = format};
      if (c.task == "remember apples") model.shell_command = "sleep 30; cat note.txt";
      MockReply reply = model.reply(r);
      if (c.results == 2 && stall_armed.exchange(false)) {
        reply.stall_after = static_cast<long>(reply.body.size() / 2);
        reply.stall_ms = 60'000;
      }
      return reply;
    });
  }

  std::string home() const { return dir.sub("home"); }
  std::string out() const { return dir.sub("child.log"); }
  std::string exec_log() const { return dir.sub("exec.log"); }
  std::string base_url() const { return format == "openai" ? server.url() + "/v1" : server.url(); }

  // `bare`: no provider flags; the session's stored configuration says which server it talks to.
  std::vector<std::string> args(std::vector<std::string> command, bool bare = false) const {
    std::vector<std::string> a = {"--home", home()};
    a.insert(a.end(), command.begin(), command.end());
    std::vector<std::string> common = {"--provider", format,     "--model",    "test-model",
                                       "--base-url", base_url(), "--exec-log", exec_log()};
    a.insert(a.end(), common.begin() + (bare ? 6 : 0), common.end());
    // The follow-up is recorded with the task; a resume sends it when its turn comes.
    if (a[2] == "run") a.insert(a.end(), {"--workspace", dir.sub("ws"), "--then", "remember pears"});
    return a;
  }

  pid_t spawn(std::vector<std::string> command) {
    pid_t pid = spawn_child_process(CARAPACE_BIN, args(std::move(command)), out());
    BOOST_REQUIRE(pid > 0);
    return pid;
  }

  ChildResult kill_when(pid_t pid, const std::function<bool()>& moment, const std::string& what) {
    bool reached = MockLlmServer::wait_for(moment, std::chrono::seconds(30));
    BOOST_REQUIRE_MESSAGE(reached, what << " never came: " << read_text(out()));
    ::kill(pid, SIGKILL);
    ChildResult r;
    BOOST_REQUIRE(wait_child_process(pid, 30'000, &r.status));
    return r;
  }

  std::vector<Event> events() {
    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = home() + "/log", .mode = EventLog::Mode::kReader}, &log));
    std::vector<Event> all;
    CHECK_OK(log->read("s", 1, UINT64_MAX, &all));
    return all;
  }
};

std::string stored(const std::string& home, const std::string& ref) {
  std::unique_ptr<BodyStore> store;
  CHECK_OK(BodyStore::open(home + "/bodies", BodyStore::Mode::kReader, &store));
  std::string body;
  CHECK_OK(store->get(ref, &body));
  return body;
}

// The request bodies (by body_ref) whose answer the log records.
std::set<std::string> answered_requests(const std::vector<Event>& events) {
  std::set<std::string> answered;
  std::string last_ref;
  for (const auto& e : events) {
    if (const auto* q = get_if<LlmRequested>(e)) last_ref = q->body_ref;
    if (get_if<LlmResponded>(e)) answered.insert(last_ref);
  }
  return answered;
}

void kill_twice_and_resume(const std::string& format) {
  Agent a(format);

  // 1. Killed while the model's second answer is streaming.
  pid_t first = a.spawn({"run", "remember apples", "--session", "s"});
  ChildResult r1 = a.kill_when(first, [&] { return a.server.stalling() == 1; }, "the stalled answer");
  BOOST_REQUIRE(r1.killed());
  std::vector<Event> at_first_kill = a.events();
  BOOST_TEST(answered_requests(at_first_kill).size() == 1u);
  BOOST_REQUIRE(a.server.request_count() == 2u);

  // 2. Resumed: the lost request is asked again; killed while its shell call runs.
  pid_t second = a.spawn({"resume", "s"});
  ChildResult r2 = a.kill_when(
      second, [&] { return read_text(a.exec_log()).find(" shell ") != std::string::npos; }, "the shell call");
  BOOST_REQUIRE(r2.killed());
  std::vector<Event> at_second_kill = a.events();
  std::set<std::string> answered = answered_requests(at_second_kill);
  BOOST_TEST(answered.size() == 2u);
  size_t sent_before = a.server.request_count();
  BOOST_TEST(sent_before == 3u);

  // 3. Resumed again: the shell call's outcome is unknown (it is not run
  // again), the model is told, and the session finishes, then takes the next message.
  ChildResult r3 = run_child(CARAPACE_BIN, a.args({"resume", "s"}, /*bare=*/true), a.out());
  std::string output = read_text(a.out());
  BOOST_REQUIRE_MESSAGE(r3.succeeded(), output);
  BOOST_TEST(output.find("Done: remember pears") != std::string::npos, output);

  std::vector<Event> events = a.events();
  SessionState state;
  CHECK_OK(fold(events, &state));
  BOOST_TEST((state.status == SessionStatus::kCompleted));
  BOOST_TEST(state.resumes == 2u);
  BOOST_TEST(state.final_answer == "Done: remember pears");
  {
    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = a.home() + "/log", .mode = EventLog::Mode::kReader}, &log));
    VerifyReport report;
    CHECK_OK(verify_session(*log, "s", &report));
    BOOST_TEST(report.issues.empty());
  }
  // Nothing recorded before a kill changed.
  for (size_t i = 0; i < at_second_kill.size(); ++i) BOOST_TEST((events[i] == at_second_kill[i]), "seq " << i + 1);

  // Every request the server got is an llm.requested whose captured body is
  // the bytes it got; no answered request was sent again.
  auto received = a.server.requests();
  std::map<std::string, int> sent, recorded;
  for (const auto& q : received) ++sent[BodyStore::ref_of(q.body)];
  for (const auto& e : events) {
    if (const auto* q = get_if<LlmRequested>(e)) {
      ++recorded[q->body_ref];
      BOOST_TEST(sent.count(q->body_ref) == 1u);
    }
  }
  BOOST_TEST((sent == recorded));
  for (size_t i = sent_before; i < received.size(); ++i) {
    BOOST_TEST(answered.count(BodyStore::ref_of(received[i].body)) == 0u, "request " << i << " was answered before");
  }
  for (const auto& [ref, n] : sent) BOOST_TEST(stored(a.home(), ref).size() > 0u);
  // Turn 2's request: sent by the first process (lost) and the second (answered), never by the third.
  BOOST_TEST(received[1].body == received[2].body);
  BOOST_TEST(sent[BodyStore::ref_of(received[1].body)] == 2);

  // The interrupted shell call ran once and was reported to the model as such.
  std::string execs = read_text(a.exec_log());
  size_t shells = 0;
  for (size_t at = execs.find(" shell "); at != std::string::npos; at = execs.find(" shell ", at + 1)) ++shells;
  BOOST_TEST(shells == 2u);  // the first task's (interrupted) and the second's
  bool interrupted = false;
  for (const auto& e : events) {
    if (const auto* t = get_if<ToolCompleted>(e); t && t->tool == "shell" && t->interrupted) interrupted = true;
  }
  BOOST_TEST(interrupted);
  Conversation after = read_conversation(format, received.at(sent_before).body);
  BOOST_TEST(after.results == 3);
  BOOST_TEST(after.last_result.find("was interrupted") != std::string::npos, after.last_result);

  // The key went to the server and nowhere else.
  for (const auto& q : received) {
    BOOST_TEST(q.header(format == "openai" ? "Authorization" : "x-api-key") ==
               (format == "openai" ? "Bearer " : "") + kCanary);
  }
  BOOST_TEST(output.find(kCanary) == std::string::npos);
  HomeScan scan = scan_home(a.home(), kCanary);
  BOOST_TEST(scan.found.empty(), scan.found.front());
  BOOST_TEST(scan.records > 50u);
}

}  // namespace

BOOST_AUTO_TEST_CASE(openai_killed_mid_stream_and_mid_tool_then_resumed_to_the_end) {
  kill_twice_and_resume("openai");
}

BOOST_AUTO_TEST_CASE(anthropic_killed_mid_stream_and_mid_tool_then_resumed_to_the_end) {
  kill_twice_and_resume("anthropic");
}
