// How a session host reaches a node (docs/scale-out.md), whatever its role:
// a connection through the middleman (TLS, or plain TCP on loopback) made
// asynchronously with a deadline, so that a hung peer cannot hold the
// caller; the published actor's interface checked; its hello asked, with
// the same deadline, and its role checked. The tool router and the remote
// provider both connect this way.
//
// Heavy: includes CAF. Include it from actor implementation files only.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <set>
#include <string>

#include "actors/tool/remote/node_protocol.h"

namespace carapace {

struct NodeConnect {
  std::string address;  // host:port, for messages
  std::string host;
  uint16_t port = 0;
  bool insecure = false;
  uint64_t timeout_ms = 5000;  // the connection, then the hello
  std::string role;            // the hello must say this ("tools", "provider")
  std::set<std::string> interface;
  // Why the node's hello refuses it, or "" (after the role was checked).
  std::function<std::string(const NodeHello&)> check;
};

// Calls exactly one of `up` (the node's actor and its hello) or `failed`
// (why, for the node's "down" state), on `self`'s thread.
void connect_to_node(caf::event_based_actor* self, const NodeConnect& spec,
                     std::function<void(caf::strong_actor_ptr, const NodeHello&)> up,
                     std::function<void(const std::string&)> failed);

}  // namespace carapace
