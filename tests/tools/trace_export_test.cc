// `carapace trace export` run as a user would: every format of a shipped
// scenario's run, Perfetto's trace-event rules on each scenario, the errors,
// a secret that must not leave in any format, and --endpoint against OTLP
// receivers on 127.0.0.1 (one that answers 503 then 200, one that refuses
// with 400, one that is not there).
#define BOOST_TEST_MODULE trace_export_test
#include <sys/wait.h>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>
#include <fstream>
#include <sstream>

#include "tests/support/fake_model.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/cli_home.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_events_check.h"

using namespace carapace;
using nlohmann::json;

namespace {

using testing::contains;
using testing::slurp;
using Result = testing::CliResult;

bool have_node() {
  return std::system("command -v node >/dev/null 2>&1") == 0 &&
         std::filesystem::exists(std::string(PROJECT_DIR) +
                                 "/tests/node/node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js");
}

struct Fixture : testing::CliHome {
  std::string ws = dir.sub("ws");
  std::string scenarios = std::string(PROJECT_DIR) + "/examples/scenarios/";

  Fixture() { std::filesystem::create_directories(ws); }

  void run_scenario(const std::string& name, const std::string& session) {
    std::filesystem::create_directories(ws + "/" + session);
    Result r = run("run 'Do the task' --scenario " + scenarios + name + ".json --workspace " + ws + "/" + session +
                   " --session " + session);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  }

  size_t span_count(const std::string& session) {
    return json::parse(run("trace show " + session + " --json").out)["data"]["spans"].size();
  }
};

std::string problems_of(const json& doc) {
  std::string all;
  for (const auto& p : testing::trace_event_problems(doc)) all += p + "\n";
  return all;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(trace_export, Fixture)

BOOST_AUTO_TEST_CASE(every_format_of_a_run) {
  run_scenario("quickstart", "q");
  const size_t spans = span_count("q");
  BOOST_TEST(spans == 11u);
  // OTLP: one span per span, GenAI names.
  Result otlp = run("trace export q --format otlp");
  BOOST_TEST(otlp.code == 0, otlp.err);
  json req = json::parse(otlp.out);
  const json& out = req["resourceSpans"][0]["scopeSpans"][0]["spans"];
  BOOST_TEST(out.size() == spans);
  BOOST_TEST(out[0]["name"] == "invoke_agent carapace");
  BOOST_TEST(out[2]["name"] == "chat scripted-1");
  BOOST_TEST(out[3]["name"] == "execute_tool list_dir");
  // Perfetto: the format's rules.
  Result perfetto = run("trace export q --format perfetto");
  BOOST_TEST(perfetto.code == 0, perfetto.err);
  json doc = json::parse(perfetto.out);
  BOOST_TEST(problems_of(doc).empty(), problems_of(doc));
  // JSON, NDJSON: every span.
  BOOST_TEST(json::parse(run("trace export q --format json").out).size() == spans);
  std::string nd = run("trace export q -f ndjson").out;
  BOOST_TEST(static_cast<size_t>(std::count(nd.begin(), nd.end(), '\n')) == spans);
  // Markdown: a row per span.
  std::string md = run("trace export q --format md").out;
  BOOST_TEST(contains(md, "### Session q"), md);
  BOOST_TEST(contains(md, "| 14 | · · llm attempt 1 | **error** |"), md);
  // HTML to a file, with --json's envelope.
  Result html = run("trace export q --format html -o " + dir.sub("q.html") + " --json");
  BOOST_TEST(html.code == 0, html.err);
  json envelope = json::parse(html.out);
  BOOST_TEST(envelope["success"] == true);
  BOOST_TEST(envelope["data"]["spans"] == spans);
  BOOST_TEST(envelope["data"]["format"] == "html");
  std::string page = slurp(dir.sub("q.html"));
  BOOST_TEST(page.rfind("<!DOCTYPE html>", 0) == 0u);
  BOOST_TEST(envelope["data"]["bytes"] == page.size());
  // --since: every session in the window.
  run_scenario("embed", "e");
  json both = json::parse(run("trace export --since 1h --format json").out);
  BOOST_TEST(both.size() == spans + span_count("e"));
  json two = json::parse(run("trace export --since 1h --format perfetto").out);
  BOOST_TEST(problems_of(two).empty(), problems_of(two));
}

BOOST_AUTO_TEST_CASE(perfetto_rules_hold_for_every_shipped_scenario) {
  for (const char* name : {"quickstart", "demo", "embed", "torture"}) {
    run_scenario(name, name);
    Result r = run(std::string("trace export ") + name + " --format perfetto");
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
    json doc = json::parse(r.out);
    BOOST_TEST(problems_of(doc).empty(), name << ":\n" << problems_of(doc));
    size_t complete = 0, flows = 0, retries = 0;
    for (const auto& e : doc["traceEvents"]) {
      complete += e["ph"] == "X";
      flows += e["ph"] == "s";
      retries += e["ph"] == "i" && e["name"] == "retry";
    }
    BOOST_TEST(complete == span_count(name), name);
    BOOST_TEST(flows > 0u, name);
    if (std::string(name) != "embed") BOOST_TEST(retries > 0u, name);
  }
}

BOOST_AUTO_TEST_CASE(bad_input_gets_a_clear_error) {
  run_scenario("quickstart", "q");
  Result r = run("trace export q --format yaml");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "yaml"), r.err);
  r = run("trace export nope --format otlp");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "no session 'nope'"), r.err);
  r = run("trace export q --format otlp -o " + dir.sub("no/such/dir/out.json"));
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "cannot write"), r.err);
  BOOST_TEST(contains(r.err, "No such file or directory"), r.err);
  r = run("trace export q --format md --endpoint http://127.0.0.1:9");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "--endpoint sends OTLP: it needs --format otlp"), r.err);
  r = run("trace export q --format otlp --endpoint ftp://example.org");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "is not an http:// or https:// URL"), r.err);
  r = run("trace export --format otlp");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "give a session id or --since"), r.err);
  r = run("trace export q --format otlp --json");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(json::parse(r.out)["success"] == false);
  r = run("trace export --since 1x --format otlp");
  BOOST_TEST(contains(r.err, "--since '1x' is not a duration"), r.err);
  BOOST_TEST(run("trace export --help").code == 0);
  BOOST_TEST(contains(run("trace export --help").out, "--with-content"));
}

