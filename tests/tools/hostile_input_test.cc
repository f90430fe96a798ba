// JSON nested past any stack, against the real binary: refused where it
// comes in (a scenario, a config, a fault plan, a model server's reply, an
// MCP server's message) with an error naming the bound, and shown as text,
// never crashing, by every reader of a log that already holds it — here a
// bundle forged with valid checkpoint hashes, replayed and imported. Before
// the bound, 100,000 to 400,000 levels killed `run`, `log show --json`,
// `replay`, `trace export --with-content` and `mcp list` (SIGSEGV).
// And terminal controls a server or a tool wrote are shown, never obeyed.
#define BOOST_TEST_MODULE hostile_input_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "replay/bundle.h"
#include "tests/support/cli_runner.h"
#include "tests/support/deep_json.h"
#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace carapace::testing;
using nlohmann::json;

namespace {

constexpr size_t kDeep = 400000;
const char* kBound = "JSON nested deeper than 128 levels";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Fixture {
  TempDir dir;
  std::string ws = dir.sub("ws");
  CliRunner cli{CARAPACE_BIN, dir.sub("home"), dir.path()};
  const std::string quickstart = std::string(PROJECT_DIR) + "/examples/scenarios/quickstart.json";

  Fixture() { std::filesystem::create_directories(ws); }

  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir.sub(name), std::ios::binary) << text;
    return dir.sub(name);
  }
};

// What a run says of `args`: refused with the bound named, or not crashed.
#define CHECK_REFUSED(r, what)                                                              \
  do {                                                                                      \
    BOOST_TEST((r).code == 1, what << ": exit " << (r).code << "\n" << (r).out << (r).err); \
    BOOST_TEST(contains((r).err, kBound), what << ": " << (r).err);                         \
  } while (0)

#define CHECK_NOT_CRASHED(r, what) \
  BOOST_TEST(!(r).crashed(), what << ": exit " << (r).code << "\n" << (r).err.substr(0, 2000))

}  // namespace

BOOST_FIXTURE_TEST_SUITE(deep_json, Fixture)

// A scenario, a config and a fault plan are read through the bound.
BOOST_AUTO_TEST_CASE(files_nested_past_the_bound_are_refused_at_start) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string scenario =
      write("deep-scenario.json",
            R"({"replies": [{"tool_calls": [{"name": "shell", "args": )" + nested_json(100000) + "}]}]}");
  CliResult r = cli.run("run go --scenario " + scenario + " --workspace " + ws);
  CHECK_REFUSED(r, "a scenario");
  BOOST_TEST(contains(r.err, scenario), r.err);

  std::string config = write("deep-config.json", R"({"prices": )" + deep + "}");
  r = cli.run("run go --config " + config + " --scenario " + quickstart + " --workspace " + ws);
  CHECK_REFUSED(r, "a config");
  BOOST_TEST(contains(r.err, config), r.err);

  std::string plan = write("deep-plan.json", R"({"faults": )" + deep + "}");
  r = cli.run("run go --faults " + plan + " --scenario " + quickstart + " --workspace " + ws);
  CHECK_REFUSED(r, "a fault plan");
  BOOST_TEST(contains(r.err, plan), r.err);

  // Nothing ran, nothing was recorded.
  BOOST_TEST(!std::filesystem::exists(ws + "/notes"));
}

// A model server's tool call 400,000 deep: the turn fails on the bound and
// the session stays readable (the arguments were never stored).
BOOST_AUTO_TEST_CASE(a_model_reply_nested_past_the_bound_fails_the_turn_and_is_not_stored) {
  MockLlmServer server;
  WireAnswer deep;
  deep.calls.push_back(WireToolCall{.id = "call_1", .name = "shell", .arg_pieces = {nested_json(kDeep)}});
  server.set_handler([&](const MockRequest&, size_t) { return MockReply{.body = openai_stream(deep)}; });
  CliResult r = cli.run("run go --session m1 --provider openai --model m --base-url " + server.url() +
                        "/v1 --workspace " + ws);
  BOOST_TEST(r.code == 1, r.out << r.err);
  BOOST_TEST(contains(r.err, "the arguments of tool call 1 (shell): " + std::string(kBound)), r.err);
  BOOST_TEST(server.requests().size() == 1u);  // permanent: not asked again
  CliResult shown = cli.run("log show m1 --json");
  BOOST_TEST(shown.code == 0, shown.err);
  BOOST_TEST(contains(shown.out, "\"llm.failed\""));
  BOOST_TEST(!contains(shown.out, "\"llm.responded\""));
}

