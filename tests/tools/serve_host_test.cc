// `carapace serve` as the host of a home's sessions, in its own process on
// 127.0.0.1, driven over its API as a program would: start a session, see
// it park on an approval (pushed over the WebSocket), approve it once (a
// second answer refused, naming the first), message it, fork it; stop and
// resume one while its model streams; every kind of bad request refused
// with nothing written; a host killed with SIGKILL resumes what it ran and
// leaves parked sessions parked; SIGTERM records a stop its next start goes
// on from; a second server on a held home is read-only.
#define BOOST_TEST_MODULE serve_host_test
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "tests/support/cli_runner.h"
#include "tests/support/deep_json.h"
#include "tests/support/serve_host.h"
#include "tests/support/temp_dir.h"
#include "tests/support/ws_client.h"

using namespace carapace;
using carapace::testing::WsClient;
using nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using carapace::testing::CliRunner;
using carapace::testing::Reply;
using carapace::testing::serve_host_detail::contains;
using carapace::testing::serve_host_detail::slurp;
using carapace::testing::serve_host_detail::wait_for;

// The write-file call asks for approval (the config's policy); then an answer.
constexpr const char* kApprovalScenario = R"({"replies": [
  {"text": "Writing the note.", "tool_calls": [{"name": "write_file", "args": {"path": "note.txt", "content": "hi"}}]},
  {"text": "The note is written."},
  {"text": "Answered the follow-up."},
  {"text": "And another."}]})";

// A slow first answer, streamed: time to stop it, or to kill its host.
constexpr const char* kSlowScenario = R"({"replies": [
  {"text": "A slow answer that takes its time to arrive, piece by piece.", "latency_ms": 4000},
  {"text": "Then another."}]})";

