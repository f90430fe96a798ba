// `carapace serve` run as a user would, in its own process, on 127.0.0.1:
// the JSON API against what `trace show` says, bad requests of every kind
// answered with a clear error while the server stays up, the token, and the
// WebSocket: a session started (by another process) while a client is
// connected appears and updates live, with its retry countdown, its spans
// for a watcher, and a crash when its writer is killed.
#define BOOST_TEST_MODULE serve_test
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/support/temp_dir.h"
#include "tests/support/ws_client.h"
#include "tools/serve/web_access.h"

using namespace carapace;
using carapace::testing::WsClient;
using nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool wait_for(const std::function<bool()>& done, int seconds = 30) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct Reply {
  int status = 0;
  std::string body;
  json j;
  std::string header(const std::string& name) const { return headers.count(name) ? headers.at(name) : ""; }
  std::map<std::string, std::string> headers;
};

struct Fixture {
  testing::TempDir dir;
  std::string ws = dir.sub("ws");
  std::string scenarios = std::string(PROJECT_DIR) + "/examples/scenarios/";
  pid_t server = 0;
  uint16_t port = 0;

  Fixture() { std::filesystem::create_directories(ws); }
  ~Fixture() { stop_server(); }

  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(dir.sub(name)) << text;
    return dir.sub(name);
  }

  int run(const std::string& args, std::string* out = nullptr, const std::string& env = "") {
    std::string log = dir.sub("run.out");
    std::string cmd = env + " " + std::string(CARAPACE_BIN) + " --home '" + dir.sub("home") + "' " + args + " >'" + log +
                      "' 2>&1 </dev/null";
    int status = std::system(cmd.c_str());
    if (out) *out = slurp(log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // `carapace ARGS` in the background; its pid.
  pid_t spawn(const std::string& args, const std::string& log, const std::string& env = "") {
    std::string pidfile = dir.sub("pid");
    std::string cmd = env + " " + std::string(CARAPACE_BIN) + " --home '" + dir.sub("home") + "' " + args + " >'" +
                      log + "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
    BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
    return static_cast<pid_t>(std::stol(slurp(pidfile)));
  }

  static bool gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

  // Starts `carapace serve --port 0` and reads its port from the line it prints.
  void start_server(const std::string& env = "") {
    std::string log = dir.sub("serve.out");
    std::filesystem::remove(log);  // a restart must not read the port of the server before it
    server = spawn("serve --port 0 --interval-ms 50", log, env);
    BOOST_REQUIRE_MESSAGE(wait_for([&] { return contains(slurp(log), "listening on"); }), slurp(log));
    std::string text = slurp(log);
    size_t at = text.find("127.0.0.1:");
    BOOST_REQUIRE(at != std::string::npos);
    port = static_cast<uint16_t>(std::stoi(text.substr(at + 10)));
  }

  void stop_server() {
    if (server == 0) return;
    ::kill(server, SIGTERM);
    wait_for([&] { return gone(server); }, 10);
    server = 0;
  }

  // One HTTP request; headers as "Name: value" lines.
  Reply request(const std::string& method, const std::string& target, const std::vector<std::string>& headers = {},
                const std::string& body = "") {
    std::string raw = method + " " + target + " HTTP/1.1\r\n";
    bool host = false;
    for (const auto& h : headers) host = host || h.rfind("Host:", 0) == 0;
    if (!host) raw += "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
    for (const auto& h : headers) raw += h + "\r\n";
    if (!body.empty()) raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    raw += "Connection: close\r\n\r\n" + body;
    return raw_request(raw);
  }

  // Bytes written as they are; the answer parsed.
  Reply raw_request(const std::string& raw) {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    beast::error_code ec;
    asio::write(socket, asio::buffer(raw), ec);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(socket, buffer, parser, ec);
    Reply r;
    if (ec) return r;
    auto res = parser.release();
    r.status = static_cast<int>(res.result_int());
    r.body = res.body();
    for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
    r.j = json::parse(r.body, nullptr, false);
    return r;
  }

  Reply get(const std::string& target) { return request("GET", target); }
};

const json* span_named(const json& spans, const std::string& name) {
  for (const auto& s : spans) {
    if (s["name"] == name) return &s;
  }
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(web_access)

BOOST_AUTO_TEST_CASE(loopback_host_or_token) {
  web::AccessPolicy open{.token = "", .port = 8080};
  using web::Access;
  BOOST_TEST((web::check_access(open, {.host = "127.0.0.1:8080"}) == Access::kAllowed));
  BOOST_TEST((web::check_access(open, {.host = "localhost:8080"}) == Access::kAllowed));
  BOOST_TEST((web::check_access(open, {.host = "[::1]:8080"}) == Access::kAllowed));
  BOOST_TEST((web::check_access(open, {.host = "127.0.0.1:8081"}) == Access::kBadHost));
  BOOST_TEST((web::check_access(open, {.host = "attacker.example:8080"}) == Access::kBadHost));
  BOOST_TEST((web::check_access(open, {.host = ""}) == Access::kBadHost));
  web::AccessPolicy locked{.token = "s3cr3t-token-0123456789", .port = 8080};
  BOOST_TEST((web::check_access(locked, {.host = "10.0.0.2:8080"}) == Access::kNoToken));
  BOOST_TEST((web::check_access(locked, {.host = "x", .authorization = "Bearer s3cr3t-token-0123456789"}) ==
              Access::kAllowed));
  BOOST_TEST((web::check_access(locked, {.host = "x", .authorization = "Bearer s3cr3t-token-012345678"}) ==
              Access::kBadToken));
  BOOST_TEST((web::check_access(locked, {.host = "x", .cookie = "a=b; carapace_token=s3cr3t-token-0123456789"}) ==
              Access::kAllowed));
  BOOST_TEST((web::check_access(locked, {.host = "x", .query_token = "s3cr3t-token-0123456789"}) == Access::kAllowed));
  BOOST_TEST((web::check_access(locked, {.host = "x", .query_token = "wrong"}) == Access::kBadToken));
  BOOST_TEST(web::is_loopback("127.0.0.1"));
  BOOST_TEST(web::is_loopback("127.1.2.3"));
  BOOST_TEST(web::is_loopback("::1"));
  BOOST_TEST(!web::is_loopback("0.0.0.0"));
  BOOST_TEST(!web::is_loopback("192.168.1.4"));
  BOOST_TEST(web::origin_allowed("", "127.0.0.1:80"));
  BOOST_TEST(web::origin_allowed("http://127.0.0.1:80", "127.0.0.1:80"));
  BOOST_TEST(!web::origin_allowed("http://attacker.example", "127.0.0.1:80"));
  std::string d;
  BOOST_TEST((web::percent_decode("%41b%2F", &d) && d == "Ab/"));
  BOOST_TEST(!web::percent_decode("a%4", &d));
  BOOST_TEST(!web::percent_decode("a%zz", &d));
  BOOST_TEST((web::percent_decode("a+b", &d, true) && d == "a b"));
  BOOST_TEST((web::percent_decode("a+b", &d) && d == "a+b"));
  BOOST_TEST(web::query_value("x=1&token=a%2Bb", "token") == "a+b");
  BOOST_TEST(web::cookie_value("a=1; carapace_token=xyz", "carapace_token") == "xyz");
  std::string t = web::random_token();
  BOOST_TEST(t.size() == 43u);
  BOOST_TEST(t != web::random_token());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(serve, Fixture)

BOOST_AUTO_TEST_CASE(the_api_answers_as_trace_show_does_and_bad_requests_get_clear_errors) {
  BOOST_REQUIRE(run("run 'Write a note' --scenario " + scenarios + "quickstart.json --workspace " + ws +
                    " --session q") == 0);
  std::string shown;
  BOOST_REQUIRE(run("trace show q --json", &shown) == 0);
  json trace = json::parse(shown);
  start_server();

  Reply list = get("/api/sessions");
  BOOST_TEST(list.status == 200);
  BOOST_REQUIRE(list.j["data"].size() == 1u);
  const json& row = list.j["data"][0];
  BOOST_TEST(row["id"] == "q");
  BOOST_TEST(row["status"] == "completed");
  BOOST_TEST(row["turns"] == 3);
  BOOST_TEST(row["tokens_in"] == trace["data"]["spans"][0]["attrs"]["tokens_in"]);
  BOOST_TEST(row["cost_usd"].get<double>() > 0);
  BOOST_TEST(row["retries"] == 1);

  Reply session = get("/api/sessions/q");
  BOOST_TEST(session.status == 200);
  BOOST_TEST(session.j["data"]["spans"] == trace["data"]["spans"]);
  const json* tool = span_named(session.j["data"]["spans"], "tool write_file");
  BOOST_REQUIRE(tool != nullptr);
  Reply span = get("/api/sessions/q/spans/" + (*tool)["span_id"].get<std::string>());
  BOOST_TEST(span.status == 200);
  BOOST_TEST(span.j["data"]["span"] == *tool);
  BOOST_TEST(contains(span.j["data"]["content"]["arguments"].dump(), "Carapace was here."), span.body);

  // The page and its files, under a policy that lets nothing else in.
  Reply page = get("/");
  BOOST_TEST(page.status == 200);
  BOOST_TEST(contains(page.header("Content-Type"), "text/html"));
  BOOST_TEST(contains(page.header("Content-Security-Policy"), "default-src 'none'"));
  BOOST_TEST(get("/app.js").status == 200);

  // Bad requests: each named, none taking the server down.
  auto error_of = [](const Reply& r) { return r.j.value("error", std::string()); };
  Reply r = get("/api/sessions/nope");
  BOOST_TEST(r.status == 404);
  BOOST_TEST(contains(error_of(r), "no session 'nope'"));
  r = get("/api/sessions/..%2F..%2Fetc");
  BOOST_TEST(r.status == 400);
  BOOST_TEST(contains(error_of(r), "bad session id"));
  r = get("/api/sessions/q%zz");
  BOOST_TEST(r.status == 400);
  r = get("/api/sessions/q/spans/zz");
  BOOST_TEST(r.status == 400);
  BOOST_TEST(contains(error_of(r), "bad span id 'zz'"));
  r = get("/api/sessions/q/spans/0123456789abcdef");
  BOOST_TEST(r.status == 404);
  BOOST_TEST(contains(error_of(r), "no span 0123456789abcdef in session q"));
  r = get("/api/nothing");
  BOOST_TEST(r.status == 404);
  r = get("/etc/passwd");
  BOOST_TEST(r.status == 404);
  r = request("POST", "/api/sessions", {}, "{}");
  BOOST_TEST(r.status == 405);
  BOOST_TEST(r.header("Allow") == "GET, HEAD");
  r = request("GET", "/api/sessions", {}, std::string(5000, 'x'));
  BOOST_TEST(r.status == 413);
  r = request("GET", "/api/sessions", {"X-Big: " + std::string(10000, 'y')});
  BOOST_TEST(r.status == 431);
  r = raw_request("\x16\x03\x01\x02\x00garbage that is not HTTP\r\n\r\n");
  BOOST_TEST(r.status == 400);
  r = request("GET", "/api/sessions", {"Host: attacker.example:" + std::to_string(port)});
  BOOST_TEST(r.status == 403);
  BOOST_TEST(contains(error_of(r), "loopback Host"));
  r = get("/ws");
  BOOST_TEST(r.status == 400);
  BOOST_TEST(get("/api/sessions").status == 200);  // still up
}

BOOST_AUTO_TEST_CASE(a_session_started_while_a_client_is_connected_appears_live_with_its_retry_and_crash) {
  BOOST_REQUIRE(run("log synth --session warm --turns 1") == 0);
  start_server();
  WsClient client(port);
  json hello;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "hello"; }, &hello));
  BOOST_TEST(hello["sessions"].size() == 1u);

  // A run that rides out a rate limit, in another process, beside the server.
  std::string retrying = file("retry.json", R"({"replies": [
    {"text": "Looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}], "latency_ms": 300},
    {"error": {"status": 429, "retry_after_ms": 1500, "message": "rate limited, slow down"}},
    {"text": "Done.", "latency_ms": 300}
  ]})");
  pid_t writer = spawn("run go --scenario " + retrying + " --workspace " + ws + " --session live", dir.sub("live.out"));
  json row;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "session" && m["session"]["id"] == "live"; }, &row));
  client.send(R"({"type":"watch","session":"live"})");
  json status;
  BOOST_REQUIRE_MESSAGE(client.wait([](const json& m) { return m["type"] == "status" && m["session"] == "live"; },
                                    &status),
                        slurp(dir.sub("live.out")));
  BOOST_TEST(contains(status["message"].get<std::string>(), "retrying in 1.5 s"), status.dump());
  BOOST_TEST(contains(status["message"].get<std::string>(), "HTTP 429 rate limited, slow down"));
  BOOST_TEST(status["retry_at_us"].get<int64_t>() > 0);
  BOOST_TEST(status["reason"] == "attempt 1 failed: HTTP 429 rate limited, slow down");
  json retrying_row;
  BOOST_TEST(client.wait(
      [](const json& m) { return m["type"] == "session" && m["session"]["id"] == "live" && m["session"]["live"].is_object() &&
                                 m["session"]["live"]["retry_at_us"].get<int64_t>() > 0; },
      &retrying_row));
  json reset;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "spans" && m["reset"] == true; }, &reset));
  BOOST_TEST(reset["session"] == "live");
  json done;
  BOOST_REQUIRE(client.wait(
      [](const json& m) { return m["type"] == "session" && m["session"]["id"] == "live" && m["session"]["status"] == "completed"; },
      &done));
  BOOST_TEST(done["session"]["retries"] == 1);
  BOOST_TEST(done["session"]["live"].is_null());
  BOOST_REQUIRE(wait_for([&] { return gone(writer); }));
  BOOST_TEST(contains(slurp(dir.sub("live.out")), "Done."));  // the run was not held up by the server
  // The watcher got the spans as they changed: at the end, the closed session span.
  BOOST_TEST(client.wait([](const json& m) {
    if (m["type"] != "spans" || m["session"] != "live" || m["reset"] == true) return false;
    for (const auto& s : m["spans"]) {
      if (s["kind"] == "session" && s["close_seq"].get<uint64_t>() > 0) return true;
    }
    return false;
  }));
  std::string shown;
  BOOST_REQUIRE(run("trace show live --json", &shown) == 0);
  Reply trace = get("/api/sessions/live");
  BOOST_TEST(trace.j["data"]["spans"] == json::parse(shown)["data"]["spans"]);

  // A run killed mid-way: reported crashed once its process is gone.
  std::string slow = file("slow.json", R"({"replies": [
    {"text": "Waiting.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 60"}}]},
    {"text": "Done."}
  ]})");
  writer = spawn("run go --scenario " + slow + " --workspace " + ws + " --session doomed", dir.sub("doomed.out"));
  BOOST_REQUIRE(client.wait([](const json& m) {
    return m["type"] == "session" && m["session"]["id"] == "doomed" && m["session"]["live"].is_object() &&
           contains(m["session"]["live"]["message"].get<std::string>(), "running tool shell");
  }));
  size_t before = client.count();
  ::kill(writer, SIGKILL);
  json crashed;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error" && m["session"] == "doomed"; }, &crashed,
                            before));
  BOOST_TEST(contains(crashed["message"].get<std::string>(), "crashed after seq"), crashed.dump());
  BOOST_TEST(client.wait(
      [](const json& m) { return m["type"] == "session" && m["session"]["id"] == "doomed" && m["session"]["status"] == "crashed"; },
      nullptr, before));
  // A new client sees it crashed too.
  WsClient late(port);
  json late_hello;
  BOOST_REQUIRE(late.wait([](const json& m) { return m["type"] == "hello"; }, &late_hello));
  bool found = false;
  for (const auto& s : late_hello["sessions"]) found = found || (s["id"] == "doomed" && s["status"] == "crashed");
  BOOST_TEST(found, late_hello.dump());
}

