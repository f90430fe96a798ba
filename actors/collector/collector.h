// Collector: turns the events of a runtime's sessions into spans and writes
// them to the trace store (storage/trace_store.h), in process, off the
// sessions' path (docs/trace.md).
//
//   auto collector = Collector::start(system, {.home = home});
//   runtime_options.observe = collector->observer();
//
// offer() never blocks and never fails a turn: it hands the event to the
// CollectorActor through a bounded queue; when the queue is full the event
// is dropped, counted (per session, in the store's progress and in `trace
// show`) and warned about. The actor folds events into one SpanBuilder per
// session; an event whose seq skips ahead (a dropped event, a session first
// seen on its resume or fork) makes it read the missing events from the log,
// so the spans stay whole. Changed spans are written in one batch per
// `batch_events` events or `flush_interval`, whichever comes first.
//
// Thread-safe: offer() and the counters from any thread; flush() from any
// thread but the actor's.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "events/events.h"

namespace caf {
class actor_system;
class actor_system_config;
}

namespace carapace {

struct CollectorOptions {
  std::string home;  // the trace store is home/traces; missing events are read from home/log
  size_t queue_capacity = 8192;  // events waiting for the actor; more are dropped
  size_t batch_events = 512;
  std::chrono::milliseconds flush_interval{200};
};

class Collector {
 public:
  // Opens the trace store (a writer: busy if another collector has it) and
  // spawns the actor on `system`, which must outlive the collector.
  static Status start(caf::actor_system& system, CollectorOptions options, std::shared_ptr<Collector>* out);
  // As above, on an actor system of the collector's own (one thread), so
  // that it may outlive the runtimes it observes (the CLI's way).
  static Status start(CollectorOptions options, std::shared_ptr<Collector>* out);
  // Writes what is pending and stops the actor.
  ~Collector();

  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Queues one event of `session`; drops it (counted) if the queue is full.
  void offer(const std::string& session, const Event& event);
  // offer() as a Runtime::Options::observe callback (holds a weak reference).
  std::function<void(const std::string&, const Event&)> observer();

  // Returns once everything offered before the call is folded and written.
  Status flush(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  uint64_t dropped() const;  // events dropped so far
  uint64_t written() const;  // span writes made to the store

  struct Impl;

 private:
  explicit Collector(std::shared_ptr<Impl> impl);
  // Declared first, destroyed last: the actor (and its hold on impl_) goes with it.
  std::unique_ptr<caf::actor_system_config> own_config_;
  std::unique_ptr<caf::actor_system> own_system_;
  std::shared_ptr<Impl> impl_;
};

}  // namespace carapace
