#include "actors/tool/remote/tool_router.h"

#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "actors/node/node_links.h"
#include "actors/tool/remote/node_protocol.h"
#include "actors/tool/tool_actor.h"
#include "base/clock.h"
#include "base/fault_injection.h"
#include "base/lib_log.h"

namespace carapace {

namespace {

using release_atom = caf::atom_constant<caf::atom("release")>;
using Clock = std::chrono::steady_clock;

// Calls that came while a node's first connection was being made.
using Waiting = std::vector<std::pair<ToolInvocation, caf::response_promise>>;

struct InFlight {
  std::string node;
  std::string call_id;
  std::string session;
  std::string tool;
  Clock::time_point sent;
  caf::response_promise rp;
};

// A routed call or an outcome an injected delay holds back.
struct Held {
  ToolInvocation invocation;  // a call to send
  ToolOutcome outcome;        // or an outcome to deliver
  bool is_outcome = false;
  caf::response_promise rp;
};

struct RouterState {
  // Not an aggregate: CAF would build it from the actor's own pointer.
  RouterState() = default;
  ToolSupervisorActor local;
  ToolRouterOptions options;
  NodeLinks<ToolNodeActor> links;
  std::map<std::string, Waiting> waiting;  // per node
  std::map<std::string, std::vector<ToolSpec>> mcp_tools;  // per node up: its hello's
  std::map<uint64_t, InFlight> in_flight;
  std::map<uint64_t, Held> held;                 // injected delays
  std::vector<caf::response_promise> hung;       // injected hangs: never answered
  uint64_t next_id = 0;
  static inline const char* name = "carapace.tool_router";
};

using RouterSelf = caf::stateful_actor<RouterState>*;

void send_call(RouterSelf self, ToolInvocation inv, caf::response_promise rp);

// What a node's hello may make this host declare to the model: its MCP
// tools (mcp__…), at most kMaxNodeTools of them and kMaxNodeToolBytes in
// all; the rest is left out, and said.
std::vector<ToolSpec> bounded_mcp_tools(const std::string& node, const std::vector<ToolSpec>& specs) {
  std::vector<ToolSpec> out;
  size_t bytes = 0, left_out = 0;
  for (const auto& spec : specs) {
    const size_t size = spec.name.size() + spec.description.size() + spec.schema.text.size();
    if (spec.name.rfind("mcp__", 0) != 0 || out.size() >= kMaxNodeTools || bytes + size > kMaxNodeToolBytes) {
      ++left_out;
      continue;
    }
    bytes += size;
    out.push_back(spec);
  }
  if (left_out > 0) {
    lib_log().warn("tools node {} offers {} tool(s) past what a host takes from a node ({} MCP tools, {} bytes): "
                   "left out",
                   node, left_out, kMaxNodeTools, kMaxNodeToolBytes);
  }
  return out;
}

// The calls that waited for a node's first connection go (or fail).
void release_waiting(RouterSelf self, const std::string& name) {
  auto it = self->state.waiting.find(name);
  if (it == self->state.waiting.end()) return;
  Waiting waiting = std::move(it->second);
  self->state.waiting.erase(it);
  for (auto& [inv, rp] : waiting) send_call(self, std::move(inv), std::move(rp));
}

// Answers the call `id` (once): the node's outcome, or why none came. A
// node caps its tools' output itself; this bounds what any node can make
// the host keep, whatever it sends.
void finish(RouterSelf self, uint64_t id, ToolOutcome outcome) {
  auto it = self->state.in_flight.find(id);
  if (it == self->state.in_flight.end()) return;  // answered already (the node was lost first)
  if (outcome.output.size() > kMaxRemoteOutputBytes) {
    if (outcome.original_bytes < outcome.output.size()) outcome.original_bytes = outcome.output.size();
    outcome.output.resize(kMaxRemoteOutputBytes);
    outcome.output += "\n[cut by the session host at " + std::to_string(kMaxRemoteOutputBytes) + " bytes]";
    outcome.truncated = true;
  }
  outcome.faults.clear();  // fault notes are the host's own; a node has no plan
  self->state.options.directory->answered(it->second.node, outcome.node_lost);
  outcome.node = it->second.node;
  InFlight f = std::move(it->second);
  self->state.in_flight.erase(it);
  if (!outcome.node_lost && !outcome.timed_out) {
    // The node ran the call; the host has its outcome and has not recorded it.
    Fault after = check_fault(self->state.options.faults.get(),
                              FaultSite{.point = FaultPoint::kToolAfterExec, .session = f.session, .name = f.tool});
    if (after) {
      outcome.faults.push_back(fault_note(FaultPoint::kToolAfterExec, after));
      if (after.action == FaultAction::kError) {
        outcome.output = injected_tool_failure(f.tool, after, true);
        outcome.is_error = true;
      }
      if (after.action == FaultAction::kHang) {
        self->state.hung.push_back(std::move(f.rp));
        return;
      }
      if (after.action == FaultAction::kDelay) {
        const uint64_t token = ++self->state.next_id;
        self->state.held[token] = Held{.outcome = std::move(outcome), .is_outcome = true, .rp = std::move(f.rp)};
        self->delayed_send(self, std::chrono::milliseconds(after.delay_ms), release_atom::value, token);
        return;
      }
    }
  }
  f.rp.deliver(std::move(outcome));
}

// The calls in flight on a node just lost get their outcome: lost.
void node_lost(RouterSelf self, const std::string& name, const std::string& address, const std::string& why) {
  auto& st = self->state;
  st.options.directory->set_down(name, "lost: " + why);
  std::vector<uint64_t> lost;
  for (const auto& [id, f] : st.in_flight) {
    if (f.node == name) lost.push_back(id);
  }
  lib_log().warn("tools node {} ({}) was lost ({}); {} call(s) in flight", name, address, why, lost.size());
  for (uint64_t id : lost) {
    const InFlight& f = st.in_flight[id];
    finish(self, id,
           ToolOutcome{.call_id = f.call_id,
                       .output = "the tools node " + name + " (" + address + ") was lost " +
                                 std::to_string(ms_since(f.sent)) + " ms after the call was sent: " + why,
                       .is_error = true,
                       .node_lost = true});
  }
}

void send_call(RouterSelf self, ToolInvocation inv, caf::response_promise rp) {
  auto& rs = self->state;
  if (inv.node.empty()) {
    self->request(rs.local, caf::infinite, std::move(inv))
        .then([rp](ToolOutcome& o) mutable { rp.deliver(std::move(o)); },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
    return;
  }
  auto* link = rs.links.find(inv.node);
  if (link != nullptr && !link->handle && link->connecting && !link->tried) {
    const std::string node = inv.node;
    rs.waiting[node].emplace_back(std::move(inv), std::move(rp));  // the first connection is being made
    return;
  }
  if (link == nullptr || !link->handle) {
    const std::string why = link == nullptr ? "no node has that name in the configuration" : link->last_failure;
    // Never sent. A call interrupted earlier (a resume) may have run before,
    // though: its outcome stays unknown; any other did not run.
    ToolOutcome o{.call_id = inv.call.id, .is_error = true, .node = inv.node};
    if (!inv.recovering.empty()) {
      o.output = inv.recovering + " (The tools node " + inv.node + " that had it is not connected: " + why + ".)";
      o.interrupted = true;
    } else {
      o.output = "The call was not run: the tools node " + inv.node + " is not connected: " + why;
    }
    rp.deliver(std::move(o));
    return;
  }
  const uint64_t id = ++rs.next_id;
  const uint64_t deadline_ms =
      inv.timeout_ms > 0 ? inv.timeout_ms + kToolGraceMs + rs.options.deadline_margin_ms : kMaxRemoteCallMs;
  rs.in_flight[id] = InFlight{.node = inv.node,
                              .call_id = inv.call.id,
                              .session = inv.session_id,
                              .tool = inv.call.name,
                              .sent = Clock::now(),
                              .rp = std::move(rp)};
  rs.options.directory->sent(inv.node);
  const std::string node = inv.node;
  const std::string call_id = inv.call.id;
  // A reply that comes after the call was answered (its node was declared
  // lost first) finds no entry and is dropped; over CAF a lost link never
  // delivers one, since a reconnection is a new link.
  self->request(link->handle, std::chrono::milliseconds(deadline_ms), std::move(inv))
      .then([self, id](ToolOutcome& o) { finish(self, id, std::move(o)); },
            [self, id, node, call_id, deadline_ms](caf::error& e) {
              if (e == caf::sec::request_timeout) {
                // Up, but silent past the deadline: the call may still be running there.
                return finish(self, id,
                              ToolOutcome{.call_id = call_id,
                                          .output = "The tools node " + node + " gave no answer within " +
                                                    std::to_string(deadline_ms) +
                                                    " ms; the call may still be running there.",
                                          .is_error = true,
                                          .timed_out = true});
              }
              finish(self, id,
                     ToolOutcome{.call_id = call_id,
                                 .output = "the tools node " + node + " failed the call: " + caf::to_string(e),
                                 .is_error = true,
                                 .node_lost = true});
            });
}

caf::behavior tool_router(RouterSelf self, ToolSupervisorActor local, ToolRouterOptions options) {
  auto& st = self->state;
  st.local = std::move(local);
  st.options = std::move(options);
  using Link = NodeLinks<ToolNodeActor>::Link;
  st.links.start(
      self, st.options.directory->routes(), st.options.reconnect_ms,
      {.spec =
           [self](const Link& link) {
             return NodeConnect{.insecure = self->state.options.insecure,
                                .timeout_ms = self->state.options.connect_timeout_ms,
                                .role = "tools",
                                .interface = tool_node_interface(self->system()),
                                .check = [wanted = link.route.tools](const NodeHello& hello) {
                                  std::string missing;
                                  for (const auto& t : wanted) {
                                    if (t.empty() || t.back() == '*') continue;
                                    if (std::find(hello.tools.begin(), hello.tools.end(), t) == hello.tools.end()) {
                                      missing += (missing.empty() ? "" : ", ") + t;
                                    }
                                  }
                                  return missing.empty() ? std::string()
                                                         : "the node does not run " + missing +
                                                               " (it runs what its own config enables)";
                                }};
           },
       .up =
           [self](Link& link, const NodeHello& hello) {
             self->state.options.directory->set_up(link.route.name, hello.node_id);
             self->state.mcp_tools[link.route.name] = bounded_mcp_tools(link.route.name, hello.tool_specs);
             lib_log().info("tools node {} ({}) is up: {} tools, ledger {} with {} calls", link.route.name,
                            link.route.address, hello.tools.size(), hello.node_id, hello.ledger_calls);
             release_waiting(self, link.route.name);
           },
       .failed =
           [self](Link& link, const std::string& why, bool changed) {
             self->state.options.directory->set_down(link.route.name, why);
             // Said once, not at every attempt while it stays down.
             if (changed) lib_log().warn("tools node {} ({}) is down: {}", link.route.name, link.route.address, why);
             release_waiting(self, link.route.name);
           },
       .lost = [self](Link& link,
                      const std::string& why) { node_lost(self, link.route.name, link.route.address, why); }});
  self->set_down_handler([self](caf::down_msg& dm) { self->state.links.on_down(dm); });
  return {
      [self](ToolInvocation& inv) -> caf::response_promise {
        auto rp = self->make_response_promise();
        if (inv.node.empty()) {
          send_call(self, std::move(inv), rp);  // the local supervisor checks the faults
          return rp;
        }
        Fault before = check_fault(self->state.options.faults.get(),
                                   FaultSite{.point = FaultPoint::kToolBeforeExec,
                                             .session = inv.session_id,
                                             .name = inv.call.name});
        if (before.action == FaultAction::kError) {
          ToolOutcome o{.call_id = inv.call.id,
                        .output = injected_tool_failure(inv.call.name, before, false),
                        .is_error = true,
                        .node = inv.node};
          o.faults.push_back(fault_note(FaultPoint::kToolBeforeExec, before));
          rp.deliver(std::move(o));
        } else if (before.action == FaultAction::kHang) {
          self->state.hung.push_back(rp);
        } else if (before.action == FaultAction::kDelay) {
          const uint64_t token = ++self->state.next_id;
          self->state.held[token] = Held{.invocation = std::move(inv), .rp = rp};
          self->delayed_send(self, std::chrono::milliseconds(before.delay_ms), release_atom::value, token);
        } else {
          send_call(self, std::move(inv), rp);
        }
        return rp;
      },
      [self](release_atom, uint64_t token) {
        auto it = self->state.held.find(token);
        if (it == self->state.held.end()) return;
        Held h = std::move(it->second);
        self->state.held.erase(it);
        if (h.is_outcome) {
          h.rp.deliver(std::move(h.outcome));
        } else {
          send_call(self, std::move(h.invocation), std::move(h.rp));
        }
      },
      [self](cancel_atom, const std::string& session) {
        self->send(self->state.local, cancel_atom::value, session);
        for (auto& [name, link] : self->state.links.all()) {
          if (link.handle) self->send(link.handle, cancel_atom::value, session);
        }
      },
      [self](reconnect_atom, const std::string& name) { self->state.links.connect(name); },
      [self](node_tools_atom) {
        std::vector<ToolSpec> out;
        std::set<std::string> seen;
        for (auto& [name, link] : self->state.links.all()) {
          if (!link.handle) continue;
          for (const auto& spec : self->state.mcp_tools[name]) {
            if (seen.insert(spec.name).second) out.push_back(spec);
          }
        }
        return out;
      },
      // Answered once every node has been tried once (up or not).
      [self](ready_atom) { return self->state.links.when_all_tried(); },
  };
}

}  // namespace

caf::actor spawn_tool_router(caf::actor_system& system, ToolSupervisorActor local, ToolRouterOptions options) {
  return system.spawn(tool_router, std::move(local), std::move(options));
}

}  // namespace carapace