BOOST_AUTO_TEST_CASE(a_secret_in_a_tool_output_leaves_in_no_format) {
  // A key-shaped canary the redactor knows, printed by a tool the model calls.
  const std::string canary = "sk-proj-" + std::string("Zq7Yt2Lm9Xc4Vb8Nn1Kd6Hs3Jf5Gp0Ra") + "T8wE";
  std::string scenario = file("leak.json", json({{"replies", json::array({
      {{"text", "Printing."}, {"tool_calls", json::array({{{"name", "shell"}, {"args", {{"command", "echo " + canary}}}}})}},
      {{"text", "The key is " + canary}}})}}).dump());
  Result r = run("run 'Print it' --scenario " + scenario + " --workspace " + ws + " --session leak");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const char* format : {"otlp", "perfetto", "html", "md", "json", "ndjson"}) {
    for (const char* content : {"", " --with-content"}) {
      Result e = run(std::string("trace export leak --format ") + format + content);
      BOOST_TEST(e.code == 0, e.err);
      BOOST_TEST(!contains(e.out, canary), format << content);
      BOOST_TEST(!contains(e.out, canary.substr(8, 20)), format << content);
    }
  }
  // With content, what the tool printed is there, masked.
  json j = json::parse(run("trace export leak --format json --with-content").out);
  bool masked = false;
  for (const auto& s : j) {
    if (s.contains("content") && s["content"].contains("result")) masked = contains(s["content"]["result"], "redacted");
  }
  BOOST_TEST(masked);
}

