#include "actors/provider/provider_actor.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <unordered_map>

namespace carapace {
namespace {

using answer_atom = caf::atom_constant<caf::atom("answer")>;

// deliver: a held reply's simulated latency is over; answer: an asynchronous
// provider's reply, sent from its I/O thread.
using ProviderWorkerActor = ProviderActor::extend<caf::reacts_to<deliver_atom, uint64_t>,
                                                  caf::reacts_to<answer_atom, uint64_t, ProviderReply>>;

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
  std::vector<caf::typed_response_promise<ProviderReply>> hung;  // injected hangs: never answered
  struct Started {
    caf::typed_response_promise<ProviderReply> promise;
    Fault before;
    FaultSite site;
  };
  std::unordered_map<uint64_t, Started> started;  // asynchronous calls under way
};

ProviderFailure injected_failure(const Fault& f) {
  if (f.action == FaultAction::kMalformedStream) {
    return ProviderFailure{.error = "malformed response stream (injected fault)", .transport = true};
  }
  return ProviderFailure{.http_status = f.http_status,
                         .error = f.message.empty() ? "injected fault" : f.message,
                         .transport = f.http_status == 0,
                         .has_retry_after = f.has_retry_after,
                         .retry_after_ms = f.retry_after_ms};
}

// Carries out a provider fault on `reply`; true if the reply must never be sent (hang).
bool apply_fault(const Fault& f, FaultPoint point, ProviderReply* reply) {
  if (!f) return false;
  reply->faults.push_back(fault_note(point, f));
  switch (f.action) {
    case FaultAction::kError:
    case FaultAction::kMalformedStream:
      reply->ok = false;
      reply->response = {};
      reply->failure = injected_failure(f);
      return false;
    case FaultAction::kDelay:
      reply->latency_ms += f.delay_ms;
      return false;
    case FaultAction::kHang:
      return true;
    default:
      return false;
  }
}

// Carries out the faults around an answer: `before` (a delay, which let the
// call go ahead) and whatever provider.after_response says. True if the
// reply must never be sent (hang).
bool faults_around_answer(const Fault& before, FaultSite site, FaultInjector* faults, ProviderReply* reply,
                          bool provider_answered = true) {
  if (provider_answered) reply->answered = true;
  apply_fault(before, FaultPoint::kProviderBeforeRequest, reply);
  site.point = FaultPoint::kProviderAfterResponse;
  return apply_fault(check_fault(faults, site), FaultPoint::kProviderAfterResponse, reply);
}

// Answers `promise` with `reply` after `delay_ms` (virtual time under the
// test scheduler), or never if `hang`.
void respond(ProviderWorkerActor::stateful_pointer<WorkerState> self,
             caf::typed_response_promise<ProviderReply> promise, ProviderReply reply, bool hang,
             uint64_t delay_ms) {
  if (hang) {
    self->state.hung.push_back(std::move(promise));
    return;
  }
  if (delay_ms == 0) {
    promise.deliver(std::move(reply));
    return;
  }
  uint64_t token = ++self->state.next_token;
  self->state.held.emplace(token, WorkerState::Held{std::move(promise), std::move(reply)});
  self->delayed_send(self, std::chrono::milliseconds(delay_ms), deliver_atom::value, token);
}

ProviderWorkerActor::behavior_type provider_worker(ProviderWorkerActor::stateful_pointer<WorkerState> self,
                                                   std::shared_ptr<Provider> provider,
                                                   std::shared_ptr<FaultInjector> faults) {
  return {
      [=](const ProviderRequest& request,
          const DeltaSinkActor& sink) -> caf::typed_response_promise<ProviderReply> {
        auto promise = self->make_response_promise<ProviderReply>();
        FaultSite site{
            .point = FaultPoint::kProviderBeforeRequest, .session = request.session_id, .turn = request.turn};
        Fault before = check_fault(faults.get(), site);
        if (before.action == FaultAction::kError || before.action == FaultAction::kMalformedStream ||
            before.action == FaultAction::kHang) {
          ProviderReply reply;
          bool hang = apply_fault(before, FaultPoint::kProviderBeforeRequest, &reply);
          respond(self, promise, std::move(reply), hang, 0);
          return promise;
        }
        if (provider->asynchronous()) {
          // The provider's own I/O thread does the waiting; its reply comes back as a message.
          uint64_t token = ++self->state.next_token;
          self->state.started.emplace(token, WorkerState::Started{promise, before, site});
          DeltaSink on_delta;
          if (sink) on_delta = [sink](const StreamDelta& d) { caf::anon_send(sink, d); };
          auto me = caf::actor_cast<caf::actor>(self);
          provider->start(request, std::move(on_delta), [me, token](ProviderReply r) {
            caf::anon_send(me, answer_atom::value, token, std::move(r));
          });
          return promise;
        }
        if (provider->blocking()) {
          // The call took its real time on its own thread; only injected delays are waited out here.
          auto helper = self->spawn<caf::detached>(provider_call, provider);
          self->request(helper, caf::infinite, request, sink)
              .then(
                  [self, promise, faults, site, before](ProviderReply r) {
                    uint64_t measured = r.latency_ms;
                    bool hang = faults_around_answer(before, site, faults.get(), &r);
                    uint64_t injected = r.latency_ms - measured;
                    respond(self, promise, std::move(r), hang, injected);
                  },
                  [self, promise](caf::error& e) {
                    ProviderReply failed;
                    failed.failure = ProviderFailure{.error = "provider call failed: " + caf::to_string(e),
                                                     .transport = true};
                    respond(self, promise, std::move(failed), false, 0);
                  });
          return promise;
        }
        // A non-blocking provider answers at once; its latency is simulated here.
        DeltaSink on_delta;
        if (sink) on_delta = [self, sink](const StreamDelta& d) { self->send(sink, d); };
        ProviderReply reply = provider->call(request, on_delta);
        bool hang = faults_around_answer(before, site, faults.get(), &reply, !provider->reports_answered());
        uint64_t latency = reply.latency_ms;
        respond(self, promise, std::move(reply), hang, latency);
        return promise;
      },
      [=](answer_atom, uint64_t token, ProviderReply& r) {
        auto it = self->state.started.find(token);
        if (it == self->state.started.end()) return;
        WorkerState::Started st = std::move(it->second);
        self->state.started.erase(it);
        uint64_t measured = r.latency_ms;
        bool hang = faults_around_answer(st.before, st.site, faults.get(), &r);
        uint64_t injected = r.latency_ms - measured;
        respond(self, st.promise, std::move(r), hang, injected);
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
  std::shared_ptr<FaultInjector> faults;
  ProviderActor worker;
  // The current worker, shared with the functor that stops it when the
  // supervisor ends (a worker is monitored, not linked, so nothing else would).
  std::shared_ptr<ProviderActor> current = std::make_shared<ProviderActor>();
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
  auto worker = self->spawn(provider_worker, self->state.provider, self->state.faults);
  self->state.worker = caf::actor_cast<ProviderActor>(worker);
  *self->state.current = self->state.worker;
  self->monitor(worker);
}

ProviderSupervisorActor::behavior_type provider_supervisor(
    ProviderSupervisorActor::stateful_pointer<SupervisorState> self, std::shared_ptr<Provider> provider,
    std::shared_ptr<FaultInjector> faults) {
  self->state.provider = std::move(provider);
  self->state.faults = std::move(faults);
  start_worker(self);
  self->attach_functor([current = self->state.current](const caf::error&) {
    if (*current) caf::anon_send_exit(*current, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler([=](const caf::down_msg& down) {
    if (down.source != self->state.worker.address()) return;
    std::string why = caf::to_string(down.reason);
    ++self->state.restarts;
    lib_log().warn("provider actor ({}) stopped: {}; restarting it (restart {})", self->state.provider->name(),
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
                                                  std::shared_ptr<Provider> provider,
                                                  std::shared_ptr<FaultInjector> faults) {
  return system.spawn(provider_supervisor, std::move(provider), std::move(faults));
}

}  // namespace carapace