struct Fixture : carapace::testing::ServeHost {
  Fixture() { std::ofstream(home + "/config.json") << R"({"approvals": {"tools": "^write_file$"}})"; }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(serve_host, Fixture)

BOOST_AUTO_TEST_CASE(a_session_started_over_the_api_parks_is_approved_once_and_goes_on) {
  start_server(kApprovalScenario);
  BOOST_TEST(get("/api/status").j["data"]["mode"] == "host");
  WsClient ws(port, token);
  Reply started = post("/api/sessions", {{"task", "write a note"}, {"id", "a1"}});
  BOOST_REQUIRE_MESSAGE(started.status == 200, started.body);
  BOOST_TEST(started.j["data"]["session"] == "a1");
  const std::string workspace = started.j["data"]["workspace"];
  BOOST_TEST(workspace == std::filesystem::weakly_canonical(home + "/workspaces/a1").string());

  // Parked: pushed to every client, listed, nothing written yet.
  json pushed;
  BOOST_REQUIRE(ws.wait([](const json& m) { return m.value("type", "") == "approval"; }, &pushed));
  BOOST_TEST(pushed["session"] == "a1");
  BOOST_TEST(pushed["request"]["tool"] == "write_file");
  BOOST_REQUIRE(reaches("a1", "waiting"));
  Reply listed = get("/api/approvals?session=a1");
  BOOST_REQUIRE(listed.j["data"].size() == 1u);
  const std::string call = listed.j["data"][0]["call_id"];
  BOOST_TEST(listed.j["data"][0]["args_digest"] == pushed["request"]["args_digest"]);
  BOOST_TEST(!std::filesystem::exists(workspace + "/note.txt"));

  // Its answers stream to a watcher, whatever starts the run. The server
  // answers a watch with the session's spans: from then on it is watched.
  ws.send(R"({"type": "watch", "session": "a1"})");
  BOOST_REQUIRE(
      ws.wait([](const json& m) { return m.value("type", "") == "spans" && m["session"] == "a1"; }));
  auto streamed = [&](const std::string& part) {
    return ws.wait([&](const json& m) {
      return m.value("type", "") == "delta" && m["session"] == "a1" && contains(m.value("text", ""), part);
    });
  };

  // A digest of other arguments is refused; then approved, once.
  Reply wrong = post("/api/sessions/a1/approvals/" + call, {{"decision", "approve"}, {"digest", std::string(32, '0')}});
  BOOST_TEST(wrong.status == 400, wrong.body);
  Reply approved = post("/api/sessions/a1/approvals/" + call, {{"decision", "approve"}, {"reason", "fine"}});
  BOOST_REQUIRE_MESSAGE(approved.status == 200, approved.body);
  BOOST_TEST(approved.j["data"]["decision"] == "approved");
  Reply again = post("/api/sessions/a1/approvals/" + call, {{"decision", "deny"}});
  BOOST_TEST(again.status == 409, again.body);
  BOOST_TEST(again.j["error"]["code"] == "conflict");
  BOOST_TEST(contains(again.message(), "already approved by web"), again.body);
  BOOST_TEST(streamed("The note"));  // the run the approval woke
  BOOST_REQUIRE(reaches("a1", "completed"));
  BOOST_TEST(slurp(workspace + "/note.txt") == "hi");
  auto decided = of_type("a1", "approval.decided");
  BOOST_REQUIRE(decided.size() == 1u);
  BOOST_TEST(decided[0]["data"]["by"] == "web");
  BOOST_TEST(contains(decided[0]["data"]["who"].get<std::string>(), "carapace serve"));
  BOOST_TEST(get("/api/approvals").j["data"].empty());

  // A message: the session runs again and answers.
  Reply sent = post("/api/sessions/a1/messages", {{"text", "and then?"}});
  BOOST_REQUIRE_MESSAGE(sent.status == 200, sent.body);
  BOOST_TEST(streamed("Answered the follow-up"));  // the run a message started
  BOOST_REQUIRE(wait_for([&] {
    for (const auto& e : of_type("a1", "session.completed")) {
      if (e["data"]["final_answer"] == "Answered the follow-up.") return true;
    }
    return false;
  }));

  // A fork at turn 1 runs on its own, the parent untouched.
  const size_t parent_events = events("a1").size();
  Reply forked = post("/api/sessions/a1/fork", {{"at_turn", 1}, {"id", "f1"}, {"task", "once more"}});
  BOOST_REQUIRE_MESSAGE(forked.status == 200, forked.body);
  BOOST_TEST(forked.j["data"]["parent"] == "a1");
  BOOST_TEST(wait_for([&] { return !status_of("f1").empty(); }));
  BOOST_TEST(events("a1").size() == parent_events);
  Reply twice = post("/api/sessions", {{"task", "again"}, {"id", "a1"}});
  BOOST_TEST(twice.status == 409, twice.body);
}

// A key the model wrote reaches no client unmasked: not the streamed
// answer, not the approval request pushed or listed.
BOOST_AUTO_TEST_CASE(what_the_host_pushes_and_lists_is_redacted) {
  const std::string key = "sk-proj-Canary7Qw2Er4Ty6Ui8Op0As";
  start_server(R"({"replies": [
    {"text": "Storing it.", "tool_calls": [{"name": "write_file", "args": {"path": "k.txt", "content": ")" + key + R"("}}]},
    {"text": "Stored )" + key + R"( in k.txt."}]})");
  WsClient ws(port, token);
  BOOST_REQUIRE(post("/api/sessions", {{"task", "keep it"}, {"id", "k"}}).status == 200);
  json pushed, delta;
  BOOST_REQUIRE(ws.wait([](const json& m) { return m.value("type", "") == "approval"; }, &pushed));
  ws.send(R"({"type": "watch", "session": "k"})");
  // Watched once the server answers (a delta before that reaches no one).
  BOOST_REQUIRE(ws.wait([](const json& m) { return m.value("type", "") == "spans" && m["session"] == "k"; }));
  BOOST_REQUIRE(reaches("k", "waiting"));
  Reply listed = get("/api/approvals");
  const std::string call = listed.j["data"][0]["call_id"];
  BOOST_REQUIRE(post("/api/sessions/k/approvals/" + call, {{"decision", "approve"}}).status == 200);
  BOOST_REQUIRE(ws.wait([](const json& m) { return m.value("type", "") == "delta"; }, &delta));
  for (const std::string& text : {pushed.dump(), delta.dump(), listed.body}) {
    BOOST_TEST(!contains(text, key), text);
  }
  BOOST_TEST(contains(listed.body, "0As"), listed.body);  // masked, its end kept
  BOOST_TEST(contains(delta.dump(), "Stored"), delta.dump());
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_and_change_nothing) {
  start_server(kApprovalScenario);
  std::filesystem::create_directories(dir.sub("outside"));
  std::filesystem::create_symlink(dir.sub("outside"), home + "/workspaces/escape");
  struct Case {
    std::string target, body;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/api/sessions", R"({"task": "x", "colour": "red"})", 400, "unknown field \"colour\""},
      {"/api/sessions", R"({"task": 7})", 400, "\"task\" must be a string"},
      {"/api/sessions", R"({})", 400, "\"task\" is required"},
      {"/api/sessions", R"({"task": "x", "max_turns": -1})", 400, "\"max_turns\" must be from 1"},
      {"/api/sessions", R"({"task": "x", "max_turns": 1.5})", 400, "\"max_turns\" must be a whole number"},
      {"/api/sessions", R"(["task"])", 400, "must be a JSON object"},
      {"/api/sessions", R"({"task": )", 400, "not valid JSON"},
      {"/api/sessions", testing::nested_json(100), 400, "nested deeper"},
      {"/api/sessions", R"({"task": "x", "workspace": "../up"})", 400, "has the part '..'"},
      {"/api/sessions", R"({"task": "x", "workspace": "/etc"})", 400, "must be a relative path"},
      {"/api/sessions", R"({"task": "x", "workspace": "escape/in"})", 400, "is not a directory"},
      {"/api/sessions", R"({"task": "x", "id": "../../x"})", 400, "is not a session id"},
      {"/api/sessions/a1/stop", R"({})", 409, "is not running in this server"},
      {"/api/sessions/nope/messages", R"({"text": "hi"})", 404, "nope"},
      {"/api/sessions/nope/approvals/c1", R"({"decision": "approve"})", 404, "nope"},
      {"/api/sessions/nope/approvals/c1", R"({"decision": "maybe"})", 400, "is not approve, deny or answer"},
      {"/api/sessions/nope/fork", R"({"task": "x"})", 400, "\"at_turn\" is required"},
      {"/api/sessions/nope/resume", R"({"mode": "sideways"})", 400, "is not step or turn"},
      {"/api/elsewhere", R"({})", 404, "nothing to POST"},
  };
  for (const auto& c : cases) {
    Reply r = request("POST", c.target, c.body);
    BOOST_TEST(r.status == c.status, c.target << " " << c.body.substr(0, 60) << ": " << r.body.substr(0, 300));
    BOOST_TEST(contains(r.message(), c.says), c.says << " in " << r.body.substr(0, 300));
    BOOST_TEST(r.j["success"] == false);
  }
  // Who may write: the token, the page's own origin, JSON.
  Reply no_token = request("POST", "/api/sessions", R"({"task": "x"})", {"Content-Type: application/json"}, false);
  BOOST_TEST(no_token.status == 401);
  Reply bad_token = request("POST", "/api/sessions", R"({"task": "x"})",
                            {"Content-Type: application/json", "Authorization: Bearer not-the-token-0123456"}, false);
  BOOST_TEST(bad_token.status == 401);
  Reply other_site = request("POST", "/api/sessions", R"({"task": "x"})",
                             {"Content-Type: application/json", "Origin: http://attacker.example"});
  BOOST_TEST(other_site.status == 403, other_site.body);
  Reply form = request("POST", "/api/sessions", "task=x", {"Content-Type: application/x-www-form-urlencoded"});
  BOOST_TEST(form.status == 415, form.body);
  Reply big = request("POST", "/api/sessions", R"({"task": ")" + std::string(70 * 1024, 'x') + R"("})");
  BOOST_TEST(big.status == 413, big.body);
  Reply long_task = request("POST", "/api/sessions", R"({"task": ")" + std::string(62 * 1024, 'x') + R"("})");
  BOOST_TEST(long_task.status == 400, long_task.body);
  // Nothing was written: no session, no directory outside the root.
  BOOST_TEST(get("/api/sessions").j["data"].empty());
  BOOST_TEST(std::filesystem::is_empty(dir.sub("outside")));
  BOOST_TEST(!std::filesystem::exists(home + "/workspaces/up"));
  BOOST_TEST(!std::filesystem::exists(home + "/x"));
  // The server is still up and takes a good request.
  BOOST_TEST(post("/api/sessions", {{"task", "write a note"}}).status == 200);
}

