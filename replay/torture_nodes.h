// Tools nodes for the torture runner (`carapace torture --nodes N`,
// docs/scale-out.md): N real `carapace node` processes per iteration, with
// mutual TLS, a shared workspace root and an execution log each, which the
// session host's children route every built-in tool to, each behind a
// loopback proxy (replay/tcp_fault_proxy.h); and the chaos: at random
// moments one node is killed (SIGKILL, restarted on its port with its home
// and ledger a moment later), frozen (SIGSTOP, then SIGCONT), or cut off
// (its proxy black-holes every connection for a while: the node runs on,
// the host hears nothing), while the runner crashes the host as it always
// does.
//
// Thread safety: the chaos runs on a thread of its own; the other members
// are called from the runner's thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace carapace {

class TcpFaultProxy;

class TortureNodes {
 public:
  // A private CA and certificates for the host and `count` nodes, in `dir`.
  static Status make_certificates(const std::string& carapace, const std::string& dir, uint32_t count);

  // Nodes for the iteration whose home is `home` (their homes, logs and
  // workspaces go under it); `certs`: make_certificates' directory.
  // `mutation`: a node mutation (forgetful_ledger) passed to every node, or "".
  TortureNodes(std::string carapace, std::string certs, std::string home, uint32_t count, uint64_t seed,
               std::string mutation = "");
  ~TortureNodes();  // stops the chaos and kills every node

  // Starts every node on a port of its own and waits until each listens.
  Status start();
  // What the host's config gains: "nodes" (every built-in tool on every
  // node, reached through its proxy) and "node_options" (200 ms
  // heartbeats, a 1 s time-out).
  void add_to_config(nlohmann::json* config) const;
  // Where the session's routed calls run: the shared workspace root's
  // directory for the session `session`.
  std::string workspace(const std::string& session) const { return root_ + "/" + session; }
  std::vector<std::string> exec_logs() const;

  void start_chaos();
  void stop_chaos();
  uint64_t kills() const { return kills_; }
  uint64_t freezes() const { return freezes_; }
  uint64_t partitions() const { return partitions_; }

 private:
  struct Node {
    std::string name;
    uint16_t port = 0;
    pid_t pid = -1;
    std::shared_ptr<TcpFaultProxy> proxy;  // what the host connects to
  };
  Status launch(Node& n);
  void chaos();

  std::string carapace_, certs_, home_, root_, mutation_;
  std::vector<Node> nodes_;
  std::mutex mu_;  // nodes_' pids
  std::atomic<bool> stop_{false};
  std::thread chaos_;
  uint64_t seed_;
  std::atomic<uint64_t> kills_{0}, freezes_{0}, partitions_{0};
};

}  // namespace carapace