BOOST_AUTO_TEST_CASE(a_session_running_when_the_server_starts_is_not_called_crashed) {
  std::string slow = file("slow.json", R"({"replies": [
    {"text": "Waiting.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 60"}}]},
    {"text": "Done."}
  ]})");
  pid_t writer = spawn("run go --scenario " + slow + " --workspace " + ws + " --session busy", dir.sub("busy.out"));
  BOOST_REQUIRE(wait_for([&] {
    std::string out;
    run("log show busy", &out);
    return contains(out, "tool.requested");
  }));
  start_server();
  WsClient client(port);
  json hello;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "hello"; }, &hello));
  BOOST_REQUIRE(hello["sessions"].size() == 1u);
  BOOST_TEST(hello["sessions"][0]["status"] == "running");
  // Polls go by (every 50 ms): still running, no crash reported.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  BOOST_TEST(!client.wait([](const json& m) { return m["type"] == "error"; }, nullptr, 0, 0));
  // Its writer killed: now it is.
  ::kill(writer, SIGKILL);
  json crashed;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error" && m["session"] == "busy"; }, &crashed));
  BOOST_TEST(contains(crashed.value("message", ""), "crashed after seq"));
}

// A run stopped by SIGTERM records session.stopped: shown stopped, never
// crashed, to a client watching it and to a server started afterwards.
BOOST_AUTO_TEST_CASE(a_run_stopped_by_sigterm_is_shown_stopped_not_crashed) {
  std::string slow = file("slow.json", R"({"replies": [
    {"text": "Waiting.", "tool_calls": [{"name": "shell", "args": {"command": "sleep 60"}}]},
    {"text": "Done."}
  ]})");
  start_server();
  WsClient client(port);
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "hello"; }));
  pid_t writer = spawn("run go --scenario " + slow + " --workspace " + ws + " --session halted", dir.sub("halted.out"));
  BOOST_REQUIRE(client.wait([](const json& m) {
    return m["type"] == "session" && m["session"]["id"] == "halted" && m["session"]["live"].is_object() &&
           contains(m["session"]["live"]["message"].get<std::string>(), "running tool shell");
  }));
  size_t before = client.count();
  ::kill(writer, SIGTERM);
  BOOST_REQUIRE(wait_for([&] { return gone(writer); }));
  json stopped;
  BOOST_REQUIRE(client.wait(
      [](const json& m) { return m["type"] == "session" && m["session"]["id"] == "halted" && m["session"]["status"] == "stopped"; },
      &stopped, before));
  BOOST_TEST(stopped["session"]["live"].is_null());
  // Polls go by (every 50 ms): no crash is reported.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  BOOST_TEST(!client.wait([](const json& m) { return m["type"] == "error"; }, nullptr, before, 0));
  BOOST_TEST(!client.wait([](const json& m) { return m["type"] == "session" && m["session"]["status"] == "crashed"; },
                          nullptr, before, 0));

  // A server started afterwards sees it stopped too, and calls nothing crashed.
  stop_server();
  start_server();
  WsClient fresh(port);
  json hello;
  BOOST_REQUIRE(fresh.wait([](const json& m) { return m["type"] == "hello"; }, &hello));
  BOOST_REQUIRE(hello["sessions"].size() == 1u);
  BOOST_TEST(hello["sessions"][0]["status"] == "stopped", hello.dump());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  BOOST_TEST(!fresh.wait([](const json& m) { return m["type"] == "error"; }, nullptr, 0, 0));
}

