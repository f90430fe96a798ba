// NodeCluster: `carapace node` processes for tests (docs/scale-out.md), on
// 127.0.0.1 with certificates from `carapace node certs` (one private CA in
// the cluster's temp dir), each with its own home and log, started in the
// background and stopped with a signal. Shared by the node tests.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace carapace::testing {

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline bool wait_for(const std::function<bool()>& done,
                     std::chrono::milliseconds limit = std::chrono::milliseconds(30'000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

inline size_t count_lines(const std::string& text, const std::string& part) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += contains(line, part) ? 1 : 0;
  return n;
}

// A port free on 127.0.0.1 now.
inline uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct NodeProcess {
  std::string name;
  std::string home;
  std::string log;
  std::string exec_log;
  pid_t pid = 0;
  uint16_t port = 0;
};

class NodeCluster {
 public:
  TempDir dir;
  std::deque<NodeProcess> nodes;  // references stay valid as nodes are added

  // Certificates for each of `who` from the cluster's CA.
  explicit NodeCluster(const std::vector<std::string>& who) {
    for (const auto& w : who) certs(w, dir.sub("ca"));
  }
  ~NodeCluster() {
    for (auto& n : nodes) stop(n, SIGKILL);
  }

  CliResult cli(const std::string& home, const std::string& args, const std::vector<std::string>& env = {}) const {
    CliRunner runner(CARAPACE_BIN, home, dir.path());
    return runner.run(args, env);
  }

  void certs(const std::string& who, const std::string& ca) {
    auto r = cli(dir.sub("certhome"), "node certs '" + dir.sub("tls-" + who) + "' --ca '" + ca + "' --name " + who);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.out + r.err);
  }

  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(dir.sub(name)) << text;
    return dir.sub(name);
  }

  // Starts `carapace node` named `name` (its certificate tls-<name>) on a
  // free port, with a 200 ms heartbeat and a 1 s connection time-out, and
  // waits until it listens. `env`: "NAME=value" words before the command
  // (the environment is otherwise the test's, without provider keys).
  // `port`: where it listens (0: a free port, found from what it says).
  NodeProcess& start_node(const std::string& name, const std::string& extra = "", const std::string& env = "",
                          uint16_t port = 0) {
    NodeProcess n{.name = name, .home = dir.sub("home-" + name), .log = dir.sub(name + ".log"),
                  .exec_log = dir.sub(name + ".exec")};
    std::filesystem::create_directories(n.home);
    ::chmod(n.home.c_str(), 0700);
    std::filesystem::remove(n.log);  // a restarted node's: what it says, not what the last one said
    const std::string pidfile = dir.sub(name + ".pid");
    const std::string cmd =
        "env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u ANTHROPIC_API_KEY -u ANTHROPIC_BASE_URL " + env + " '" +
        std::string(CARAPACE_BIN) + "' --home '" + n.home + "' node --listen 127.0.0.1:" + std::to_string(port) + " --tls '" +
        dir.sub("tls-" + name) + "' --heartbeat-ms 200 --connection-timeout-ms 1000 --exec-log '" + n.exec_log +
        "' " + extra + " >'" + n.log + "' 2>&1 </dev/null & echo $! >'" + pidfile + "'";
    BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
    n.pid = static_cast<pid_t>(std::stol(CliRunner::slurp(pidfile)));
    BOOST_REQUIRE_MESSAGE(wait_for([&] { return contains(CliRunner::slurp(n.log), "listening on"); }),
                          CliRunner::slurp(n.log));
    const std::string text = CliRunner::slurp(n.log);
    n.port = static_cast<uint16_t>(std::stoi(text.substr(text.find("127.0.0.1:") + 10)));
    nodes.push_back(n);
    return nodes.back();
  }

  static void stop(NodeProcess& n, int sig) {
    if (n.pid == 0) return;
    ::kill(n.pid, SIGCONT);
    ::kill(n.pid, sig);
    wait_for([&] { return ::kill(n.pid, 0) != 0; }, std::chrono::milliseconds(10'000));
    n.pid = 0;
  }
};

}  // namespace carapace::testing
