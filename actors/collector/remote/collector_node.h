// The actor a collector node publishes (carapace node --role collector,
// docs/scale-out.md): session hosts send it their sessions' events, it
// keeps a copy of each session's log in its own home and builds the spans
// into its own trace store, so that `carapace trace`, `log show`, `serve`
// and `verify` run on the collector's home for the sessions of every host.
//
// What it keeps is exactly the hosts' logs: a shipment must continue the
// session's copy (events the copy holds already are skipped; a shipment
// that starts past its end is answered with where the copy ends, and the
// host sends from there), its events must fold (every turn.committed's
// state hash is checked), and its session must be the one the copy began
// with (the digest of the first event). Each session is marked imported
// (SessionMeta::imported_seq): the collector never runs its configuration.
//
// Bounds: at most `max_events` events and `max_bytes` of payload a
// shipment; at most `max_sessions` sessions' folds in memory (a session
// evicted is folded again from the copy when it comes back).
//
// Heavy: includes CAF. Include it from actor implementation files only.
#pragma once

#include <memory>
#include <string>

#include "actors/tool/remote/node_protocol.h"

namespace carapace {

class Collector;
class EventLog;

struct CollectorNodeOptions {
  std::string name;
  EventLog* log = nullptr;  // the copies; outlives the actor
  std::shared_ptr<Collector> collector;  // folds what lands into spans; may be null
  size_t max_events = 4096;
  size_t max_bytes = 64u << 20;
  size_t max_sessions = 256;
};

CollectorNodeActor spawn_collector_node(caf::actor_system& system, CollectorNodeOptions options);

}  // namespace carapace
