// A `carapace serve` hosting a home, in its own process on 127.0.0.1, and
// a client of its API: for the tests that drive the host as a program would
// (serve_host_test, schedule_host_test). CARAPACE_BIN names the program.
#pragma once

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
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"
#include "tests/support/ws_client.h"

namespace carapace::testing {

namespace serve_host_detail {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

inline std::string slurp(const std::string& path) { return CliRunner::slurp(path); }

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline bool wait_for(const std::function<bool()>& done, int seconds = 30) { return WsClient::poll_until(done, seconds); }

struct Reply {
  int status = 0;
  std::string body;
  json j;
  std::string message() const {
    return j.is_object() && j.contains("error") && j["error"].is_object() ? j["error"].value("message", "") : "";
  }
};

struct ServeHost {
  testing::TempDir dir;
  std::string home = dir.sub("home");
  pid_t server = 0;
  uint16_t port = 0;
  std::string token;

  ServeHost() {
    std::filesystem::create_directories(home);
    ::chmod(home.c_str(), 0700);
  }
  ~ServeHost() { kill_server(SIGKILL); }

  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(dir.sub(name)) << text;
    return dir.sub(name);
  }

  // `carapace ARGS` in the background, after `prefix` (e.g. "faketime -f @... ").
  pid_t spawn(const std::string& args, const std::string& log, const std::string& prefix = "") {
    std::string pidfile = dir.sub("pid");
    std::string cmd = prefix + "'" + std::string(CARAPACE_BIN) + "' --home '" + home + "' " + args + " >'" + log +
                      "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
    BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
    return static_cast<pid_t>(std::stol(slurp(pidfile)));
  }

  static bool gone(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, WNOHANG);  // reaped if it is our child (it is the shell's)
    return ::kill(pid, 0) != 0 && errno == ESRCH;
  }

  // `carapace serve --port 0 ARGS`; its port and token from what it prints.
  std::string start_server(const std::string& scenario, const std::string& args = "",
                           const std::string& log_name = "serve.out", const std::string& prefix = "") {
    std::string log = dir.sub(log_name);
    std::filesystem::remove(log);
    pid_t pid = spawn("serve --port 0 --interval-ms 50 --scenario '" + file("scenario.json", scenario) + "' " + args, log,
                      prefix);
    BOOST_REQUIRE_MESSAGE(wait_for([&] { return contains(slurp(log), "Ctrl-C stops"); }), slurp(log));
    std::string text = slurp(log);
    size_t at = text.find("127.0.0.1:");
    BOOST_REQUIRE(at != std::string::npos);
    port = static_cast<uint16_t>(std::stoi(text.substr(at + 10)));
    std::string line = text.substr(0, text.find('\n'));
    size_t t = line.find("#token=");
    token = t == std::string::npos ? "" : line.substr(t + 7);
    server = pid;
    return log;
  }

  void kill_server(int sig) {
    if (server == 0) return;
    ::kill(server, sig);
    BOOST_TEST(wait_for([&] { return gone(server); }, 20));
    server = 0;
  }

  Reply request(const std::string& method, const std::string& target, const std::string& body = "",
                const std::vector<std::string>& headers = {"Content-Type: application/json"}, bool with_token = true) {
    std::string raw = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n";
    if (with_token) raw += "Authorization: Bearer " + token + "\r\n";
    for (const auto& h : headers) raw += h + "\r\n";
    raw += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
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
    r.status = static_cast<int>(parser.get().result_int());
    r.body = parser.get().body();
    r.j = json::parse(r.body, nullptr, false);
    return r;
  }
  Reply post(const std::string& target, const json& body) { return request("POST", target, body.dump()); }
  Reply get(const std::string& target) { return request("GET", target, "", {}); }

  std::string status_of(const std::string& session) {
    Reply r = get("/api/sessions");
    if (!r.j.is_object() || !r.j["data"].is_array()) return "";
    for (const auto& row : r.j["data"]) {
      if (row["id"] == session) return row["status"].get<std::string>();
    }
    return "";
  }
  bool reaches(const std::string& session, const std::string& status, int seconds = 30) {
    return wait_for([&] { return status_of(session) == status; }, seconds);
  }

  // The session's events (from the log, as `carapace log show` reads it).
  json events(const std::string& session) {
    std::string out = dir.sub("events.json");
    std::string cmd = std::string(CARAPACE_BIN) + " --home '" + home + "' log show " + session + " --json >'" + out +
                      "' 2>/dev/null";
    (void)std::system(cmd.c_str());
    json j = json::parse(slurp(out), nullptr, false);
    return j.is_object() && j.contains("data") ? j["data"]["events"] : json::array();
  }
  std::vector<json> of_type(const std::string& session, const std::string& type) {
    std::vector<json> out;
    for (const auto& e : events(session)) {
      if (e.value("type", "") == type) out.push_back(e);
    }
    return out;
  }
};

}  // namespace serve_host_detail

using serve_host_detail::Reply;
using serve_host_detail::ServeHost;

}  // namespace carapace::testing
