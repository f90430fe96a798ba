#include "actors/provider/remote/remote_provider.h"

#include <caf/all.hpp>

#include <chrono>
#include <future>
#include <map>
#include <mutex>

#include "actors/node/node_links.h"
#include "actors/tool/remote/node_protocol.h"
#include "base/clock.h"
#include "base/lib_log.h"

namespace carapace {

// The attempts under way: each one's sinks, shared between the caller's
// start() and the router, which answers them.
struct RemoteProvider::Calls {
  struct Entry {
    uint64_t delta_bytes = 0;  // streamed so far: pieces past max_reply_bytes are dropped
    DeltaSink on_delta;
    ReplySink done;
  };
  std::mutex mu;
  uint64_t max_reply_bytes = 0;
  uint64_t next_id = 0;
  std::map<uint64_t, Entry> entries;

  void delta(uint64_t id, const StreamDelta& d) {
    DeltaSink sink;
    {
      std::lock_guard lock(mu);
      auto it = entries.find(id);
      if (it == entries.end()) return;  // answered already: a late piece
      it->second.delta_bytes += d.text.size() + d.args_fragment.size() + d.tool_name.size() + d.tool_id.size();
      if (it->second.delta_bytes > max_reply_bytes) return;  // the reply will be refused too
      sink = it->second.on_delta;
    }
    if (sink) sink(d);
  }

