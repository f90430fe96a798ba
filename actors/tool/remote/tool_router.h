// The session host's side of tools nodes (docs/scale-out.md): the actor the
// sessions send their tool calls to when the configuration names nodes.
//
// A call whose invocation names no node runs on the local tool supervisor,
// as without nodes. A call naming a node goes to that node only (the
// session picked it from the NodeDirectory and recorded it in
// tool.requested): the router never moves a call on its own, because only
// the session can record a second attempt.
//
// Every node is connected to (TLS, or plain TCP with insecure_loopback),
// checked (its interface, then its hello: role and tools), monitored, and
// connected to again after a loss. Every call sent has its own deadline.
// When a node is lost (its connection closed, reset, or silent past the
// middleman's connection time-out) each call it had in flight is answered
// at once with node_lost set: no result came and none will. A node up but
// slow past a call's deadline gives a timed-out result instead. The host's
// fault plan reaches routed calls at tool.before_exec and tool.after_exec,
// as it reaches local ones.
#pragma once

#include <caf/fwd.hpp>

#include <memory>

#include "actors/caf_types.h"
#include "actors/tool/remote/node_directory.h"

namespace carapace {

struct ToolRouterOptions {
  std::shared_ptr<NodeDirectory> directory;
  bool insecure = false;              // plain TCP (loopback only)
  uint64_t connect_timeout_ms = 5000;  // a connection and its hello
  uint64_t reconnect_ms = 1000;        // between attempts to reach a node that is down
  // A call's deadline: its time-out, the tool grace, and this margin for
  // the trip (a call without a time-out: kMaxRemoteCallMs).
  uint64_t deadline_margin_ms = 5000;
  // The host's fault plan (may be null): tool.before_exec fires before a
  // routed call is sent, tool.after_exec when its node's outcome arrives
  // (a crash there: the node ran the call, the host never recorded it).
  std::shared_ptr<FaultInjector> faults;
};

inline constexpr uint64_t kMaxRemoteCallMs = 24ull * 3600 * 1000;
// The most of a node's output the host keeps (a node cuts its own first).
inline constexpr size_t kMaxRemoteOutputBytes = 4u << 20;
// The most of a node's MCP tools a host declares from its hello.
inline constexpr size_t kMaxNodeTools = 256;
inline constexpr size_t kMaxNodeToolBytes = 1u << 20;

// Asked of the router: answered (true) once every node has been tried once,
// up or not, so that a host does not start its sessions before its nodes
// had a chance to come up.
using ready_atom = caf::atom_constant<caf::atom("ready")>;
// Asked of the router: the MCP tools the nodes now up offer
// (std::vector<ToolSpec>, by name, the first node's spec of each).
using node_tools_atom = caf::atom_constant<caf::atom("nodetools")>;

// Implements ToolActor (ToolInvocation -> ToolOutcome) and reacts to
// (cancel_atom, session id): the local supervisor's and every node's calls
// of that session are told to stop.
caf::actor spawn_tool_router(caf::actor_system& system, ToolSupervisorActor local, ToolRouterOptions options);

}  // namespace carapace
