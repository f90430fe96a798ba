#include "actors/collector/remote/collector_shipper.h"

#include <caf/all.hpp>

#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "actors/node/node_links.h"
#include "actors/tool/remote/node_protocol.h"
#include "base/lib_log.h"
#include "storage/event_log.h"
#include "storage/keys.h"

namespace carapace {

// What the shipper's actor tells the rest: each node's state, and per
// session the least any node (that has not refused it) holds.
struct CollectorShipper::Shared {
  mutable std::mutex mu;
  std::map<std::string, ShipperNodeState> nodes;
  std::map<std::string, uint64_t> low;  // session -> seq every node holds
};

namespace {

using pump_atom = caf::atom_constant<caf::atom("pump")>;

// Sessions remembered once fully shipped, so that a close can tell whether
// the log grew since; past this many, fully shipped ones are forgotten.
constexpr size_t kMaxSessions = 10'000;

// What one node holds, as far as its answers said.
struct HeldBatches {
  std::map<std::string, uint64_t> acked;  // session -> the node's copy ends here (absent: not asked yet)
  std::set<std::string> in_flight;
  std::set<std::string> refused;
};

struct Pending {
  uint64_t offered = 0;       // the highest seq heard of
  std::deque<Event> buffer;   // contiguous events not yet held by every node
  std::string anchor;         // anchor_digest of the session's first event, once read
  bool lingering = false;     // a pump is due in linger_ms
};

struct ShipState {
  ShipState() = default;
  CollectorShipperOptions options;
  std::shared_ptr<CollectorShipper::Shared> shared;
  NodeLinks<CollectorNodeActor> links;
  std::map<std::string, HeldBatches> held;  // per node
  std::map<std::string, Pending> sessions;
  size_t buffered = 0;
  std::vector<caf::response_promise> flush_waiters;
  static inline const char* name = "carapace.collector_shipper";
};

using ShipSelf = caf::stateful_actor<ShipState>*;

void pump(ShipSelf self, const std::string& node, const std::string& session);

// Every node that is up holds everything offered (refused sessions aside).
bool flushed(ShipState& st) {
  for (auto& [name, link] : st.links.all()) {
    if (!link.handle) continue;
    const HeldBatches& h = st.held[name];
    for (const auto& [session, p] : st.sessions) {
      if (h.refused.count(session)) continue;
      auto a = h.acked.find(session);
      if (a == h.acked.end() || a->second < p.offered) return false;
    }
  }
  return true;
}

void answer_flushes(ShipSelf self) {
  auto& st = self->state;
  if (st.flush_waiters.empty()) return;
  const bool up = st.links.any_up();
  if (up && !flushed(st)) return;
  for (auto& w : st.flush_waiters) w.deliver(up);
  st.flush_waiters.clear();
}

// The seq every node holds of `session`, for the buffer and write_pending.
uint64_t low_water(ShipState& st, const std::string& session) {
  uint64_t low = UINT64_MAX;
  for (auto& [name, link] : st.links.all()) {
    const HeldBatches& h = st.held[name];
    if (h.refused.count(session)) continue;
    auto a = h.acked.find(session);
    low = std::min(low, a == h.acked.end() ? 0 : a->second);
  }
  return low;
}

void trim(ShipSelf self, const std::string& session) {
  auto& st = self->state;
  auto it = st.sessions.find(session);
  if (it == st.sessions.end()) return;
  const uint64_t low = low_water(st, session);
  auto& buffer = it->second.buffer;
  while (!buffer.empty() && buffer.front().seq <= low) {
    buffer.pop_front();
    --st.buffered;
  }
  {
    std::lock_guard lock(st.shared->mu);
    st.shared->low[session] = low;
  }
  if (st.sessions.size() > kMaxSessions && buffer.empty() && low >= it->second.offered) {
    st.sessions.erase(it);
    for (auto& [name, h] : st.held) h.acked.erase(session);
    std::lock_guard lock(st.shared->mu);
    st.shared->low.erase(session);
  }
}

void note_state(ShipSelf self, const NodeLinks<CollectorNodeActor>::Link& link) {
  auto& st = self->state;
  std::lock_guard lock(st.shared->mu);
  auto& n = st.shared->nodes[link.route.name];
  n.node.route = link.route;
  n.node.up = static_cast<bool>(link.handle);
  n.node.why_down = link.handle ? "" : link.last_failure.empty() ? "connecting" : link.last_failure;
}

// The anchor of `session` (read from the log once), or "" when it has none.
const std::string& anchor_of(ShipState& st, const std::string& session, Pending& p) {
  if (!p.anchor.empty()) return p.anchor;
  if (!p.buffer.empty() && p.buffer.front().seq == 1) {
    p.anchor = anchor_digest(p.buffer.front());
  } else {
    std::vector<Event> first;
    if (st.options.log->read(session, 1, 1, &first).ok() && !first.empty()) p.anchor = anchor_digest(first.front());
  }
  return p.anchor;
}

void acknowledged(ShipSelf self, const std::string& name, uint64_t generation, const std::string& session,
                  uint64_t sent, const ShipmentAck& ack) {
  auto& st = self->state;
  auto* link = st.links.find(name);
  if (link == nullptr || generation != link->generation) return;  // a late answer from a link since lost
  HeldBatches& h = st.held[name];
  h.in_flight.erase(session);
  if (!ack.error.empty()) {
    h.refused.insert(session);
    lib_log().warn("collector node {} refused session {}: {}", name, session, ack.error);
    std::lock_guard lock(st.shared->mu);
    auto& refused = st.shared->nodes[name].refused;
    if (refused.size() < 100) refused.push_back(session + ": " + ack.error);
  } else {
    uint64_t& acked = h.acked[session];
    if (ack.have_seq > acked && sent > 0) {
      std::lock_guard lock(st.shared->mu);
      st.shared->nodes[name].events_acknowledged += std::min(ack.have_seq - acked, sent);
    }
    acked = ack.have_seq;
    auto& p = st.sessions[session];
    p.offered = std::max(p.offered, ack.have_seq);
  }
  trim(self, session);
  pump(self, name, session);
  answer_flushes(self);
}

// Sends `node` the next piece of `session` it lacks, if it is up and has
// nothing of that session on the way.
void pump(ShipSelf self, const std::string& node, const std::string& session) {
  auto& st = self->state;
  auto* link = st.links.find(node);
  HeldBatches& h = st.held[node];
  if (link == nullptr || !link->handle || h.in_flight.count(session) || h.refused.count(session)) return;
  auto pit = st.sessions.find(session);
  if (pit == st.sessions.end()) return;
  Pending& p = pit->second;
  auto a = h.acked.find(session);
  if (a != h.acked.end() && a->second >= p.offered) return;
  EventShipment shipment{.session_id = session, .anchor = anchor_of(st, session, p)};
  if (a != h.acked.end() || !p.buffer.empty()) {
    const uint64_t from = a != h.acked.end() ? a->second + 1 : p.buffer.front().seq;
    const uint64_t to = std::min(p.offered, from + st.options.max_events_per_shipment - 1);
    if (!p.buffer.empty() && p.buffer.front().seq <= from && p.buffer.back().seq >= from) {
      for (size_t i = from - p.buffer.front().seq; i < p.buffer.size() && p.buffer[i].seq <= to; ++i) {
        shipment.events.push_back(p.buffer[i]);
      }
    } else if (Status s = st.options.log->read(session, from, to, &shipment.events);
               !s.ok() && shipment.events.empty()) {
      // Damage is `carapace verify`'s to report; the node gets what reads.
      h.refused.insert(session);
      lib_log().warn("session {} cannot be sent to collector node {}: {}", session, node, s.to_string());
      answer_flushes(self);
      return;
    }
  }
  // Empty: where does the node's copy end? (Nothing of it in memory here.)
  const uint64_t generation = link->generation;
  const uint64_t sent = shipment.events.size();
  h.in_flight.insert(session);
  self->request(link->handle, std::chrono::milliseconds(st.options.request_deadline_ms), std::move(shipment))
      .then([self, node, generation, session,
             sent](ShipmentAck& ack) { acknowledged(self, node, generation, session, sent, ack); },
            [self, node, generation, session](caf::error& e) {
              auto* l = self->state.links.find(node);
              if (l == nullptr || generation != l->generation) return;
              self->state.held[node].in_flight.erase(session);
              lib_log().info("collector node {}: a shipment of session {} failed ({}); trying again", node, session,
                             caf::to_string(e));
              self->delayed_send(self, std::chrono::milliseconds(self->state.options.reconnect_ms), pump_atom::value,
                                 session);
            });
}

void pump_all_nodes(ShipSelf self, const std::string& session) {
  std::vector<std::string> nodes;
  for (const auto& [name, link] : self->state.links.all()) nodes.push_back(name);
  for (const auto& node : nodes) pump(self, node, session);
}

// A session this shipper now answers for (write_pending names it until
// every node holds its log).
Pending& remember(ShipState& st, const std::string& session) {
  auto [it, added] = st.sessions.try_emplace(session);
  if (added) {
    std::lock_guard lock(st.shared->mu);
    st.shared->low.try_emplace(session, 0);
  }
  return it->second;
}

void offered(ShipSelf self, const std::string& session, Event event) {
  auto& st = self->state;
  Pending& p = remember(st, session);
  if (event.seq > p.offered) p.offered = event.seq;
  const bool contiguous = p.buffer.empty() || p.buffer.back().seq + 1 == event.seq;
  if (contiguous && st.buffered < st.options.max_buffered_events && event.seq > low_water(st, session)) {
    if (event.seq == 1) p.anchor = anchor_digest(event);
    p.buffer.push_back(std::move(event));
    ++st.buffered;
  }
  // A moment's wait gathers the events that follow into the same shipment.
  if (p.lingering) return;
  p.lingering = true;
  self->delayed_send(self, std::chrono::milliseconds(st.options.linger_ms), pump_atom::value, session);
}

caf::behavior shipper(ShipSelf self, CollectorShipperOptions options, std::shared_ptr<CollectorShipper::Shared> shared) {
  auto& st = self->state;
  st.options = std::move(options);
  st.shared = std::move(shared);
  // What the last runtime of this home left unshipped goes first.
  if (!st.options.pending_path.empty()) {
    std::ifstream in(st.options.pending_path);
    std::string id;
    size_t n = 0;
    while (n < kMaxSessions && std::getline(in, id)) {
      if (!keys::validate_session_id(id).ok()) continue;
      uint64_t last = 0;
      if (!st.options.log->last_seq(id, &last).ok() || last == 0) continue;
      remember(st, id).offered = last;
      ++n;
    }
    if (n > 0) lib_log().info("{} session(s) left unshipped by the last run go to the collector nodes first", n);
  }
  using Link = NodeLinks<CollectorNodeActor>::Link;
  st.links.start(
      self, st.options.nodes, st.options.reconnect_ms,
      {.spec =
           [self](const Link&) {
             return NodeConnect{.insecure = self->state.options.insecure,
                                .timeout_ms = self->state.options.connect_timeout_ms,
                                .role = "collector",
                                .interface = collector_node_interface(self->system())};
           },
       .up =
           [self](Link& link, const NodeHello&) {
             const std::string name = link.route.name;
             self->state.held[name].in_flight.clear();
             lib_log().info("collector node {} ({}) is up", name, link.route.address);
             note_state(self, link);
             std::vector<std::string> sessions;
             for (const auto& [session, p] : self->state.sessions) sessions.push_back(session);
             for (const auto& session : sessions) pump(self, name, session);
             answer_flushes(self);
           },
       .failed =
           [self](Link& link, const std::string& why, bool changed) {
             if (changed) {
               lib_log().warn("collector node {} ({}) is down: {} (the sessions' events wait in the log)",
                              link.route.name, link.route.address, why);
             }
             note_state(self, link);
             answer_flushes(self);
           },
       .lost =
           [self](Link& link, const std::string& why) {
             self->state.held[link.route.name].in_flight.clear();
             lib_log().warn("collector node {} ({}) was lost ({}); the sessions' events wait in the log",
                            link.route.name, link.route.address, why);
             note_state(self, link);
             answer_flushes(self);
           }});
  self->set_down_handler([self](caf::down_msg& dm) { self->state.links.on_down(dm); });
  return {
      [self](EventNotice& notice) { offered(self, notice.session_id, std::move(notice.event)); },
      [self](pump_atom, const std::string& session) {
        if (auto it = self->state.sessions.find(session); it != self->state.sessions.end()) {
          it->second.lingering = false;
        }
        pump_all_nodes(self, session);
      },
      [self](reconnect_atom, const std::string& name) { self->state.links.connect(name); },
      [self](flush_atom) -> caf::response_promise {
        auto rp = self->make_response_promise();
        self->state.flush_waiters.push_back(rp);
        answer_flushes(self);
        return rp;
      },
      [self](start_atom) { return self->state.links.when_all_tried(); },  // every node tried once
  };
}

}  // namespace

CollectorShipper::CollectorShipper(caf::actor_system& system, CollectorShipperOptions options)
    : system_(system), options_(std::move(options)), shared_(std::make_shared<Shared>()) {
  actor_ = system_.spawn(shipper, options_, shared_);
}

CollectorShipper::~CollectorShipper() {
  if (actor_) caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
}

void CollectorShipper::offer(const std::string& session, const Event& event) {
  if (actor_) caf::anon_send(actor_, EventNotice{session, event});
}

bool CollectorShipper::flush(uint64_t ms) {
  if (!actor_) return false;
  bool done = false;
  caf::scoped_actor self{system_};
  self->request(actor_, std::chrono::milliseconds(ms), flush_atom::value)
      .receive([&](bool up) { done = up; }, [](caf::error&) {});
  return done;
}

void CollectorShipper::shutdown(uint64_t flush_ms) {
  if (!actor_) return;
  {
    // The first connections had their chance (a short run may end before).
    caf::scoped_actor self{system_};
    self->request(actor_, std::chrono::milliseconds(options_.connect_timeout_ms + 1000), start_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  }
  bool up = false;
  {
    std::lock_guard lock(shared_->mu);
    for (const auto& [name, n] : shared_->nodes) up = up || n.node.up;
  }
  if (up && !flush(flush_ms)) {
    lib_log().warn("the collector nodes did not take every event within {} ms; the rest goes with the next run",
                   flush_ms);
  }
  caf::scoped_actor self{system_};
  self->send_exit(actor_, caf::exit_reason::user_shutdown);
  self->wait_for(actor_);
  actor_ = nullptr;
}

size_t CollectorShipper::write_pending() {
  if (options_.pending_path.empty()) return 0;
  std::map<std::string, uint64_t> low;
  {
    std::lock_guard lock(shared_->mu);
    low = shared_->low;
  }
  std::string text;
  size_t n = 0;
  for (const auto& [session, held] : low) {
    uint64_t last = 0;
    if (!options_.log->last_seq(session, &last).ok() || last <= held) continue;
    text += session + "\n";
    ++n;
  }
  std::error_code ec;
  if (n == 0) {
    std::filesystem::remove(options_.pending_path, ec);
    return 0;
  }
  const std::string tmp = options_.pending_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      lib_log().warn("cannot write {}: {} session(s) not sent to the collector nodes will wait for new events",
                     tmp, n);
      return n;
    }
  }
  std::filesystem::rename(tmp, options_.pending_path, ec);
  if (ec) lib_log().warn("cannot write {}: {}", options_.pending_path, ec.message());
  return n;
}

std::vector<ShipperNodeState> CollectorShipper::states() const {
  std::lock_guard lock(shared_->mu);
  std::vector<ShipperNodeState> out;
  for (const auto& route : options_.nodes) {
    auto it = shared_->nodes.find(route.name);
    if (it != shared_->nodes.end()) out.push_back(it->second);
  }
  return out;
}

}  // namespace carapace
