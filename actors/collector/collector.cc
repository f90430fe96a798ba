#include "actors/collector/collector.h"

#include "base/lib_log.h"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>
#include <set>

#include "actors/caf_types.h"
#include "actors/collector/span_builder.h"
#include "base/clock.h"
#include "storage/event_log.h"
#include "storage/trace_store.h"

namespace carapace {
namespace {

using collect_tick_atom = caf::atom_constant<caf::atom("ctick")>;

using CollectorActor = caf::typed_actor<caf::reacts_to<EventNotice>, caf::reacts_to<collect_tick_atom>,
                                        caf::replies_to<flush_atom>::with<bool>>;

}  // namespace

struct Collector::Impl {
  CollectorOptions options;
  std::unique_ptr<TraceStore> store;
  caf::actor_system* system = nullptr;
  CollectorActor actor;
  std::atomic<bool> stopped{false};
  std::atomic<size_t> in_flight{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> written{0};
  std::mutex mu;
  std::map<std::string, uint64_t> dropped_by_session;  // under mu

  void offer(const std::string& session, const Event& event) {
    if (stopped.load(std::memory_order_acquire)) return;
    if (in_flight.fetch_add(1, std::memory_order_relaxed) >= options.queue_capacity) {
      in_flight.fetch_sub(1, std::memory_order_relaxed);
      uint64_t n = dropped.fetch_add(1, std::memory_order_relaxed) + 1;
      {
        std::lock_guard lock(mu);
        ++dropped_by_session[session];
      }
      if (n == 1 || n % 1000 == 0) {
        lib_log().warn("the collector's queue is full: {} events dropped so far (the turn goes on; the spans are "
                     "rebuilt from the log)",
                     n);
      }
      return;
    }
    caf::anon_send(actor, EventNotice{session, event});
  }

  std::map<std::string, uint64_t> dropped_sessions() {
    std::lock_guard lock(mu);
    return dropped_by_session;
  }

  uint64_t dropped_for(const std::string& session) {
    std::lock_guard lock(mu);
    auto it = dropped_by_session.find(session);
    return it == dropped_by_session.end() ? 0 : it->second;
  }
};

namespace {

struct CollectorState {
  CollectorState() = default;
  std::shared_ptr<Collector::Impl> impl;
  std::map<std::string, std::unique_ptr<SpanBuilder>> builders;
  std::set<std::string> dirty;
  std::set<std::string> finished;  // closed and checkpointed: their builders go after the next write
  size_t pending = 0;
  bool tick_scheduled = false;
  std::unique_ptr<EventLog> log;  // a reader, for the events a builder missed
  bool log_failed = false;
  std::map<std::string, uint64_t> caught_up;  // per session: drops already made up for from the log
  std::set<std::string> incomplete;           // sessions with events the log would not give back
};

// Reads the events (from, to) of `session` that the builder has not seen.
void fill_gap(CollectorState& st, SpanBuilder& b, uint64_t to) {
  if (st.log_failed) {
    st.incomplete.insert(b.session());
    return;
  }
  if (!st.log) {
    Status s = EventLog::open(EventLog::Options{.path = st.impl->options.home + "/log", .mode = EventLog::Mode::kReader},
                              &st.log);
    if (!s.ok()) {
      st.log_failed = true;
      st.incomplete.insert(b.session());
      lib_log().warn("the collector cannot read the log to fill in missed events: {}", s.to_string());
      return;
    }
  } else {
    (void)st.log->refresh();
  }
  std::vector<Event> missing;
  Status s = st.log->read(b.session(), b.last_seq() + 1, to, &missing);
  if (!s.ok() && missing.empty()) (void)st.log->refresh(), s = st.log->read(b.session(), b.last_seq() + 1, to, &missing);
  if (!s.ok()) {
    // Damage is `carapace verify`'s to report; the stored spans of this
    // session claim no progress, so `carapace trace` builds them from the log.
    lib_log().info("the collector could not read session {}: {}", b.session(), s.to_string());
    st.incomplete.insert(b.session());
  }
  for (const auto& e : missing) b.add(e);
}

// Sessions that lost events to a full queue since the last write: their
// builders read what they missed from the log (a dropped last event is
// followed by no later one that would reveal the gap).
void catch_up(CollectorState& st) {
  for (const auto& [session, dropped] : st.impl->dropped_sessions()) {
    uint64_t& done = st.caught_up[session];
    if (dropped == done) continue;
    done = dropped;
    auto& b = st.builders[session];
    if (!b) b = std::make_unique<SpanBuilder>(session);
    fill_gap(st, *b, UINT64_MAX);
    st.dirty.insert(session);
  }
}

void write(CollectorState& st) {
  catch_up(st);
  st.pending = 0;
  if (st.dirty.empty()) return;
  std::vector<StoredSpan> spans;
  std::vector<std::pair<std::string, TraceProgress>> progress;
  for (const auto& session : st.dirty) {
    auto it = st.builders.find(session);
    if (it == st.builders.end()) continue;
    for (auto& sp : it->second->take_changed()) {
      StoredSpan stored{.session = session, .span_id = sp.span_id, .open_seq = sp.open_seq, .start_us = sp.start_us};
      if (sp.kind == kSpanLlm) stored.model = sp.attrs.value("model", std::string());
      if (sp.kind == kSpanTool) stored.tool = sp.attrs.value("tool", std::string());
      stored.value = span_json_text(sp);
      spans.push_back(std::move(stored));
    }
    progress.emplace_back(session, TraceProgress{.last_seq = st.incomplete.count(session) ? 0 : it->second->last_seq(),
                                                 .dropped = st.impl->dropped_for(session),
                                                 .updated_us = now_us()});
  }
  st.dirty.clear();
  Status s = st.impl->store->write(spans, progress);
  if (!s.ok()) {
    lib_log().warn("the collector could not write {} spans: {} (the turn goes on; `carapace trace` rebuilds them "
                 "from the log)",
                 spans.size(), s.to_string());
  } else {
    st.impl->written.fetch_add(spans.size(), std::memory_order_relaxed);
  }
  for (const auto& session : st.finished) {
    st.builders.erase(session);
    st.incomplete.erase(session);  // read whole again if it grows
  }
  st.finished.clear();
}

CollectorActor::behavior_type collector_actor(CollectorActor::stateful_pointer<CollectorState> self,
                                              std::shared_ptr<Collector::Impl> impl) {
  self->state.impl = std::move(impl);
  return {
      [self](const EventNotice& notice) {
        auto& st = self->state;
        st.impl->in_flight.fetch_sub(1, std::memory_order_relaxed);
        auto& b = st.builders[notice.session_id];
        if (!b) b = std::make_unique<SpanBuilder>(notice.session_id);
        if (notice.event.seq > b->last_seq() + 1) fill_gap(st, *b, notice.event.seq - 1);
        b->add(notice.event);
        st.dirty.insert(notice.session_id);
        if (get_if<TurnCommitted>(notice.event) && !b->spans().empty() && !b->spans()[0].open()) {
          st.finished.insert(notice.session_id);
        }
        if (++st.pending >= st.impl->options.batch_events) {
          write(st);
        } else if (!st.tick_scheduled) {
          st.tick_scheduled = true;
          self->delayed_send(self, st.impl->options.flush_interval, collect_tick_atom::value);
        }
      },
      [self](collect_tick_atom) {
        self->state.tick_scheduled = false;
        write(self->state);
      },
      [self](flush_atom) {
        write(self->state);
        return true;
      },
  };
}

}  // namespace

Collector::Collector(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Collector::start(caf::actor_system& system, CollectorOptions options, std::shared_ptr<Collector>* out) {
  auto impl = std::make_shared<Impl>();
  impl->options = std::move(options);
  impl->system = &system;
  CARAPACE_RETURN_IF_ERROR(TraceStore::open(impl->options.home + "/traces", TraceStore::Mode::kWriter, &impl->store));
  impl->actor = system.spawn(collector_actor, impl);
  out->reset(new Collector(std::move(impl)));
  return Status();
}

Status Collector::start(CollectorOptions options, std::shared_ptr<Collector>* out) {
  auto config = std::make_unique<caf::actor_system_config>();
  config->set("scheduler.max-threads", 1);
  auto system = std::make_unique<caf::actor_system>(*config);
  std::shared_ptr<Collector> collector;
  CARAPACE_RETURN_IF_ERROR(start(*system, std::move(options), &collector));
  collector->own_config_ = std::move(config);
  collector->own_system_ = std::move(system);
  *out = std::move(collector);
  return Status();
}

Collector::~Collector() {
  (void)flush();
  impl_->stopped.store(true, std::memory_order_release);
  caf::anon_send_exit(impl_->actor, caf::exit_reason::user_shutdown);
  impl_->actor = nullptr;
  if (own_system_) own_system_->await_all_actors_done();
}

void Collector::offer(const std::string& session, const Event& event) { impl_->offer(session, event); }

std::function<void(const std::string&, const Event&)> Collector::observer() {
  std::weak_ptr<Impl> weak = impl_;
  return [weak](const std::string& session, const Event& event) {
    if (auto impl = weak.lock()) impl->offer(session, event);
  };
}

Status Collector::flush(std::chrono::milliseconds timeout) {
  caf::scoped_actor self{*impl_->system};
  Status result;
  self->request(impl_->actor, timeout, flush_atom::value)
      .receive([](bool) {}, [&](caf::error& e) { result = Status::aborted("flushing the collector: " + caf::to_string(e)); });
  return result;
}

uint64_t Collector::dropped() const { return impl_->dropped.load(std::memory_order_relaxed); }
uint64_t Collector::written() const { return impl_->written.load(std::memory_order_relaxed); }

}  // namespace carapace