// An MCP server whose tool schema nests 60,000 deep: `mcp list` reports it
// and a session goes on without that server's tools.
BOOST_AUTO_TEST_CASE(an_mcp_schema_nested_past_the_bound_is_reported_not_followed) {
  std::string config = write(
      "mcp.json",
      json{{"mcp_servers",
            {{"deep", {{"command", MCP_TEST_SERVER}, {"args", json::array({"--deep-schema", "60000"})}}}}},
           {"tools", {{"sandbox", "off"}}}}
          .dump());
  CliResult listed = cli.run("mcp list --config " + config + " --workspace " + ws);
  CHECK_NOT_CRASHED(listed, "mcp list");
  BOOST_TEST(listed.code == 1, listed.out << listed.err);
  BOOST_TEST(contains(listed.out + listed.err, kBound), listed.out << listed.err);
  CliResult run = cli.run("run go --config " + config + " --scenario " + quickstart + " --workspace " + ws);
  CHECK_NOT_CRASHED(run, "run with the server");
}

// A bundle forged to carry arguments, and a tool output, nested 400,000
// deep (its checkpoints rehashed, so that verify and import accept it):
// every reader shows the text and none crashes.
BOOST_AUTO_TEST_CASE(every_reader_of_a_log_holding_deep_json_shows_it_as_text) {
  CliResult rec = cli.run("run go --session d0 --scenario " + quickstart + " --workspace " + ws);
  BOOST_REQUIRE_MESSAGE(rec.code == 0, rec.err);
  std::string plain = dir.sub("d0.bundle");
  BOOST_REQUIRE(cli.run("bundle d0 -o " + plain).code == 0);
  Bundle b;
  BOOST_REQUIRE(read_bundle(plain, &b).ok());
  const std::string deep = nested_json(kDeep);
  plant_deep_json(b, deep);
  std::string forged = dir.sub("deep.bundle");
  BOOST_REQUIRE(write_bundle_file(b, forged).ok());

  CliResult imported = cli.run("bundle import " + forged + " --as d1");
  BOOST_REQUIRE_MESSAGE(imported.code == 0, imported.out << imported.err);

  CliResult verify = cli.run("verify d1");
  BOOST_TEST(verify.code == 0, verify.out << verify.err);
  CliResult json_log = cli.run("log show d1 --json");
  BOOST_TEST(json_log.code == 0, json_log.err);
  // The arguments are a string in the JSON, not a value 400,000 deep.
  json parsed = json::parse(json_log.out, nullptr, false);
  BOOST_TEST(!parsed.is_discarded());
  BOOST_TEST(contains(json_log.out, "\"args\":\"{\\\"a\\\":{\\\"a\\\":"));

  // The forgery changed what the model was sent, so a replay diverges where
  // the request digest differs: it reads and compares, it does not crash.
  for (const std::string& args : std::vector<std::string>{"replay d1", "replay " + forged}) {
    CliResult r = cli.run(args);
    CHECK_NOT_CRASHED(r, args);
    BOOST_TEST(contains(r.out, "DIVERGED at seq 14 (turn 2): llm.requested differs in request_digest"),
               args << ": " << r.out.substr(0, 2000) << r.err.substr(0, 2000));
  }
  std::vector<std::string> readers = {"log show d1",          "log show d1 --bodies",    "trace show d1",
                                      "trace show d1 --json", "trace analyze d1 --json", "trace stats --json",
                                      "sessions --json"};
  for (const char* format : {"otlp", "perfetto", "html", "md", "json", "ndjson"}) {
    for (const char* content : {"", " --with-content"}) {
      readers.push_back("trace export d1 --format " + std::string(format) + content + " -o " +
                        dir.sub(std::string("out.") + format));
    }
  }
  for (const auto& args : readers) {
    CliResult r = cli.run(args);
    CHECK_NOT_CRASHED(r, args);
    BOOST_TEST(r.code == 0, args << ": exit " << r.code << "\n"
                                 << r.out.substr(0, 2000) << r.err.substr(0, 2000));
  }
  // Each span of the session, drilled into.
  CliResult spans = cli.run("trace show d1 --json");
  json sj = json::parse(spans.out, nullptr, false);
  BOOST_REQUIRE(sj.contains("data"));
  size_t drilled = 0;
  for (const auto& sp : sj["data"]["spans"]) {
    std::string seq = std::to_string(sp.value("open_seq", uint64_t{0}));
    for (const char* extra : {"", " --json", " --raw"}) {
      CliResult r = cli.run("trace span d1 " + seq + extra);
      CHECK_NOT_CRASHED(r, "trace span d1 " + seq + extra);
    }
    ++drilled;
  }
  BOOST_TEST(drilled > 3u);
  // A fork runs on from the history that holds it.
  CliResult fork = cli.run("fork d1 --at-turn 2 --scenario " + quickstart + " --workspace " + ws);
  CHECK_NOT_CRASHED(fork, "fork");
}