BOOST_AUTO_TEST_CASE(endpoint_retries_a_503_then_lands) {
  run_scenario("quickstart", "q");
  testing::MockLlmServer receiver;
  receiver.push({.status = 503, .headers = {"Retry-After: 1"}, .body = "busy"});
  receiver.push({.status = 200, .headers = {"Content-Type: application/json"}, .body = "{}"});
  auto t0 = std::chrono::steady_clock::now();
  Result r = run("trace export q --format otlp --endpoint " + receiver.url());
  auto waited = std::chrono::steady_clock::now() - t0;
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(contains(r.err, "answered HTTP 503: busy; attempt 2 in 1000 ms"), r.err);
  BOOST_TEST(contains(r.out, "sent 11 spans of 1 session as otlp to " + receiver.url() + "/v1/traces (HTTP 200, 2 attempts)"), r.out);
  BOOST_TEST(waited >= std::chrono::milliseconds(950));  // Retry-After honoured
  auto requests = receiver.requests();
  BOOST_REQUIRE(requests.size() == 2u);
  for (const auto& q : requests) {
    BOOST_TEST(q.path == "/v1/traces");
    BOOST_TEST(q.header("Content-Type") == "application/json");
    BOOST_TEST(contains(q.head, "POST /v1/traces HTTP/1.1"));
  }
  // Retry-After as an HTTP date: the wait until then.
  {
    char date[64];
    time_t when = std::time(nullptr) + 3;
    std::tm tm{};
    gmtime_r(&when, &tm);
    std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    receiver.push({.status = 503, .headers = {std::string("Retry-After: ") + date}, .body = "busy"});
    receiver.push({.status = 200, .headers = {"Content-Type: application/json"}, .body = "{}"});
    Result dated = run("trace export q --format otlp --endpoint " + receiver.url());
    BOOST_TEST(dated.code == 0, dated.err);
    size_t at = dated.err.find("attempt 2 in ");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, dated.err);
    long ms = std::stol(dated.err.substr(at + 13));
    BOOST_TEST(ms >= 1000);  // whole seconds until the date, one of them possibly gone by now
    BOOST_TEST(ms <= 3000);
  }
  json sent = json::parse(requests[1].body);
  BOOST_TEST(sent["resourceSpans"][0]["scopeSpans"][0]["spans"].size() == 11u);
  BOOST_TEST(requests[1].body == run("trace export q --format otlp").out);

  // A path of its own is kept; credentials in the URL never reach the output.
  receiver.push({.status = 200, .body = "{}"});
  std::string url = receiver.url();
  std::string with_user = "http://alice:hunter2-otlp-pass@" + url.substr(7) + "/otel/v1/traces?token=abc-secret-q";
  r = run("trace export q --format otlp --json --endpoint '" + with_user + "'");
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(receiver.requests().back().path == "/otel/v1/traces?token=abc-secret-q");
  BOOST_TEST(json::parse(r.out)["data"]["endpoint"] == url + "/otel/v1/traces");
  BOOST_TEST(!contains(r.out + r.err, "hunter2"));
  BOOST_TEST(!contains(r.out + r.err, "abc-secret-q"));
}

BOOST_AUTO_TEST_CASE(endpoint_refusals_are_clear_errors) {
  run_scenario("quickstart", "q");
  testing::MockLlmServer receiver;
  receiver.push({.status = 400, .body = R"({"code":3,"message":"invalid span id"})"});
  Result r = run("trace export q --format otlp --endpoint " + receiver.url() + "/");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "the OTLP receiver at " + receiver.url() +
                                 "/v1/traces refused the export with HTTP 400: {\"code\":3,\"message\":\"invalid span id\"}"),
             r.err);
  BOOST_TEST(receiver.request_count() == 1u);  // a 4xx is not retried
  json j = json::parse(run("trace export q --format otlp --json --endpoint " + receiver.url()).out);
  BOOST_TEST(j["success"] == false);  // nothing queued: the receiver answers 500, which is not retried
  // Nobody listening: retried, then an error naming what happened.
  int port = 0;
  {
    testing::MockLlmServer gone;
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  r = run("trace export q --format otlp --attempts 2 --endpoint http://127.0.0.1:" + std::to_string(port));
  BOOST_TEST(r.code == 1);
  BOOST_TEST(contains(r.err, "did not take the export after 2 attempts"), r.err);
  BOOST_TEST(contains(r.err, "; attempt 2 in 500 ms"), r.err);  // the first backoff
  // The collector: a batch it cannot send is a warning; it goes on, the spans are stored.
  BOOST_REQUIRE(run("log synth --session synth --turns 1").code == 0);
  r = run("collector --once --otlp-endpoint http://127.0.0.1:" + std::to_string(port));
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(contains(r.err, "not sent: the OTLP receiver at http://127.0.0.1:" + std::to_string(port) + "/v1/traces did not take"), r.err);
  BOOST_TEST(contains(r.out, "(" ), r.out);
  BOOST_TEST(json::parse(run("trace show synth --json").out)["data"]["source"] == "store");
}

