// pipe_batches: a producer on a thread of its own handing batches to a
// consumer on the caller's thread, at most kQueued batches ahead of it, so
// that reading (the log, the trace store) and building (spans) share the
// two cores. The producer's exceptions become its status; however the
// consumer's side ends (done, stopped, or an exception), the producer is
// told to quit and joined before pipe_batches returns.
//
// A short read is not worth a thread: starting and joining one costs more
// than it saves, and a command that reads thousands of small sessions
// (`trace stats`) would start thousands. Given `own_thread` false, the
// producer runs on the caller's thread and each batch is consumed as it is
// pushed, with the same results.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace carapace::cli {

// What the producer calls with each full batch: false when the consumer has
// stopped, and the producer should return.
template <class T>
class PushBatch {
 public:
  explicit PushBatch(std::function<bool(std::vector<T>&&)> push, std::function<size_t()> waiting = {})
      : push_(std::move(push)), waiting_(std::move(waiting)) {}
  bool operator()(std::vector<T>&& batch) const { return push_(std::move(batch)); }
  // The batches pushed that the consumer has not taken yet (0 when it runs
  // on the producer's thread). While it is behind, a producer can do part of
  // the consumer's work on a batch before pushing it.
  size_t waiting() const { return waiting_ ? waiting_() : 0; }

 private:
  std::function<bool(std::vector<T>&&)> push_;
  std::function<size_t()> waiting_;
};

// produce(push), an exception it throws made its status.
template <class T>
Status produce_caught(const std::string& what, const std::function<Status(const PushBatch<T>&)>& produce,
                      const PushBatch<T>& push) {
  try {
    return produce(push);
  } catch (const std::exception& e) {
    return Status::io_error(what + ": " + e.what());
  } catch (...) {
    return Status::io_error(what + ": an unknown exception");
  }
}

// Runs `produce(push)` on a new thread (or here, unless `own_thread`) and
// `consume(batch)` here for each batch pushed, in order, until the producer
// returns and every batch was consumed, or `consume` returns false. Returns
// the producer's status (ok when the consumer stopped it). `what` names the
// producer in the status of an exception it threw; an exception `consume`
// throws reaches the caller.
template <class T>
Status pipe_batches(const std::string& what, bool own_thread,
                    const std::function<Status(const PushBatch<T>&)>& produce,
                    const std::function<bool(std::vector<T>&)>& consume) {
  if (!own_thread) {
    bool stopped = false;
    std::exception_ptr consumer_threw;
    PushBatch<T> push([&](std::vector<T>&& pushed) {
      if (stopped) return false;
      std::vector<T> batch = std::move(pushed);
      try {
        stopped = !consume(batch);
      } catch (...) {
        consumer_threw = std::current_exception();
        stopped = true;
      }
      return !stopped;
    });
    Status s = produce_caught(what, produce, push);
    if (consumer_threw) std::rethrow_exception(consumer_threw);
    return stopped ? Status() : s;
  }
  constexpr size_t kQueued = 4;
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::vector<T>> ready;
  bool done = false, quit = false;
  Status produced;
  std::thread producer([&] {
    PushBatch<T> push(
        [&](std::vector<T>&& batch) {
          std::unique_lock lock(mu);
          changed.wait(lock, [&] { return ready.size() < kQueued || quit; });
          if (quit) return false;
          ready.push_back(std::move(batch));
          changed.notify_all();
          return true;
        },
        [&] {
          std::lock_guard lock(mu);
          return ready.size();
        });
    Status s = produce_caught(what, produce, push);
    std::lock_guard lock(mu);
    produced = s;
    done = true;
    changed.notify_all();
  });
  struct Join {
    std::thread& t;
    std::mutex& mu;
    bool& quit;
    std::condition_variable& changed;
    ~Join() {
      {
        std::lock_guard lock(mu);
        quit = true;
      }
      changed.notify_all();
      t.join();
    }
  } join{producer, mu, quit, changed};
  for (;;) {
    std::vector<T> batch;
    {
      std::unique_lock lock(mu);
      changed.wait(lock, [&] { return !ready.empty() || done; });
      if (ready.empty()) return produced;
      batch = std::move(ready.front());
      ready.pop_front();
      changed.notify_all();
    }
    if (!consume(batch)) return Status();
  }
}

}  // namespace carapace::cli