// An MCP server's tool description, a command's output and a model's answer
// holding terminal controls (an OSC title change, a screen clear, an 8-bit
// CSI): every human line shows them as \x1b, \u009b...; none reaches the
// terminal raw.
BOOST_AUTO_TEST_CASE(terminal_controls_from_outside_are_shown_not_obeyed) {
  auto raw_controls = [](const std::string& text) {
    return text.find('\x1b') != std::string::npos || text.find('\x07') != std::string::npos ||
           text.find("\xc2\x9b") != std::string::npos;
  };
  std::string config = write(
      "mcp.json",
      json{{"mcp_servers", {{"esc", {{"command", MCP_TEST_SERVER}, {"args", json::array({"--escapes"})}}}}},
           {"tools", {{"sandbox", "off"}}}}
          .dump());
  CliResult listed = cli.run("mcp list --config " + config + " --workspace " + ws);
  BOOST_TEST(listed.code == 0, listed.out << listed.err);
  BOOST_TEST(contains(listed.out, "Harmless\\x1b]0;pwned\\x07\\x1b[2J\\u009b31m"), listed.out);
  BOOST_TEST(!raw_controls(listed.out + listed.err), listed.out << listed.err);
  CliResult listed_json = cli.run("mcp list --json --config " + config + " --workspace " + ws);
  BOOST_TEST(contains(listed_json.out, "\\u001b]0;pwned"), listed_json.out);
  BOOST_TEST(!raw_controls(listed_json.out), listed_json.out);

  std::string scenario = write(
      "escapes.json", json{{"replies",
                            {{{"tool_calls",
                               {{{"name", "shell"},
                                 {"args", {{"command", "printf 'out\\033]0;pwned\\007\\302\\233x\\n'"}}}}}}},
                             {{"text", "done\x1b[2J\xc2\x9b"}}}}}
                          .dump());
  CliResult run = cli.run("run go --session e1 --scenario " + scenario + " --workspace " + ws);
  BOOST_TEST(run.code == 0, run.out << run.err);
  BOOST_TEST(contains(run.out, "done\\x1b[2J\\u009b"), run.out);
  std::vector<std::string> readers = {"log show e1", "log show e1 --json", "trace show e1",
                                      "trace show e1 --json", "replay e1"};
  CliResult spans = cli.run("trace show e1 --json");
  const json span_list = json::parse(spans.out);
  for (const auto& sp : span_list["data"]["spans"]) {
    readers.push_back("trace span e1 " + std::to_string(sp.value("open_seq", uint64_t{0})));
  }
  for (const auto& args : readers) {
    CliResult r = cli.run(args);
    BOOST_TEST(r.code == 0, args << ": " << r.err);
    BOOST_TEST(!raw_controls(r.out + r.err), args << ":\n" << r.out << r.err);
  }
  std::string json_log = cli.run("log show e1 --json").out;
  BOOST_TEST(contains(json_log, "out\\u001b]0;pwned\\u0007\\u009bx"), json_log);
}

BOOST_AUTO_TEST_SUITE_END()
