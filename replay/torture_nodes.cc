#include "replay/torture_nodes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/child_process.h"
#include "replay/tcp_fault_proxy.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

// A port free on 127.0.0.1 now (the node binds it with SO_REUSEADDR, and
// binds it again after a restart).
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGKILL);
  int status = 0;
  wait_child_process(pid, 10'000, &status);
}

}  // namespace

Status TortureNodes::make_certificates(const std::string& carapace, const std::string& dir, uint32_t count) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::io_error("cannot create " + dir + ": " + ec.message());
  std::vector<std::string> who = {"host"};
  for (uint32_t i = 1; i <= count; ++i) who.push_back("n" + std::to_string(i));
  for (const auto& w : who) {
    int status = run_child_process(carapace,
                                   {"--home", dir + "/certhome", "node", "certs", dir + "/tls-" + w, "--ca",
                                    dir + "/ca", "--name", w},
                                   dir + "/certs.log");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return Status::aborted("cannot make the nodes' certificates: " + file_text(dir + "/certs.log"));
    }
  }
  return Status();
}

TortureNodes::TortureNodes(std::string carapace, std::string certs, std::string home, uint32_t count, uint64_t seed,
                           std::string mutation)
    : carapace_(std::move(carapace)),
      certs_(std::move(certs)),
      home_(std::move(home)),
      mutation_(std::move(mutation)),
      seed_(seed) {
  root_ = home_ + "/node-ws";
  for (uint32_t i = 1; i <= count; ++i) nodes_.push_back(Node{.name = "n" + std::to_string(i)});
}

TortureNodes::~TortureNodes() {
  stop_chaos();
  std::lock_guard lock(mu_);
  for (auto& n : nodes_) reap(n.pid);
}

Status TortureNodes::launch(Node& n) {
  const std::string home = home_ + "/" + n.name;
  std::error_code ec;
  fs::create_directories(home, ec);
  ::chmod(home.c_str(), 0700);
  const std::string log = home_ + "/" + n.name + ".log";
  const size_t said = file_text(log).size();  // a restarted node's log goes on after the last one's
  std::vector<std::string> args = {"--home", home, "node", "--listen", "127.0.0.1:" + std::to_string(n.port), "--tls",
                                   certs_ + "/tls-" + n.name, "--workspace", root_, "--heartbeat-ms", "200",
                                   "--connection-timeout-ms", "1000", "--exec-log", home_ + "/" + n.name + ".exec"};
  if (!mutation_.empty()) args.insert(args.end(), {"--test-mutation", mutation_});
  n.pid = spawn_child_process(carapace_, args, log);
  if (n.pid <= 0) return Status::io_error("cannot start tools node " + n.name);
  for (int k = 0; k < 2000; ++k) {
    const std::string text = file_text(log);
    if (text.find("listening on", said) != std::string::npos) return Status();
    int status = 0;
    if (wait_child_process(n.pid, 5, &status)) {
      n.pid = -1;
      return Status::aborted("tools node " + n.name + " did not start: " + text.substr(said));
    }
  }
  return Status::aborted("tools node " + n.name +
                         " did not listen within 10 s: " + file_text(log).substr(said));
}

Status TortureNodes::start() {
  std::error_code ec;
  fs::create_directories(root_, ec);
  std::lock_guard lock(mu_);
  for (auto& n : nodes_) {
    n.port = free_port();
    if (n.port == 0) return Status::io_error("no free port on 127.0.0.1 for tools node " + n.name);
    CARAPACE_RETURN_IF_ERROR(launch(n));
    try {
      n.proxy = std::make_shared<TcpFaultProxy>(n.port);
    } catch (const std::exception& e) {
      return Status::io_error("cannot put a proxy before tools node " + n.name + ": " + e.what());
    }
  }
  return Status();
}

void TortureNodes::add_to_config(nlohmann::json* config) const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& n : nodes_) {
    list.push_back({{"name", n.name},
                    {"role", "tools"},
                    {"address", "127.0.0.1:" + std::to_string(n.proxy ? n.proxy->port() : n.port)},
                    {"tools", {"shell", "read_file", "write_file", "list_dir"}}});
  }
  (*config)["nodes"] = list;
  (*config)["node_options"] = {
      {"tls", certs_ + "/tls-host"}, {"heartbeat_ms", 200}, {"connection_timeout_ms", 1000}};
}

std::vector<std::string> TortureNodes::exec_logs() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(home_ + "/" + n.name + ".exec");
  return out;
}

void TortureNodes::start_chaos() {
  stop_ = false;
  chaos_ = std::thread([this] { chaos(); });
}

void TortureNodes::stop_chaos() {
  stop_ = true;
  if (chaos_.joinable()) chaos_.join();
  // Every node up and reachable again, for the checks that read their logs.
  std::lock_guard lock(mu_);
  for (auto& n : nodes_) {
    if (n.pid > 0) ::kill(n.pid, SIGCONT);
    if (n.proxy) n.proxy->set_mode(TcpFaultProxy::Mode::kPass);
  }
}

void TortureNodes::chaos() {
  std::mt19937_64 rng(seed_);
  auto pause = [&](uint64_t ms) {
    for (uint64_t slept = 0; slept < ms && !stop_; slept += 10) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  while (!stop_) {
    pause(50 + rng() % 400);
    if (stop_) break;
    std::unique_lock lock(mu_);
    Node& n = nodes_[rng() % nodes_.size()];
    const uint64_t what = rng() % 6;  // kill 3 in 6, freeze 2, cut off 1
    if (what == 5 && n.proxy) {
      n.proxy->set_mode(TcpFaultProxy::Mode::kBlackhole);
      ++partitions_;
      auto proxy = n.proxy;
      lock.unlock();
      pause(200 + rng() % 1000);
      proxy->set_mode(TcpFaultProxy::Mode::kPass);
    } else if (what < 3) {
      reap(n.pid);
      n.pid = -1;
      ++kills_;
      lock.unlock();
      pause(50 + rng() % 300);
      lock.lock();
      (void)launch(n);  // a node that cannot come back stays down: its calls are refused, as they would be
    } else {
      if (n.pid <= 0) continue;
      ::kill(n.pid, SIGSTOP);
      ++freezes_;
      const pid_t frozen = n.pid;
      lock.unlock();
      pause(200 + rng() % 1000);
      ::kill(frozen, SIGCONT);
    }
  }
}

}  // namespace carapace
