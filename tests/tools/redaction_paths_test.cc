// A key a tool printed, in every place a run puts it — the model's arguments
// (a JSON string inside a JSON string, split over the stream's events), the
// tool's output and the next request body (JSON-escaped right after a
// `\n`), the streamed answer (in seven-byte pieces), the final answer — read
// back through every output a person or a program reads: the run's own
// lines, `log show` (text, --json, --bodies), every `trace` command (`--raw`
// too), every export format with and without content, and the log files.
// Before, `log show --bodies`, `trace span` (`--raw` the more), the HTML
// export and the status line showed it in clear where an escape preceded it
// or a stream split it.
#define BOOST_TEST_MODULE redaction_paths_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/cli_runner.h"
#include "tests/support/fake_model.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/ws_client.h"

using namespace carapace;
using namespace carapace::testing;
using nlohmann::json;

namespace {

// Built by concatenation: no key-shaped literal in the source.
const std::string kKey = std::string("sk-") + "proj-" + "Vw3Rt8Yp2Lk5Hg9Df1Sa7Qz4Xc6B";

// Whether `text` shows any part of the key that would identify it.
bool leaks(const std::string& text) {
  for (size_t at = 8; at + 8 <= kKey.size(); at += 4) {
    if (text.find(kKey.substr(at, 8)) != std::string::npos) return true;
  }
  return false;
}

// The part of `text` around the first leak, for the failure message.
std::string where(const std::string& text) {
  for (size_t at = 8; at + 8 <= kKey.size(); at += 4) {
    size_t p = text.find(kKey.substr(at, 8));
    if (p != std::string::npos) return text.substr(p > 120 ? p - 120 : 0, 240);
  }
  return "";
}

// GET `target` from the serve API on 127.0.0.1:`port`: the body.
std::string http_get(uint16_t port, const std::string& token, const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  req.set(http::field::authorization, "Bearer " + token);
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  beast::error_code ec;
  http::read(socket, buffer, parser, ec);
  return ec ? "" : parser.get().body();
}

// `carapace serve` on a free port in the background, stopped at the end.
struct Served {
  pid_t pid = 0;
  uint16_t port = 0;
  std::string token;
  Served(const CliRunner& cli, const std::string& log) {
    const std::string pidfile = log + ".pid";
    const std::string cmd = std::string(CARAPACE_BIN) + " --home '" + cli.home() +
                            "' serve --port 0 --interval-ms 50 >'" + log + "' 2>&1 </dev/null & echo $! >'" +
                            pidfile + "'";
    BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
    pid = static_cast<pid_t>(std::stol(CliRunner::slurp(pidfile)));
    std::string text;
    for (int i = 0; i < 600 && text.find("Ctrl-C stops") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      text = CliRunner::slurp(log);
    }
    BOOST_REQUIRE_MESSAGE(text.find("Ctrl-C stops") != std::string::npos, text);
    port = static_cast<uint16_t>(std::stoi(text.substr(text.find("127.0.0.1:") + 10)));
    const std::string line = text.substr(0, text.find('\n'));
    token = line.substr(line.find("#token=") + 7);
  }
  ~Served() {
    if (pid > 0) ::kill(pid, SIGTERM);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_key_a_tool_printed_is_masked_in_every_output) {
  TempDir dir;
  const std::string ws = dir.sub("ws");
  std::filesystem::create_directories(ws);
  CliRunner cli(CARAPACE_BIN, dir.sub("home"), dir.path());
  MockLlmServer server;
  server.set_handler([](const MockRequest& r, size_t) { return FakeModel{.format = "openai"}.reply(r); });
  const std::string provider = "--provider openai --model m --base-url " + server.url() + "/v1";

  std::vector<std::pair<std::string, std::string>> outputs;  // (what, text)
  auto read = [&](const std::string& args) {
    CliResult r = cli.run(args);
    BOOST_TEST(!r.crashed(), args << ": " << r.err);
    outputs.emplace_back(args, r.out + r.err);
    return r;
  };
  // The task holds the key after a line break: the note the model writes,
  // the `cat` that prints it, and the answer repeat it.
  std::ofstream(dir.sub("task.txt")) << "remember\n" << kKey;
  CliResult run = read("run \"$(cat '" + dir.sub("task.txt") + "')\" --session r1 --workspace " + ws + " " + provider);
  BOOST_REQUIRE_MESSAGE(run.code == 0, run.err);
  BOOST_REQUIRE(server.requests().size() == 3u);
  // The key did reach the model's requests JSON-escaped, and its answer in pieces.
  BOOST_REQUIRE(server.requests()[2].body.find("\\n" + kKey) != std::string::npos);
  read("run 'again' --session r1 --json " + provider);

  for (const std::string args : {"log show r1", "log show r1 --json", "log show r1 --bodies",
                                  "log show r1 --bodies --json", "trace show r1", "trace show r1 --json",
                                  "trace show r1 --full", "trace analyze r1", "trace stats --json", "sessions --json"}) {
    read(args);
  }
  json spans = json::parse(cli.run("trace show r1 --json").out);
  BOOST_REQUIRE(spans.contains("data"));
  for (const auto& sp : spans["data"]["spans"]) {
    const std::string id = sp["span_id"];
    for (const std::string extra : {"", " --json", " --raw", " --raw --body request", " --raw --body response"}) {
      CliResult r = cli.run("trace span r1 " + id + extra);
      if (extra.find("--body") != std::string::npos && r.code != 0) continue;  // not a model call
      outputs.emplace_back("trace span " + sp["name"].get<std::string>() + extra, r.out + r.err);
    }
  }
  for (const char* format : {"otlp", "perfetto", "html", "md", "json", "ndjson"}) {
    for (const std::string content : {"", " --with-content"}) {
      const std::string file = dir.sub(std::string("export.") + format);
      CliResult r = cli.run("trace export r1 --format " + std::string(format) + content + " -o " + file);
      BOOST_TEST(r.code == 0, format << content << ": " << r.err);
      outputs.emplace_back(std::string("export ") + format + content, CliRunner::slurp(file) + r.out + r.err);
    }
  }
  {
    // The web view: its API and its live messages.
    Served serve(cli, dir.sub("serve.out"));
    const std::string session = http_get(serve.port, serve.token, "/api/sessions/r1");
    BOOST_REQUIRE(session.find("\"spans\"") != std::string::npos);
    outputs.emplace_back("GET /api/sessions/r1", session);
    outputs.emplace_back("GET /api/sessions", http_get(serve.port, serve.token, "/api/sessions"));
    for (const auto& sp : spans["data"]["spans"]) {
      const std::string id = sp["span_id"];
      outputs.emplace_back("GET span " + sp["name"].get<std::string>(),
                           http_get(serve.port, serve.token, "/api/sessions/r1/spans/" + id));
    }
    WsClient client(serve.port, serve.token);
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "hello"; }));
    client.send(R"({"type":"watch","session":"r1"})");
    BOOST_REQUIRE(client.wait([](const json& m) { return m["type"] == "spans" && m["session"] == "r1"; }));
    std::string live;
    for (const auto& m : client.received()) live += m.message.dump() + "\n";
    outputs.emplace_back("the web view's live messages", live);
  }
  std::string logs;
  for (const auto& f : std::filesystem::directory_iterator(dir.sub("home") + "/logs")) logs += CliRunner::slurp(f.path());
  outputs.emplace_back("the log files", logs);

  size_t masked = 0;
  for (const auto& [what, text] : outputs) {
    BOOST_TEST(!leaks(text), what << " shows the key: ..." << where(text) << "...");
    if (text.find("\xe2\x80\xa6redacted\xe2\x80\xa6") != std::string::npos) ++masked;
  }
  BOOST_TEST(masked > 20u, "the outputs that show a masked key: " << masked);
}
