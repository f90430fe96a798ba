// What a session host and a tools node say to each other over CAF's io
// middleman (docs/scale-out.md): the node's typed interface, its hello, the
// names every message type travels under, and the actor system settings
// both sides need (TLS, heartbeats, the application identifier).
//
// Heavy: includes CAF. Include it from actor implementation files only.
#pragma once

#include <caf/all.hpp>
#include <caf/io/middleman_actor.hpp>

#include <functional>
#include <string>
#include <vector>

#include "actors/caf_types.h"
#include "actors/tool/remote/node_directory.h"
#include "base/status.h"

namespace carapace {

using hello_atom = caf::atom_constant<caf::atom("hello")>;

// The version of what nodes say; a host and a node of different versions
// refuse each other (the application identifier carries it).
inline constexpr const char* kNodeProtocol = "carapace-nodes/1";

// What a node says it is, asked once a connection is up.
struct NodeHello {
  std::string node_id;  // its ledger's id: a node that lost its ledger is another node
  std::string name;     // the name in its certificate (or --name)
  std::string role;     // "tools", "provider" or "collector"
  std::vector<std::string> tools;
  std::string version;
  uint64_t ledger_calls = 0;
  // A provider node's: the provider it runs ("openai", "anthropic"), and the
  // digest of a probe request as it renders it, so that a host whose own
  // provider settings would render requests differently refuses it.
  std::string provider;
  std::string render_digest;
  // A tools node's MCP tools as the model sees them (mcp__SERVER__TOOL), so
  // that a host that has no such server can declare them.
  std::vector<ToolSpec> tool_specs;

  static constexpr auto fields() {
    using H = NodeHello;
    return std::tuple{codec::Field{1, "node_id", &H::node_id}, codec::Field{2, "name", &H::name},
                      codec::Field{3, "role", &H::role},       codec::Field{4, "tools", &H::tools},
                      codec::Field{5, "version", &H::version}, codec::Field{6, "ledger_calls", &H::ledger_calls},
                      codec::Field{7, "provider", &H::provider}, codec::Field{8, "render_digest", &H::render_digest},
                      codec::Field{9, "tool_specs", &H::tool_specs}};
  }
  friend bool operator==(const NodeHello&, const NodeHello&) = default;
};

// A tools node: runs calls (once per call id, docs/scale-out.md), stops a
// session's calls on cancel, says what it is on hello.
using ToolNodeActor = caf::typed_actor<caf::replies_to<ToolInvocation>::with<ToolOutcome>,
                                       caf::reacts_to<cancel_atom, std::string>,
                                       caf::replies_to<hello_atom>::with<NodeHello>>;

// A provider node: answers model calls with the provider and the API key it
// holds, streaming the pieces to the sink the host gives; says what it is
// on hello.
using ProviderNodeActor = caf::typed_actor<caf::replies_to<ProviderRequest, DeltaSinkActor>::with<ProviderReply>,
                                           caf::replies_to<hello_atom>::with<NodeHello>>;

// A piece of one session's log, for a collector node: events with
// contiguous seqs (none: a question, answered with where the node stands).
// `anchor` is the digest of the session's first event (anchor_digest), so
// that a node holding another host's session under the same id refuses it.
struct EventShipment {
  std::string session_id;
  std::string anchor;
  std::vector<Event> events;

  static constexpr auto fields() {
    using S = EventShipment;
    return std::tuple{codec::Field{1, "session_id", &S::session_id}, codec::Field{2, "anchor", &S::anchor},
                      codec::Field{3, "events", &S::events}};
  }
};

// A collector node's answer: its copy of the session's log ends at
// `have_seq` (the host sends from the next one); `error` when it refuses
// the session (the host stops sending it, and says why).
struct ShipmentAck {
  uint64_t have_seq = 0;
  std::string error;

  static constexpr auto fields() {
    using A = ShipmentAck;
    return std::tuple{codec::Field{1, "have_seq", &A::have_seq}, codec::Field{2, "error", &A::error}};
  }
};

// A collector node: keeps a copy of the sessions' logs the hosts send it
// and builds their spans into its trace store; says what it is on hello.
using CollectorNodeActor = caf::typed_actor<caf::replies_to<EventShipment>::with<ShipmentAck>,
                                            caf::replies_to<hello_atom>::with<NodeHello>>;

// A fresh id for a node without a ledger (provider and collector nodes).
std::string random_node_id();

// The digest (hex) that identifies a session's log: of its first event's
// seq, time and payload.
std::string anchor_digest(const Event& first);

// Registers the types that travel, loads the middleman (and the TLS module
// unless insecure), sets the heartbeat, the connection time-out and the
// application identifier, and hands the certificate, key and CA to TLS
// after checking them (a bad file is an error here, not an abort later).
// `common_name` (may be null) receives the certificate's name.
Status configure_node_system(caf::actor_system_config& cfg, const NodeNetOptions& options,
                             std::string* common_name = nullptr);

// Only the type registrations (an embedding program's own system config).
void add_node_message_types(caf::actor_system_config& cfg);

// The middleman actor to connect or publish through: TLS's, or plain
// TCP's when insecure.
caf::io::middleman_actor node_middleman(caf::actor_system& system, bool insecure);

// The interface a tools node must offer, to check a connection against.
std::set<std::string> tool_node_interface(caf::actor_system& system);
std::set<std::string> provider_node_interface(caf::actor_system& system);
std::set<std::string> collector_node_interface(caf::actor_system& system);

// The digest of a fixed probe request as `render` renders it (hex), or ""
// when it renders nothing.
std::string probe_render_digest(const std::function<std::string(const ProviderRequest&)>& render);

// Validates the defaults: heartbeat 50 ms..60 s, time-out > 2 heartbeats.
Status check_node_net_options(const NodeNetOptions& options);

}  // namespace carapace
