// NodeLinks: the links a session host keeps to the nodes of one role
// (docs/scale-out.md) — the tool router's, the remote provider's and the
// collector shipper's. Each node is connected to (connect_to_node), watched
// with a monitor, and connected to again `reconnect_ms` after a failed
// attempt or a loss; an answer from an attempt since superseded is
// ignored. What each user does when a node comes up, fails or is lost is
// its own (callbacks); the link's own state is here once.
//
// Used from its actor's thread only. The actor forwards its reconnect
// message and its down messages (the handlers below say how).
//
// Heavy: includes CAF. Include it from actor implementation files only.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actors/node/node_link.h"
#include "actors/tool/remote/node_directory.h"
#include "base/status.h"

namespace carapace {

using reconnect_atom = caf::atom_constant<caf::atom("reconnect")>;

template <class Handle>
class NodeLinks {
 public:
  struct Link {
    NodeRoute route;
    std::string host;
    uint16_t port = 0;
    Handle handle;             // set while up
    bool connecting = false;
    bool tried = false;        // the first attempt ended (up or not)
    uint64_t generation = 0;   // of the connection; a stale answer is ignored
    std::string last_failure;  // why it is down ("" while up or never tried)
  };

  struct Callbacks {
    // The connection to make (address, host and port are filled in).
    std::function<NodeConnect(const Link&)> spec;
    std::function<void(Link&, const NodeHello&)> up;
    // An attempt failed (also for an address that does not parse);
    // `changed`: the reason differs from the last one (say it once).
    std::function<void(Link&, const std::string& why, bool changed)> failed;
    // A link that was up closed (`why`: CAF's reason).
    std::function<void(Link&, const std::string& why)> lost;
    // Every node has had its first attempt (may be empty).
    std::function<void()> all_tried;
  };

  // Starts connecting to every node.
  void start(caf::event_based_actor* self, const std::vector<NodeRoute>& routes, uint64_t reconnect_ms,
             Callbacks callbacks) {
    self_ = self;
    reconnect_ms_ = reconnect_ms;
    callbacks_ = std::move(callbacks);
    for (const auto& route : routes) links_[route.name] = Link{.route = route};
    for (auto& [name, link] : links_) {
      if (Status s = parse_node_address(link.route.address, &link.host, &link.port); !s.ok()) {
        link.last_failure = s.message();
        link.tried = true;
        callbacks_.failed(link, s.message(), true);
        continue;
      }
      connect(name);
    }
    if (all_tried()) everyone_tried();
  }

  // The actor's handler for reconnect_atom.
  void connect(const std::string& name) {
    auto it = links_.find(name);
    if (it == links_.end()) return;
    Link& link = it->second;
    if (link.connecting || link.handle || link.port == 0) return;
    link.connecting = true;
    const uint64_t generation = ++link.generation;
    NodeConnect spec = callbacks_.spec(link);
    spec.address = link.route.address;
    spec.host = link.host;
    spec.port = link.port;
    connect_to_node(
        self_, spec,
        [this, name, generation](caf::strong_actor_ptr ptr, const NodeHello& hello) {
          Link& l = links_[name];
          if (generation != l.generation) return;
          l.connecting = false;
          l.handle = caf::actor_cast<Handle>(ptr);
          l.last_failure.clear();
          self_->monitor(l.handle);
          callbacks_.up(l, hello);
          first_attempt_ended(l);
        },
        [this, name, generation](const std::string& why) {
          Link& l = links_[name];
          if (generation != l.generation) return;
          l.connecting = false;
          l.handle = nullptr;
          const bool changed = why != l.last_failure;
          l.last_failure = why;
          callbacks_.failed(l, why, changed);
          first_attempt_ended(l);
          retry_later(name);
        });
  }

  // The actor's down handler: true when `dm` is about one of these links.
  bool on_down(const caf::down_msg& dm) {
    for (auto& [name, link] : links_) {
      if (!link.handle || link.handle.address() != dm.source) continue;
      link.handle = nullptr;
      link.connecting = false;
      ++link.generation;
      const std::string why = caf::to_string(dm.reason);
      link.last_failure = "lost: " + why;
      callbacks_.lost(link, why);
      retry_later(name);
      return true;
    }
    return false;
  }

  // A promise answered (true) once every node has had its first attempt,
  // up or not: at once if that is so already.
  caf::response_promise when_all_tried() {
    caf::response_promise rp = self_->make_response_promise();
    if (all_tried()) {
      rp.deliver(true);
    } else {
      ready_waiters_.push_back(rp);
    }
    return rp;
  }

  bool all_tried() const {
    for (const auto& [name, link] : links_) {
      if (!link.tried) return false;
    }
    return true;
  }

  bool any_up() const {
    for (const auto& [name, link] : links_) {
      if (link.handle) return true;
    }
    return false;
  }

  Link* find(const std::string& name) {
    auto it = links_.find(name);
    return it == links_.end() ? nullptr : &it->second;
  }
  std::map<std::string, Link>& all() { return links_; }

 private:
  void first_attempt_ended(Link& link) {
    if (link.tried) return;
    link.tried = true;
    if (all_tried()) everyone_tried();
  }

  void everyone_tried() {
    for (auto& w : ready_waiters_) w.deliver(true);
    ready_waiters_.clear();
    if (callbacks_.all_tried) callbacks_.all_tried();
  }

  void retry_later(const std::string& name) {
    self_->delayed_send(self_, std::chrono::milliseconds(reconnect_ms_), reconnect_atom::value, name);
  }

  caf::event_based_actor* self_ = nullptr;
  uint64_t reconnect_ms_ = 1000;
  Callbacks callbacks_;
  std::map<std::string, Link> links_;
  std::vector<caf::response_promise> ready_waiters_;
};

}  // namespace carapace