BOOST_AUTO_TEST_CASE(a_running_session_streams_stops_and_resumes) {
  start_server(kSlowScenario);
  Reply started = post("/api/sessions", {{"task", "take your time"}, {"id", "slow"}});
  BOOST_REQUIRE_MESSAGE(started.status == 200, started.body);
  BOOST_REQUIRE(reaches("slow", "running"));
  Reply stopped = post("/api/sessions/slow/stop", json::object());
  BOOST_REQUIRE_MESSAGE(stopped.status == 200, stopped.body);
  BOOST_REQUIRE(reaches("slow", "stopped"));
  json last = events("slow").back();
  BOOST_TEST(last["type"] == "session.stopped");
  BOOST_TEST(last["data"]["reason"] == "stopped over the API");

  // Resumed: it runs again, and its answer streams to a watcher.
  WsClient ws(port, token);
  ws.send(R"({"type": "watch", "session": "slow"})");
  json watching;  // the watch is in place (its spans answer it) before the session runs again
  BOOST_REQUIRE(ws.wait([](const json& m) { return m.value("type", "") == "spans" && m["session"] == "slow"; },
                        &watching));
  Reply resumed = post("/api/sessions/slow/resume", json::object());
  BOOST_REQUIRE_MESSAGE(resumed.status == 200, resumed.body);
  json delta;
  BOOST_TEST(ws.wait([](const json& m) { return m.value("type", "") == "delta" && m["session"] == "slow"; }, &delta));
  BOOST_TEST(!delta.value("text", "").empty());
  BOOST_REQUIRE(reaches("slow", "completed"));
  BOOST_TEST(of_type("slow", "session.resumed").size() == 1u);
  Reply done = post("/api/sessions/slow/resume", json::object());
  BOOST_TEST(done.status == 409, done.body);
}