BOOST_AUTO_TEST_CASE(what_a_tool_printed_reaches_the_page_redacted) {
  // A key-shaped canary the redactor knows, printed by a tool the model calls.
  const std::string canary = "sk-proj-" + std::string("Zq7Yt2Lm9Xc4Vb8Nn1Kd6Hs3Jf5Gp0Ra") + "T8wE";
  std::string leaky = file("leak.json", json({{"replies", json::array({
      {{"text", "Printing."}, {"tool_calls", json::array({{{"name", "shell"}, {"args", {{"command", "echo " + canary}}}}})}},
      {{"text", "The key is " + canary}}})}}).dump());
  BOOST_REQUIRE(run("run go --scenario " + leaky + " --workspace " + ws + " --session leak") == 0);
  start_server();
  Reply session = get("/api/sessions/leak");
  BOOST_REQUIRE(session.status == 200);
  const json* tool = span_named(session.j["data"]["spans"], "tool shell");
  BOOST_REQUIRE(tool != nullptr);
  Reply span = get("/api/sessions/leak/spans/" + (*tool)["span_id"].get<std::string>());
  BOOST_REQUIRE(span.status == 200);
  BOOST_TEST(contains(span.j["data"]["content"].dump(), "redacted"), span.body);
  WsClient client(port);
  client.send(R"({"type":"watch","session":"leak"})");
  json reset;
  BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "spans"; }, &reset));
  for (const std::string& text : {session.body, span.body, reset.dump()}) {
    BOOST_TEST(!contains(text, canary));
    BOOST_TEST(!contains(text, canary.substr(8, 20)));
  }
}

