#include "actors/collector/remote/collector_node.h"

#include <map>

#include "actors/collector/collector.h"
#include "base/lib_log.h"
#include "base/version.h"
#include "events/fold.h"
#include "events/payload.h"
#include "storage/event_log.h"
#include "storage/keys.h"

namespace carapace {
namespace {

// One session's copy as far as it landed here, with its fold.
struct Copy {
  std::unique_ptr<Folder> folder;
  std::string anchor;
  uint64_t last = 0;
  SessionMeta meta;
  bool has_meta = false;
  uint64_t used = 0;  // for eviction: the oldest use goes first
};

struct CollectorNodeState {
  CollectorNodeState() = default;
  CollectorNodeOptions options;
  NodeHello hello;
  std::map<std::string, Copy> copies;
  uint64_t clock = 0;
  static inline const char* name = "carapace.collector_node";
};

using Self = CollectorNodeActor::stateful_pointer<CollectorNodeState>;

ShipmentAck refuse(const std::string& session, const std::string& why) {
  lib_log().warn("collector node: session {} refused: {}", session, why);
  return ShipmentAck{.error = why};
}

// The session's copy, read and folded from the log when it is not in memory.
Status load(CollectorNodeState& st, const std::string& session, Copy** out) {
  auto it = st.copies.find(session);
  if (it == st.copies.end()) {
    if (st.copies.size() >= st.options.max_sessions) {
      auto oldest = st.copies.begin();
      for (auto i = st.copies.begin(); i != st.copies.end(); ++i) {
        if (i->second.used < oldest->second.used) oldest = i;
      }
      st.copies.erase(oldest);
    }
    Copy c;
    c.folder = std::make_unique<Folder>(Folder::Options{.verify_hashes = true});
    CARAPACE_RETURN_IF_ERROR(st.options.log->last_seq(session, &c.last));
    if (c.last > 0) {
      std::vector<Event> events;
      CARAPACE_RETURN_IF_ERROR(st.options.log->read(session, 1, c.last, &events));
      if (events.empty() || events.front().seq != 1) return Status::corruption("the copy does not start at seq 1");
      c.anchor = anchor_digest(events.front());
      for (auto& e : events) CARAPACE_RETURN_IF_ERROR(c.folder->add(std::move(e)));
      Status m = st.options.log->get_meta(session, &c.meta);
      if (m.ok()) {
        c.has_meta = true;
      } else if (!m.is_not_found()) {
        return m;
      }
    }
    it = st.copies.emplace(session, std::move(c)).first;
  }
  it->second.used = ++st.clock;
  *out = &it->second;
  return Status();
}

ShipmentAck receive(CollectorNodeState& st, EventShipment& shipment) {
  const std::string& session = shipment.session_id;
  if (Status s = keys::validate_session_id(session); !s.ok()) return refuse(session, s.message());
  const CollectorNodeOptions& o = st.options;
  if (shipment.events.size() > o.max_events) {
    return refuse(session, "a shipment of " + std::to_string(shipment.events.size()) + " events; at most " +
                               std::to_string(o.max_events));
  }
  size_t bytes = 0;
  std::string payload;
  for (const Event& e : shipment.events) {
    payload.clear();
    encode_payload(e.body, payload);
    bytes += payload.size();
  }
  if (bytes > o.max_bytes) {
    return refuse(session, "a shipment of " + std::to_string(bytes) + " bytes; at most " + std::to_string(o.max_bytes));
  }
  Copy* copy = nullptr;
  if (Status s = load(st, session, &copy); !s.ok()) {
    st.copies.erase(session);
    return refuse(session, "its copy here cannot be read: " + s.to_string());
  }
  if (shipment.events.empty()) return ShipmentAck{.have_seq = copy->last};  // where do you stand?
  if (shipment.anchor.empty()) return refuse(session, "the shipment names no first event (anchor)");
  if (copy->last > 0 && shipment.anchor != copy->anchor) {
    return refuse(session, "its first event differs from the one of the session this collector holds under that "
                           "id (two hosts with one session id, or a home that was wiped): the copy is kept as it is");
  }
  std::vector<Event> fresh;
  for (auto& e : shipment.events) {
    if (e.seq > copy->last) fresh.push_back(std::move(e));
  }
  if (fresh.empty() || fresh.front().seq != copy->last + 1) return ShipmentAck{.have_seq = copy->last};
  for (size_t i = 1; i < fresh.size(); ++i) {
    if (fresh[i].seq != fresh[i - 1].seq + 1) {
      return refuse(session, "its events skip from seq " + std::to_string(fresh[i - 1].seq) + " to " +
                                 std::to_string(fresh[i].seq));
    }
  }
  if (copy->last == 0 && anchor_digest(fresh.front()) != shipment.anchor) {
    return refuse(session, "its first event does not match the shipment's anchor");
  }
  // The fold checks each turn.committed's state hash: a copy that would not
  // verify is not written.
  Folder& folder = *copy->folder;
  std::vector<CheckpointEntry> checkpoints;
  std::vector<Event> landed = fresh;  // the fold takes its own
  int64_t committed_ts = 0;
  for (Event& e : fresh) {
    if (const auto* c = get_if<TurnCommitted>(e)) {
      checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c->turn, .state_hash = c->state_hash});
      committed_ts = e.ts_us;
    }
    const uint64_t seq = e.seq;
    if (Status s = folder.add(std::move(e)); !s.ok()) {
      st.copies.erase(session);
      return refuse(session, "its events do not verify at seq " + std::to_string(seq) + ": " + s.message());
    }
  }
  SessionMeta meta = meta_from_state(session, folder.committed(),
                                     committed_ts != 0     ? committed_ts
                                     : copy->has_meta      ? copy->meta.updated_us
                                                           : landed.front().ts_us,
                                     copy->has_meta ? &copy->meta : nullptr);
  meta.configured_seq = std::max(meta.configured_seq, last_configured_seq(landed));
  meta.imported_seq = landed.back().seq;  // a copy: its configuration never runs here
  Status s = o.log->append(AppendRequest{.session = session,
                                         .events = landed,
                                         .durability = Durability::kSynced,
                                         .meta = &meta,
                                         .checkpoints = checkpoints});
  if (!s.ok()) {
    st.copies.erase(session);
    return refuse(session, "it could not be written here: " + s.to_string());
  }
  if (copy->last == 0) copy->anchor = shipment.anchor;
  copy->last = landed.back().seq;
  copy->meta = meta;
  copy->has_meta = true;
  if (o.collector) {
    for (const Event& e : landed) o.collector->offer(session, e);
  }
  return ShipmentAck{.have_seq = copy->last};
}

CollectorNodeActor::behavior_type collector_node(Self self, CollectorNodeOptions options, NodeHello hello) {
  self->state.options = std::move(options);
  self->state.hello = std::move(hello);
  return {
      [self](EventShipment& shipment) { return receive(self->state, shipment); },
      [self](hello_atom) { return self->state.hello; },
  };
}

}  // namespace

CollectorNodeActor spawn_collector_node(caf::actor_system& system, CollectorNodeOptions options) {
  NodeHello hello{.node_id = random_node_id(), .name = options.name, .role = "collector", .version = version()};
  // Detached: it writes (synced) on its own thread.
  return system.spawn<caf::detached>(collector_node, std::move(options), std::move(hello));
}

}  // namespace carapace