BOOST_AUTO_TEST_CASE(a_killed_host_resumes_what_it_ran_and_parked_sessions_stay_parked) {
  // One session parks on an approval; another waits for its slow model.
  start_server(R"({"replies": [
    {"text": "Writing.", "tool_calls": [{"name": "write_file", "args": {"path": "n.txt", "content": "x"}}]},
    {"text": "Written."}]})");
  BOOST_REQUIRE(post("/api/sessions", {{"task", "write"}, {"id", "parked"}}).status == 200);
  BOOST_REQUIRE(reaches("parked", "waiting"));
  kill_server(SIGTERM);
  start_server(kSlowScenario);
  BOOST_REQUIRE(post("/api/sessions", {{"task", "slowly"}, {"id", "busy"}}).status == 200);
  BOOST_REQUIRE(reaches("busy", "running"));
  kill_server(SIGKILL);

  // Restarted: the crashed one goes on (step mode), once; the parked one waits.
  std::string log = start_server(kSlowScenario, "", "serve2.out");
  // It resumes after it says it listens.
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "resumed busy (crashed)"); }), slurp(log));
  BOOST_TEST(!contains(slurp(log), "parked"), slurp(log));
  BOOST_REQUIRE(reaches("busy", "completed"));
  BOOST_TEST(of_type("busy", "session.resumed").size() == 1u);
  BOOST_TEST(of_type("busy", "session.started").size() == 1u);
  BOOST_TEST(status_of("parked") == "waiting");
  BOOST_TEST(get("/api/approvals").j["data"].size() == 1u);
}

BOOST_AUTO_TEST_CASE(sigterm_records_a_stop_the_next_start_goes_on_from) {
  std::string log = start_server(kSlowScenario);
  BOOST_REQUIRE(post("/api/sessions", {{"task", "slowly"}, {"id", "t1"}}).status == 200);
  BOOST_REQUIRE(reaches("t1", "running"));
  const auto before = std::chrono::steady_clock::now();
  kill_server(SIGTERM);
  BOOST_TEST((std::chrono::steady_clock::now() - before < std::chrono::seconds(10)));
  BOOST_TEST(contains(slurp(log), "stopping the sessions it runs"), slurp(log));
  json last = events("t1").back();
  BOOST_TEST(last["type"] == "session.stopped");
  BOOST_TEST(last["data"]["reason"] == "carapace serve stopped (SIGTERM)");

  // --no-resume leaves it; the next start without it goes on.
  log = start_server(kSlowScenario, "--no-resume", "serve2.out");
  BOOST_TEST(!contains(slurp(log), "resumed t1"));
  BOOST_TEST(status_of("t1") == "stopped");
  kill_server(SIGTERM);
  log = start_server(kSlowScenario, "", "serve3.out");
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "resumed t1 (this server was stopped while it ran)"); }),
             slurp(log));
  BOOST_REQUIRE(reaches("t1", "completed"));
}

BOOST_AUTO_TEST_CASE(a_second_server_on_a_held_home_is_read_only) {
  start_server(kApprovalScenario);
  const uint16_t first_port = port;
  const std::string first_token = token;
  const pid_t first = server;
  server = 0;
  std::string log = start_server(kApprovalScenario, "", "second.out");
  BOOST_TEST(contains(slurp(log), "read-only: another process writes this home"), slurp(log));
  BOOST_TEST(get("/api/status").j["data"]["mode"] == "read-only");
  Reply refused = post("/api/sessions", {{"task", "x"}});
  BOOST_TEST(refused.status == 405, refused.body);
  BOOST_TEST(contains(refused.message(), "read-only"), refused.body);
  BOOST_TEST(get("/api/approvals").j["data"].empty());
  // The host still takes writes, and the read-only one shows them, its
  // approval requests included.
  const uint16_t second_port = port;
  port = first_port;
  BOOST_TEST(token == first_token);  // the home's serve.token: both servers'
  BOOST_TEST(post("/api/sessions", {{"task", "write"}, {"id", "h1"}}).status == 200);
  BOOST_TEST(reaches("h1", "waiting"));
  port = second_port;
  BOOST_TEST(reaches("h1", "waiting"));
  BOOST_TEST(wait_for([&] { return get("/api/approvals?session=h1").j["data"].size() == 1u; }));
  BOOST_TEST(get("/api/approvals").j["data"][0]["tool"] == "write_file");
  BOOST_TEST(get("/api/approvals?session=nope").status == 404);
  kill_server(SIGTERM);
  server = first;
  port = first_port;
}

BOOST_AUTO_TEST_SUITE_END()