BOOST_AUTO_TEST_CASE(bad_websocket_messages_get_errors_and_never_take_the_server_down) {
  BOOST_REQUIRE(run("log synth --session warm --turns 1") == 0);
  start_server();
  {
    WsClient client(port);
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "hello"; }));
    client.send("this is not json");
    json e;
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error"; }, &e));
    BOOST_TEST(contains(e["message"].get<std::string>(), "not a JSON object"));
    size_t n = client.count();
    client.send(R"({"type":"watch","session":"../../x"})");
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error"; }, &e, n));
    BOOST_TEST(contains(e["message"].get<std::string>(), "bad session id"));
    n = client.count();
    client.send(R"({"type":"watch","session":"nope"})");
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error"; }, &e, n));
    BOOST_TEST(contains(e["message"].get<std::string>(), "cannot watch session 'nope'"));
    n = client.count();
    client.send(R"({"type":"explode"})");
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error"; }, &e, n));
    BOOST_TEST(contains(e["message"].get<std::string>(), "unknown message type 'explode'"));
    n = client.count();
    client.send("\x01\x02", true);
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "error"; }, &e, n));
    BOOST_TEST(contains(e["message"].get<std::string>(), "binary messages"));
    n = client.count();
    client.send(R"({"type":"watch","session":"warm"})");
    BOOST_TEST(client.wait([](const json& m) { return m["type"] == "spans" && m["session"] == "warm"; }, nullptr, n));
    // Over 64 KiB: this client is closed with 1009 (message too big).
    client.send(std::string(100 * 1024, 'x'));
    BOOST_REQUIRE(wait_for([&] { return client.closed(); }));
    BOOST_TEST(client.close_code() == 1009u);
  }
  // A frame that breaks the protocol (unmasked, from a client): that connection closes.
  {
    std::string upgrade = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                          "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n";
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    asio::write(socket, asio::buffer(upgrade));
    beast::flat_buffer buffer;
    http::response_parser<http::empty_body> res;
    http::read_header(socket, buffer, res);
    BOOST_TEST(res.get().result_int() == 101u);
    asio::write(socket, asio::buffer(std::string("\x81\x05hello", 7)));  // text, not masked
    beast::error_code ec;
    std::array<char, 4096> scratch;
    for (int i = 0; i < 20 && !ec; ++i) socket.read_some(asio::buffer(scratch), ec);
    BOOST_TEST(bool(ec));  // closed by the server
  }
  // Another origin's page may not open the socket.
  BOOST_CHECK_THROW(WsClient(port, "http://attacker.example"), boost::system::system_error);
  WsClient after(port);
  BOOST_TEST(after.wait([](const json& m) { return m["type"] == "hello"; }));
  BOOST_TEST(get("/api/sessions").status == 200);
}