BOOST_AUTO_TEST_CASE(an_http_run_exports_the_response_model_and_content) {
  testing::MockLlmServer server;
  server.set_handler(
      [](const testing::MockRequest& r, size_t) { return testing::FakeModel{.format = "openai"}.reply(r); });
  Result r = run("run 'remember apples' --provider openai --model gpt-4o-mini --session o --workspace " + ws +
                     " --base-url " + server.url() + "/v1",
                 "OPENAI_API_KEY=export-test-credential-0042");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  Result e = run("trace export o --format otlp --with-content -o " + dir.sub("o.json"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.err);
  std::string text = slurp(dir.sub("o.json"));
  BOOST_TEST(!contains(text, "export-test-credential-0042"));
  json req = json::parse(text);
  bool seen = false;
  for (const auto& s : req["resourceSpans"][0]["scopeSpans"][0]["spans"]) {
    if (s["name"] != "chat gpt-4o-mini") continue;
    std::map<std::string, json> a;
    for (const auto& kv : s["attributes"]) a[kv["key"]] = kv["value"];
    BOOST_TEST(a["gen_ai.provider.name"]["stringValue"] == "openai");
    BOOST_TEST(a["gen_ai.response.model"]["stringValue"] == "test-model");
    BOOST_TEST(a["gen_ai.response.id"]["stringValue"] == "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT");
    json input = json::parse(a["gen_ai.input.messages"]["stringValue"].get<std::string>());
    BOOST_TEST(contains(input.dump(), "remember apples"));
    seen = true;
  }
  BOOST_TEST(seen);
  if (!have_node()) {
    BOOST_TEST_MESSAGE("node or tests/node/node_modules missing: OpenTelemetry's check of this export skipped");
    return;
  }
  std::string cmd = "node '" + std::string(PROJECT_DIR) + "/tests/tools/otlp_check.js' '" + std::string(PROJECT_DIR) +
                    "/tests/node/node_modules' '" + dir.sub("o.json") + "' --content --response-model test-model >'" +
                    dir.sub("node.out") + "' 2>&1";
  int status = std::system(cmd.c_str());
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0, slurp(dir.sub("node.out")));
}

