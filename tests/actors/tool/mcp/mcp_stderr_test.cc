// What an MCP server writes is bounded: its stderr reaches the log at a
// limited rate and up to a total per start, the rest counted and the count
// logged; a stdout line of 1 GiB is cut off at max_message_bytes, never held
// whole. Against the test server (mcp_test_server.cc) flooding for real,
// with the log written to files as the CLI writes it.
#define BOOST_TEST_MODULE mcp_stderr_test
#include <boost/test/unit_test.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "actors/tool/mcp/mcp_client.h"
#include "runtime/logging.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

McpClientOptions options(const std::string& dir, std::vector<std::string> flags) {
  McpClientOptions o;
  o.name = "test";
  o.process.argv = {MCP_TEST_SERVER};
  for (auto& f : flags) o.process.argv.push_back(f);
  o.process.cwd = dir;
  o.process.env = {"PATH=/usr/bin:/bin"};
  o.request_timeout = 5000ms;
  o.stop_grace = 300ms;
  return o;
}

// The log files of `dir`, as the CLI writes them (JSON lines).
struct LogFiles {
  explicit LogFiles(std::string dir) : dir_(std::move(dir)) {
    CHECK_OK(configure_logging(LogOptions{.dir = dir_, .stderr_level = "off", .file_level = "info"}));
  }
  ~LogFiles() { (void)configure_logging(LogOptions{.stderr_level = "off"}); }

  uint64_t bytes() const {
    uint64_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += fs::file_size(e.path());
    return n;
  }
  std::vector<std::string> lines_with(const std::string& part) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      std::ifstream in(e.path());
      for (std::string line; std::getline(in, line);) {
        if (line.find(part) != std::string::npos) out.push_back(line);
      }
    }
    return out;
  }

  std::string dir_;
};

// The number after `before` in `line`, or -1.
long number_after(const std::string& line, const std::string& before) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(before + "([0-9]+)"))) return -1;
  return std::stol(m[1]);
}

// Resets this process's peak resident memory (VmHWM) to what it holds now.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The peak resident memory of this process (since the last reset), in bytes.
uint64_t peak_rss() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_endless_stderr_flood_stops_at_max_stderr_bytes_and_is_counted) {
  testing::TempDir dir;
  LogFiles logs(dir.sub("logs"));
  auto o = options(dir.path(), {"--stderr-flood", "0"});
  o.max_stderr_bytes = 64 * 1024;
  o.stderr_lines_per_second = 1'000'000;  // only the total bounds it here
  std::unique_ptr<McpClient> c;
  CHECK_OK(McpClient::start(o, &c));
  std::this_thread::sleep_for(1500ms);
  BOOST_TEST(c->alive());  // a flood on stderr is no reason to stop a server
  c->stop();

  // The log holds 64 KiB of the flood, a line saying the bound was reached
  // and one with the count of what was not logged.
  BOOST_TEST(logs.bytes() <= 64u * 1024 + 1024, logs.bytes() << " bytes of log");
  auto logged = logs.lines_with("MCP server test (stderr): flood line");
  BOOST_TEST(logged.size() > 100u);
  BOOST_TEST(logs.lines_with("its stderr reached mcp_servers.test.max_stderr_bytes (65536 bytes").size() ==
             1u);
  auto counted = logs.lines_with("of its stderr were not logged: past mcp_servers.test.max_stderr_bytes");
  BOOST_REQUIRE(counted.size() == 1u);
  long dropped = number_after(counted[0], "MCP server test: ");
  BOOST_TEST(dropped > 10'000, counted[0]);  // the flood went on: 1.5 s of it at full speed
}

BOOST_AUTO_TEST_CASE(a_stderr_burst_is_rate_limited_and_its_count_logged_when_it_ends) {
  testing::TempDir dir;
  LogFiles logs(dir.sub("logs"));
  auto o = options(dir.path(), {"--stderr-flood", "3000"});
  o.stderr_lines_per_second = 100;
  std::unique_ptr<McpClient> c;
  CHECK_OK(McpClient::start(o, &c));
  // The burst takes milliseconds; a second after it, the count is logged
  // while the server still runs.
  std::vector<std::string> counted;
  for (int i = 0; i < 100 && counted.empty(); ++i) {
    std::this_thread::sleep_for(50ms);
    counted = logs.lines_with(
        "of its stderr were not logged: more than 100 lines in a second "
        "(mcp_servers.test.stderr_lines_per_second)");
  }
  BOOST_REQUIRE_MESSAGE(counted.size() == 1u, "no count of the dropped lines before the server stopped");
  BOOST_TEST(c->alive());
  c->stop();
  auto logged = logs.lines_with("MCP server test (stderr): flood line");
  BOOST_TEST(logged.size() >= 100u);
  BOOST_TEST(logged.size() <= 200u);  // the burst may straddle two seconds
  // Every line is either logged or counted.
  long dropped = 0;
  for (const auto& line : logs.lines_with("of its stderr were not logged"))
    dropped += number_after(line, "MCP server test: ");
  BOOST_TEST(static_cast<long>(logged.size()) + dropped == 3000);
  // The last lines are still kept for error messages.
  BOOST_TEST(c->stderr_tail().find("flood line 2999 ") != std::string::npos, c->stderr_tail());
}

BOOST_AUTO_TEST_CASE(a_one_gib_stdout_line_is_cut_at_max_message_bytes_not_held_whole) {
  testing::TempDir dir;
  auto o = options(dir.path(), {});
  BOOST_REQUIRE(o.max_message_bytes == 64u << 20);  // the default
  std::unique_ptr<McpClient> c;
  CHECK_OK(McpClient::start(o, &c));
  reset_peak_rss();
  uint64_t before = peak_rss();
  auto start = std::chrono::steady_clock::now();
  auto r =
      c->request("tools/call", {{"name", "flood_stdout"}, {"arguments", {{"bytes", 1ull << 30}}}}, 60000ms);
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST((r.kind == McpClient::Reply::Kind::kGone));
  BOOST_TEST(r.error.find("longer than 67108864 bytes on stdout (mcp_servers.test.max_message_bytes)") !=
                 std::string::npos,
             r.error);
  BOOST_TEST(!c->alive());
  BOOST_TEST(took < 20s);
  // What was held: the bound and a read buffer, not the gibibyte.
  uint64_t grew = peak_rss() - before;
  BOOST_TEST(grew < 300ull << 20, (grew >> 20) << " MiB more at the peak");
}