BOOST_AUTO_TEST_CASE(with_a_token_every_request_needs_it) {
  BOOST_REQUIRE(run("log synth --session warm --turns 1") == 0);
  const std::string token = "a-token-for-this-test-0123456789";
  start_server("CARAPACE_SERVE_TOKEN=" + token);
  BOOST_TEST(!contains(slurp(dir.sub("serve.out")), token));  // a token from the environment is not printed
  Reply r = get("/api/sessions");
  BOOST_TEST(r.status == 401);
  BOOST_TEST(contains(r.j.value("error", ""), "needs its token"));
  BOOST_TEST(request("GET", "/api/sessions", {"Authorization: Bearer wrong-token"}).status == 401);
  BOOST_TEST(request("GET", "/api/sessions", {"Authorization: Bearer " + token}).status == 200);
  // Opened with ?token=: a cookie, and the token out of the address bar.
  r = get("/?token=" + token);
  BOOST_TEST(r.status == 303);
  BOOST_TEST(r.header("Location") == "/");
  BOOST_TEST(contains(r.header("Set-Cookie"), "carapace_token=" + token));
  BOOST_TEST(contains(r.header("Set-Cookie"), "HttpOnly"));
  BOOST_TEST(request("GET", "/api/sessions", {"Cookie: carapace_token=" + token}).status == 200);
  BOOST_CHECK_THROW(WsClient{port}, boost::system::system_error);
  stop_server();
  std::string out;
  BOOST_TEST(run("serve --bind not-an-address --port 0", &out) != 0);
  BOOST_TEST(contains(out, "--bind not-an-address is not an IP address"), out);
  BOOST_TEST(run("serve --port 0", &out, "CARAPACE_SERVE_TOKEN=short") != 0);
}

