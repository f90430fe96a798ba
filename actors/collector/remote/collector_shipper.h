// The session host's side of collector nodes (docs/scale-out.md): sends
// every session's events to each collector node configured, which keeps a
// copy of the log and builds the spans there.
//
// The log is the queue. Events come from the runtime's observer and are
// sent from memory while they fit (`max_buffered_events`); anything else —
// a node that was down, a session resumed in a new process, events past the
// buffer — is read back from the host's log, from where the node's copy
// ends (each answer says where). So a node that was down, restarted or
// wiped catches up on its own, and nothing is sent twice into a copy: the
// node skips what it holds. Observability never holds a session up: offer()
// only queues, and a node down costs nothing but the catching up later.
//
// Sessions still unshipped when the runtime closes (a node down, or events
// recorded after the actors stopped) are named in `pending_path`, and the
// next runtime of this home sends them first.
//
// Thread-safe: offer() from any thread.
#pragma once

#include <caf/actor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/tool/remote/node_directory.h"
#include "events/events.h"

namespace caf {
class actor_system;
}

namespace carapace {

class EventLog;

struct CollectorShipperOptions {
  std::vector<NodeRoute> nodes;  // role "collector"
  bool insecure = false;         // plain TCP (loopback only)
  uint64_t connect_timeout_ms = 5000;
  uint64_t reconnect_ms = 1000;
  uint64_t request_deadline_ms = 30'000;  // one shipment's answer
  EventLog* log = nullptr;                // the host's; outlives the shipper
  size_t max_events_per_shipment = 512;
  // How long a new event waits for the ones that follow, so that they go
  // in one shipment (a turn's events come within a few milliseconds).
  uint64_t linger_ms = 5;
  size_t max_buffered_events = 16'384;  // in memory, all sessions together
  std::string pending_path;             // "": none kept
};

// One collector node as the shipper sees it.
struct ShipperNodeState {
  NodeState node;
  uint64_t events_acknowledged = 0;        // landed in its copy from this shipper
  std::vector<std::string> refused;        // "session: why"
};

class CollectorShipper {
 public:
  // Starts connecting to every node, and sends the pending sessions.
  CollectorShipper(caf::actor_system& system, CollectorShipperOptions options);
  ~CollectorShipper();

  CollectorShipper(const CollectorShipper&) = delete;
  CollectorShipper& operator=(const CollectorShipper&) = delete;

  void offer(const std::string& session, const Event& event);

  // Returns once every node that is up holds everything offered (true), or
  // after `ms`, or at once when no node is up (false).
  bool flush(uint64_t ms);

  // flush(ms) when a node is up, then stops; call it while the actor system
  // lives. write_pending() afterwards, once the log has everything.
  void shutdown(uint64_t flush_ms);

  // Names in `pending_path` every session whose log goes past what some
  // node holds (or removes the file when there is none). Returns how many.
  size_t write_pending();

  std::vector<ShipperNodeState> states() const;

  struct Shared;

 private:
  caf::actor_system& system_;
  CollectorShipperOptions options_;
  std::shared_ptr<Shared> shared_;
  caf::actor actor_;
};

}  // namespace carapace