bool wait_for(const std::function<bool()>& done) {
  for (int i = 0; i < 600; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

BOOST_AUTO_TEST_CASE(the_collector_streams_spans_to_a_receiver_as_they_close) {
  testing::MockLlmServer receiver;
  receiver.set_handler([](const testing::MockRequest&, size_t) { return testing::MockReply{.status = 200, .body = "{}"}; });
  BOOST_REQUIRE(run("log synth --session warm --turns 1").code == 0);  // a home with a log
  std::string pidfile = dir.sub("pid");
  std::string cmd = std::string(CARAPACE_BIN) + " --home '" + dir.sub("home") + "' collector --interval-ms 20 --otlp-endpoint " +
                    receiver.url() + " >'" + dir.sub("collector.out") + "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
  BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
  const pid_t collector = static_cast<pid_t>(std::stol(slurp(pidfile)));
  auto received = [&receiver](const std::string& session) {
    std::map<std::string, std::string> spans;  // span id -> name
    for (const auto& q : receiver.requests()) {
      json j = json::parse(q.body, nullptr, false);
      if (j.is_discarded()) continue;
      for (const auto& s : j["resourceSpans"][0]["scopeSpans"][0]["spans"]) {
        std::map<std::string, json> a;
        for (const auto& kv : s["attributes"]) a[kv["key"]] = kv["value"];
        if (a["gen_ai.conversation.id"]["stringValue"] != session) continue;
        spans[s["spanId"]] = s["name"].get<std::string>();
        if (a.count("gen_ai.provider.name")) spans[s["spanId"]] += " from " + a["gen_ai.provider.name"]["stringValue"].get<std::string>();
      }
    }
    return spans;
  };
  BOOST_REQUIRE(wait_for([&] { return received("warm").size() > 0; }));
  run_scenario("quickstart", "q");  // the collector holds the store: the run goes without its own
  json show = json::parse(run("trace show q --json").out);
  std::map<std::string, std::string> expected;
  for (const auto& s : show["data"]["spans"]) expected[s["span_id"]] = s["name"];
  BOOST_TEST(wait_for([&] { return received("q").size() == expected.size(); }));
  auto got = received("q");
  for (const auto& [id, name] : expected) BOOST_TEST(got.count(id) == 1u, name);
  BOOST_TEST(got[show["data"]["spans"][0]["span_id"]] == "invoke_agent carapace from scripted");
  // Sent before its root closed, a model call still names the session's provider.
  BOOST_TEST(got[show["data"]["spans"][2]["span_id"]] == "chat scripted-1 from scripted");
  for (const auto& q : receiver.requests()) BOOST_TEST(q.path == "/v1/traces");
  ::kill(collector, SIGTERM);
  BOOST_TEST(wait_for([collector] { return ::kill(collector, 0) != 0 && errno == ESRCH; }));
  BOOST_TEST(contains(slurp(dir.sub("collector.out")), "spans to " + receiver.url()), slurp(dir.sub("collector.out")));
}

BOOST_AUTO_TEST_CASE(the_collector_streams_a_run_whose_own_collector_holds_the_store) {
  testing::MockLlmServer receiver;
  receiver.set_handler([](const testing::MockRequest&, size_t) { return testing::MockReply{.status = 200, .body = "{}"}; });
  std::string slow = dir.sub("slow.json");
  std::ofstream(slow) << R"({"replies": [
    {"text": "Looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}], "latency_ms": 1500},
    {"text": "Done.", "latency_ms": 500}
  ]})";
  std::string pidfile = dir.sub("pid");
  auto spawn = [&](const std::string& args, const std::string& out) {
    std::string cmd = std::string(CARAPACE_BIN) + " --home '" + dir.sub("home") + "' " + args + " >'" + out +
                      "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
    BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
    return static_cast<pid_t>(std::stol(slurp(pidfile)));
  };
  // The run first: its own collector holds the trace store.
  const pid_t writer = spawn("run go --scenario " + slow + " --workspace " + ws + " --session held", dir.sub("run.out"));
  BOOST_REQUIRE(wait_for([&] { return std::filesystem::exists(dir.sub("home/traces")) &&
                                      contains(run("log show held").out, "llm.requested"); }));
  const pid_t collector = spawn("collector --interval-ms 20 --otlp-endpoint " + receiver.url(), dir.sub("collector.out"));
  BOOST_REQUIRE(wait_for([&] { return contains(slurp(dir.sub("collector.out")), "streaming its spans"); }));
  BOOST_REQUIRE(wait_for([writer] { return ::kill(writer, 0) != 0 && errno == ESRCH; }));
  json show = json::parse(run("trace show held --json").out);
  BOOST_TEST(show["data"]["source"] == "store");  // written by the run's own collector
  std::set<std::string> expected;
  for (const auto& sp : show["data"]["spans"]) expected.insert(sp["span_id"].get<std::string>());
  auto received = [&receiver] {
    std::set<std::string> ids;
    for (const auto& q : receiver.requests()) {
      json j = json::parse(q.body, nullptr, false);
      if (j.is_discarded()) continue;
      for (const auto& sp : j["resourceSpans"][0]["scopeSpans"][0]["spans"]) ids.insert(sp["spanId"].get<std::string>());
    }
    return ids;
  };
  BOOST_TEST(wait_for([&] { return received() == expected; }), slurp(dir.sub("collector.out")));
  // The run gone, the collector writes the store: a session written now is there.
  BOOST_REQUIRE(run("log synth --session later --turns 1").code == 0);
  BOOST_TEST(wait_for([&] { return json::parse(run("trace show later --json").out)["data"]["source"] == "store"; }));
  ::kill(collector, SIGTERM);
  BOOST_TEST(wait_for([collector] { return ::kill(collector, 0) != 0 && errno == ESRCH; }));
}

BOOST_AUTO_TEST_SUITE_END()