// One read of up to `size` bytes that gives up after `seconds`: the bytes
// read, 0 at the end of the stream, -1 on a time-out or an error. (Asio's
// own blocking reads wait on, whatever SO_RCVTIMEO says.)
ssize_t read_within(tcp::socket& socket, char* data, size_t size, int seconds) {
  timeval tv{.tv_sec = seconds, .tv_usec = 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return ::recv(socket.native_handle(), data, size, 0);
}

// A text frame from a client (masked, as RFC 6455 requires).
std::string client_frame(const std::string& payload) {
  std::string f(1, '\x81');
  if (payload.size() < 126) {
    f += static_cast<char>(0x80 | payload.size());
  } else {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>((payload.size() >> 8) & 0xff);
    f += static_cast<char>(payload.size() & 0xff);
  }
  const char mask[4] = {0x12, 0x34, 0x56, 0x78};
  f.append(mask, 4);
  for (size_t i = 0; i < payload.size(); ++i) f += static_cast<char>(payload[i] ^ mask[i % 4]);
  return f;
}

BOOST_AUTO_TEST_CASE(a_client_that_never_reads_is_dropped_and_idle_or_surplus_connections_are_closed) {
  BOOST_REQUIRE(run("log synth --session big --turns 1000") == 0);
  start_server();
  asio::io_context io;
  // A WebSocket client that asks for a 1,000-turn trace 200 times and reads nothing.
  tcp::socket greedy(io);
  greedy.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(greedy, asio::buffer("GET /ws HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                                   "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  {
    // The server's handshake first (a client may send no frame before it).
    beast::flat_buffer buffer;
    http::response_parser<http::empty_body> res;
    http::read_header(greedy, buffer, res);
    BOOST_REQUIRE(res.get().result_int() == 101u);
  }
  std::string watches;
  for (int i = 0; i < 200; ++i) watches += client_frame(R"({"type":"watch","session":"big"})");
  asio::write(greedy, asio::buffer(watches));
  // Meanwhile the others are served.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  {
    WsClient other(port);
    BOOST_TEST(other.wait([](const json& m) { return m["type"] == "hello"; }));
  }
  BOOST_TEST(get("/api/sessions").status == 200);
  // Dropped once 16 MiB were queued for it: what it can still read is far
  // less than the 200 traces it asked for.
  size_t trace_bytes = get("/api/sessions/big").body.size();
  BOOST_REQUIRE(trace_bytes > 1'000'000);
  size_t got = 0;
  std::vector<char> scratch(1 << 16);
  ssize_t n = 0;
  while ((n = read_within(greedy, scratch.data(), scratch.size(), 10)) > 0) got += static_cast<size_t>(n);
  BOOST_TEST(n == 0, "the server did not close it: " << got << " bytes, then " << n << " errno " << errno);
  BOOST_TEST(got < 40u * 1024 * 1024, got << " bytes before the end, of " << 200 * trace_bytes << " asked for");

  // 64 connections at most: one more is closed at once.
  std::vector<std::unique_ptr<tcp::socket>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<tcp::socket>(io));
    idle.back()->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Reply refused = get("/api/sessions");
  BOOST_TEST(refused.status == 0);  // closed without an answer
  // Idle ones are closed after 30 s; then the server answers again.
  std::this_thread::sleep_for(std::chrono::seconds(31));
  char byte;
  BOOST_TEST(read_within(*idle[0], &byte, 1, 5) == 0);  // closed by the server
  BOOST_TEST(get("/api/sessions").status == 200);
}

BOOST_AUTO_TEST_SUITE_END()
