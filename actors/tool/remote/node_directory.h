// Which tools node a call goes to (docs/scale-out.md). The session asks it
// before it records a call's intent, so that tool.requested names the node;
// the tool router tells it which nodes are up.
//
// Thread safe: sessions read it on their actors' threads, the router writes.
// No CAF: the session's pure pieces and the tests use it as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace carapace {

// A tools node as the configuration names it.
struct NodeRoute {
  std::string name;     // unique; what tool.requested records
  std::string address;  // host:port
  // The tools it runs: names, or prefixes ending in '*' ("mcp:*").
  std::vector<std::string> tools;
};

// What the host does with a routed tool when none of its nodes is up.
enum class NodeFallback : uint8_t {
  kRefuse,  // the call fails without running (the safe default: the host may hold secrets)
  kLocal,   // it runs in this process, as without nodes
};

// How both sides of a node link run (config: node_options; carapace node's flags).
struct NodeNetOptions {
  // A directory holding node.crt, node.key and ca.crt (carapace node certs).
  // Empty only with insecure_loopback.
  std::string tls_dir;
  // Plain TCP, only to and on 127.0.0.1: for tests and a first try.
  bool insecure_loopback = false;
  // The middleman's heartbeat, and how long a silent link lives: a node
  // killed, frozen or cut off is lost within connection_timeout_ms plus a
  // heartbeat.
  uint64_t heartbeat_ms = 1000;
  uint64_t connection_timeout_ms = 5000;
  NodeFallback fallback = NodeFallback::kRefuse;
};

struct NodeState {
  NodeRoute route;
  bool up = false;
  std::string why_down = "not connected yet";
  std::string node_id;      // the node's own id (its ledger's), once up
  uint64_t in_flight = 0;   // calls sent and not answered
  uint64_t lost_calls = 0;  // calls it had in flight when it was lost
  int64_t changed_at_us = 0;
};

class NodeDirectory {
 public:
  NodeDirectory(std::vector<NodeRoute> nodes, NodeFallback fallback);
  // A replay's: each pick answers what the log recorded for the call (the
  // node of its next tool.requested, or the refusal), so that a replay
  // needs no node and diverges nowhere.
  using Recorded = std::function<Status(const std::string& call_id, std::string* node)>;
  explicit NodeDirectory(Recorded recorded);

  // Whether any node is configured for `tool`.
  bool routed(const std::string& tool) const;

  // Where a call of `tool` runs now: "" (this process) when no node is
  // configured for it; else the up node offering it with the fewest calls
  // in flight (the first in the configuration on a tie), skipping `except`
  // (the node a retry gives up on). None up: "" with kLocal, else an error
  // naming each node and why it is down.
  Status pick(const std::string& tool, const std::string& call_id, const std::string& except,
              std::string* node) const;

  // The router's side.
  void set_up(const std::string& name, const std::string& node_id);
  void set_down(const std::string& name, const std::string& why);
  void sent(const std::string& name);
  void answered(const std::string& name, bool lost);

  std::vector<NodeState> states() const;
  std::vector<NodeRoute> routes() const;
  NodeFallback fallback() const { return fallback_; }

 private:
  static bool offers(const NodeRoute& route, const std::string& tool);
  NodeState* find(const std::string& name);

  mutable std::mutex mu_;
  std::vector<NodeState> nodes_;
  const NodeFallback fallback_;
  const Recorded recorded_;
};

// Parses "host:port" (an IPv4 address or a host name; port 1..65535).
Status parse_node_address(const std::string& address, std::string* host, uint16_t* port);

}  // namespace carapace
