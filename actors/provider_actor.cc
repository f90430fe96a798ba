#include "actors/provider_actor.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <unordered_map>

namespace carapace {
namespace {

using ProviderWorkerActor = ProviderActor::extend<caf::reacts_to<deliver_atom, uint64_t>>;

// Calls a blocking provider once, on its own thread, then quits.
ProviderActor::behavior_type provider_call(ProviderActor::pointer self, std::shared_ptr<Provider> provider) {
  return {[=](const ProviderRequest& request, const DeltaSinkActor& sink) -> ProviderReply {
    auto start = std::chrono::steady_clock::now();
    DeltaSink on_delta;
    if (sink) on_delta = [self, sink](const StreamDelta& d) { self->send(sink, d); };
    ProviderReply reply = provider->call(request, on_delta);
    if (reply.latency_ms == 0) {
      reply.latency_ms = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
              .count());
    }
    self->quit();
    return reply;
  }};
}

struct WorkerState {
  WorkerState() = default;
  struct Held {
    caf::typed_response_promise<ProviderReply> promise;
    ProviderReply reply;
  };
  uint64_t next_token = 0;
  std::unordered_map<uint64_t, Held> held;  // replies waiting out their simulated latency
};

ProviderWorkerActor::behavior_type provider_worker(ProviderWorkerActor::stateful_pointer<WorkerState> self,
                                                   std::shared_ptr<Provider> provider) {
  return {
      [=](const ProviderRequest& request,
          const DeltaSinkActor& sink) -> caf::typed_response_promise<ProviderReply> {
        auto promise = self->make_response_promise<ProviderReply>();
        if (provider->blocking()) {
          auto helper = self->spawn<caf::detached>(provider_call, provider);
          self->request(helper, caf::infinite, request, sink)
              .then([promise](ProviderReply reply) mutable { promise.deliver(std::move(reply)); },
                    [promise](caf::error& e) mutable {
                      ProviderReply failed;
                      failed.failure = ProviderFailure{.error = "provider call failed: " + caf::to_string(e),
                                                       .transport = true};
                      promise.deliver(std::move(failed));
                    });
          return promise;
        }
        DeltaSink on_delta;
        if (sink) on_delta = [self, sink](const StreamDelta& d) { self->send(sink, d); };
        ProviderReply reply = provider->call(request, on_delta);
        if (reply.latency_ms == 0) {
          promise.deliver(std::move(reply));
          return promise;
        }
        uint64_t token = ++self->state.next_token;
        auto latency = std::chrono::milliseconds(reply.latency_ms);
        self->state.held.emplace(token, WorkerState::Held{promise, std::move(reply)});
        self->delayed_send(self, latency, deliver_atom::value, token);
        return promise;
      },
      [=](deliver_atom, uint64_t token) {
        auto it = self->state.held.find(token);
        if (it == self->state.held.end()) return;
        it->second.promise.deliver(std::move(it->second.reply));
        self->state.held.erase(it);
      },
  };
}

struct SupervisorState {
  SupervisorState() = default;
  std::shared_ptr<Provider> provider;
  ProviderActor worker;
  uint64_t next_id = 0;
  uint64_t restarts = 0;
  std::unordered_map<uint64_t, caf::typed_response_promise<ProviderReply>> in_flight;

  void finish(uint64_t id, ProviderReply reply) {
    auto it = in_flight.find(id);
    if (it == in_flight.end()) return;  // already answered (worker died)
    it->second.deliver(std::move(reply));
    in_flight.erase(it);
  }
};

ProviderReply crashed_reply(const std::string& why) {
  ProviderReply r;
  r.failure = ProviderFailure{.error = "the provider actor stopped (" + why + "); it was restarted",
                              .transport = true};
  return r;
}

void start_worker(ProviderSupervisorActor::stateful_pointer<SupervisorState> self) {
  auto worker = self->spawn(provider_worker, self->state.provider);
  self->state.worker = caf::actor_cast<ProviderActor>(worker);
  self->monitor(worker);
}

ProviderSupervisorActor::behavior_type provider_supervisor(
    ProviderSupervisorActor::stateful_pointer<SupervisorState> self, std::shared_ptr<Provider> provider) {
  self->state.provider = std::move(provider);
  start_worker(self);
  self->set_down_handler([=](const caf::down_msg& down) {
    if (down.source != self->state.worker.address()) return;
    std::string why = caf::to_string(down.reason);
    ++self->state.restarts;
    spdlog::warn("provider actor ({}) stopped: {}; restarting it (restart {})", self->state.provider->name(),
                 why, self->state.restarts);
    auto in_flight = std::move(self->state.in_flight);
    self->state.in_flight.clear();
    for (auto& [id, promise] : in_flight) promise.deliver(crashed_reply(why));
    start_worker(self);
  });
  return {
      [=](ProviderRequest& request, DeltaSinkActor& sink) -> caf::typed_response_promise<ProviderReply> {
        auto promise = self->make_response_promise<ProviderReply>();
        uint64_t id = ++self->state.next_id;
        self->state.in_flight.emplace(id, promise);
        self->request(self->state.worker, caf::infinite, std::move(request), std::move(sink))
            .then([=](ProviderReply reply) { self->state.finish(id, std::move(reply)); },
                  [=](caf::error& e) { self->state.finish(id, crashed_reply(caf::to_string(e))); });
        return promise;
      },
      [=](worker_atom) -> ProviderActor { return self->state.worker; },
  };
}

}  // namespace

ProviderSupervisorActor spawn_provider_supervisor(caf::actor_system& system,
                                                  std::shared_ptr<Provider> provider) {
  return system.spawn(provider_supervisor, std::move(provider));
}

}  // namespace carapace