  void finish(uint64_t id, ProviderReply reply) {
    ReplySink done;
    {
      std::lock_guard lock(mu);
      auto it = entries.find(id);
      if (it == entries.end()) return;
      done = std::move(it->second.done);
      entries.erase(it);
    }
    if (done) done(std::move(reply));
  }
};

namespace {

using ready_atom = caf::atom_constant<caf::atom("ready")>;
using Clock = std::chrono::steady_clock;

struct Attempt {
  std::string node;
  Clock::time_point sent;
  caf::actor sink;
};

struct ProviderRouterState {
  ProviderRouterState() = default;
  RemoteProviderOptions options;
  std::shared_ptr<RemoteProvider::Calls> calls;
  std::shared_ptr<NodeDirectory> directory;  // up or down, attempts in flight (states() reads it)
  std::string render_digest;
  NodeLinks<ProviderNodeActor> links;
  std::map<uint64_t, Attempt> attempts;
  std::vector<std::pair<uint64_t, ProviderRequest>> waiting;  // came before every node was tried
  static inline const char* name = "carapace.provider_router";
};

using ProviderRouterSelf = caf::stateful_actor<ProviderRouterState>*;

void dispatch(ProviderRouterSelf self, uint64_t id, ProviderRequest request);

ProviderReply transport_failure(std::string why) {
  ProviderReply r;
  r.failure = ProviderFailure{.error = std::move(why), .transport = true};
  return r;
}

void finish(ProviderRouterSelf self, uint64_t id, ProviderReply reply) {
  auto it = self->state.attempts.find(id);
  if (it == self->state.attempts.end()) return;  // answered already (the node was lost first)
  self->state.directory->answered(it->second.node, false);
  // The node's body store and fault notes are its own; the host has neither.
  reply.body_ref.clear();
  reply.faults.clear();
  // What a node may make this host keep: its own provider settings' bounds.
  const RemoteProviderOptions& o = self->state.options;
  uint64_t bytes = reply.response.text.size() + reply.failure.error.size();
  for (const auto& c : reply.response.tool_calls) bytes += c.id.size() + c.name.size() + c.args.text.size();
  if (bytes > o.max_reply_bytes || reply.response.tool_calls.size() > o.max_tool_calls) {
    reply = transport_failure("the provider node " + it->second.node + " sent a reply of " + std::to_string(bytes) +
                              " bytes and " + std::to_string(reply.response.tool_calls.size()) +
                              " tool calls, over this host's provider.max_response_bytes (" +
                              std::to_string(o.max_reply_bytes) + ") or max_tool_calls (" +
                              std::to_string(o.max_tool_calls) + ")");
  }
  self->send_exit(it->second.sink, caf::exit_reason::user_shutdown);  // "normal" would be ignored
  self->state.attempts.erase(it);
  self->state.calls->finish(id, std::move(reply));
}

// The attempts in flight on a node just lost fail as transport errors.
void node_lost(ProviderRouterSelf self, const std::string& name, const std::string& address,
               const std::string& why) {
  auto& st = self->state;
  st.directory->set_down(name, "lost: " + why);
  std::vector<std::pair<uint64_t, uint64_t>> lost;  // id, ms in
  for (const auto& [id, a] : st.attempts) {
    if (a.node == name) lost.emplace_back(id, ms_since(a.sent));
  }
  lib_log().warn("provider node {} ({}) was lost ({}); {} attempt(s) in flight", name, address, why, lost.size());
  for (const auto& [id, ms] : lost) {
    finish(self, id,
           transport_failure("the provider node " + name + " (" + address + ") was lost " + std::to_string(ms) +
                             " ms into the attempt: " + why));
  }
}

// Every node had its first try: the requests that waited for it go.
void all_tried(ProviderRouterSelf self) {
  auto& st = self->state;
  auto waiting = std::move(st.waiting);
  st.waiting.clear();
  for (auto& [id, request] : waiting) dispatch(self, id, std::move(request));
}

void dispatch(ProviderRouterSelf self, uint64_t id, ProviderRequest request) {
  auto& st = self->state;
  NodeLinks<ProviderNodeActor>::Link* best = nullptr;
  uint64_t best_in_flight = 0;
  std::string down;
  for (const auto& n : st.directory->states()) {
    auto* link_ptr = st.links.find(n.route.name);
    if (link_ptr == nullptr) continue;
    auto& link = *link_ptr;
    if (link.handle) {
      if (best == nullptr || n.in_flight < best_in_flight) {
        best = &link;
        best_in_flight = n.in_flight;
      }
      continue;
    }
    down += (down.empty() ? "" : "; ") + n.route.name + " (" + n.route.address + "): " +
            (link.last_failure.empty() ? "connecting" : link.last_failure);
  }
  if (best == nullptr) {
    if (!st.links.all_tried()) {
      st.waiting.emplace_back(id, std::move(request));
      return;
    }
    st.calls->finish(id, transport_failure("no provider node is up: " + down));
    return;
  }
  auto calls = st.calls;
  auto sink = self->spawn([calls, id]() -> DeltaSinkActor::behavior_type {
    return {[calls, id](const StreamDelta& d) { calls->delta(id, d); }};
  });
  const std::string node = best->route.name;
  st.directory->sent(node);
  st.attempts[id] = Attempt{.node = node, .sent = Clock::now(), .sink = caf::actor_cast<caf::actor>(sink)};
  const uint64_t deadline_ms = st.options.attempt_deadline_ms;
  self->request(best->handle, std::chrono::milliseconds(deadline_ms), std::move(request), sink)
      .then([self, id](ProviderReply& r) { finish(self, id, std::move(r)); },
            [self, id, node, deadline_ms](caf::error& e) {
              finish(self, id,
                     transport_failure(e == caf::sec::request_timeout
                                           ? "the provider node " + node + " gave no answer within " +
                                                 std::to_string(deadline_ms) + " ms"
                                           : "the provider node " + node + " failed the attempt: " +
                                                 caf::to_string(e)));
            });
}

caf::behavior provider_router(ProviderRouterSelf self, RemoteProviderOptions options,
                              std::shared_ptr<RemoteProvider::Calls> calls,
                              std::shared_ptr<NodeDirectory> directory) {
  auto& st = self->state;
  st.directory = std::move(directory);
  st.options = std::move(options);
  st.calls = std::move(calls);
  st.render_digest = probe_render_digest(
      [renderer = st.options.renderer](const ProviderRequest& r) { return renderer->render_request(r); });
  using Link = NodeLinks<ProviderNodeActor>::Link;
  st.links.start(
      self, st.options.nodes, st.options.reconnect_ms,
      {.spec =
           [self](const Link&) {
             auto& o = self->state.options;
             return NodeConnect{
                 .insecure = o.insecure,
                 .timeout_ms = o.connect_timeout_ms,
                 .role = "provider",
                 .interface = provider_node_interface(self->system()),
                 .check = [provider = o.renderer->name(), digest = self->state.render_digest](const NodeHello& hello) {
                   if (hello.provider != provider) {
                     return "the node runs the " + hello.provider + " provider; this host's config names " + provider;
                   }
                   if (hello.render_digest != digest) {
                     return std::string(
                         "the node renders requests differently from this host's provider settings (max_tokens, "
                         "temperature, stream, cache, or another version): make both configs' provider sections the "
                         "same, keys apart");
                   }
                   return std::string();
                 }};
           },
       .up =
           [self](Link& link, const NodeHello& hello) {
             self->state.directory->set_up(link.route.name, hello.node_id);
             lib_log().info("provider node {} ({}) is up: {}", link.route.name, link.route.address, hello.provider);
           },
       .failed =
           [self](Link& link, const std::string& why, bool changed) {
             self->state.directory->set_down(link.route.name, why);
             if (changed) lib_log().warn("provider node {} ({}) is down: {}", link.route.name, link.route.address, why);
           },
       .lost = [self](Link& link,
                      const std::string& why) { node_lost(self, link.route.name, link.route.address, why); },
       .all_tried = [self] { all_tried(self); }});
  self->set_down_handler([self](caf::down_msg& dm) { self->state.links.on_down(dm); });
  return {
      [self](start_atom, uint64_t id, ProviderRequest& request) { dispatch(self, id, std::move(request)); },
      [self](cancel_atom, uint64_t id) {
        auto it = self->state.attempts.find(id);
        if (it == self->state.attempts.end()) {
          self->state.calls->finish(id, transport_failure("cancelled"));
          return;
        }
        finish(self, id, transport_failure("cancelled"));
      },
      [self](reconnect_atom, const std::string& name) { self->state.links.connect(name); },
      [self](ready_atom) { return self->state.links.when_all_tried(); },
  };
}

}  // namespace

RemoteProvider::RemoteProvider(caf::actor_system& system, RemoteProviderOptions options)
    : system_(system),
      options_(std::move(options)),
      calls_(std::make_shared<Calls>()),
      directory_(std::make_shared<NodeDirectory>(options_.nodes, NodeFallback::kRefuse)) {
  calls_->max_reply_bytes = options_.max_reply_bytes;
  router_ = system_.spawn(provider_router, options_, calls_, directory_);
}

RemoteProvider::~RemoteProvider() { shutdown(); }

void RemoteProvider::shutdown() {
  if (router_) {
    caf::anon_send_exit(router_, caf::exit_reason::user_shutdown);
    router_ = nullptr;
  }
  // Whoever still waits is answered.
  std::map<uint64_t, Calls::Entry> left;
  {
    std::lock_guard lock(calls_->mu);
    left.swap(calls_->entries);
  }
  for (auto& [id, e] : left) {
    if (e.done) e.done(transport_failure("cancelled: the runtime is shutting down"));
  }
}

std::string RemoteProvider::name() const { return options_.renderer->name(); }

std::string RemoteProvider::render_request(const ProviderRequest& request) const {
  return options_.renderer->render_request(request);
}

uint64_t RemoteProvider::start(const ProviderRequest& request, DeltaSink on_delta, ReplySink done) {
  uint64_t id;
  {
    std::lock_guard lock(calls_->mu);
    id = ++calls_->next_id;
    calls_->entries[id] = Calls::Entry{.on_delta = std::move(on_delta), .done = std::move(done)};
  }
  if (!router_) {
    calls_->finish(id, transport_failure("cancelled: the runtime is shutting down"));
    return id;
  }
  caf::anon_send(router_, start_atom::value, id, request);
  return id;
}

void RemoteProvider::cancel(uint64_t id) {
  if (router_) caf::anon_send(router_, cancel_atom::value, id);
}

ProviderReply RemoteProvider::call(const ProviderRequest& request, const DeltaSink& on_delta) {
  auto promise = std::make_shared<std::promise<ProviderReply>>();
  auto answer = promise->get_future();
  start(request, on_delta, [promise](ProviderReply r) { promise->set_value(std::move(r)); });
  return answer.get();
}

void RemoteProvider::wait_ready(uint64_t ms) {
  if (!router_) return;
  caf::scoped_actor self{system_};
  self->request(router_, std::chrono::milliseconds(ms), ready_atom::value).receive([](bool) {}, [](caf::error&) {});
}

std::vector<NodeState> RemoteProvider::states() const { return directory_->states(); }

}  // namespace carapace
