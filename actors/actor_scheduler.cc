#include "actors/actor_scheduler.h"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace carapace {
namespace {

// CAF's coordinator returns its clock as a thread_safe_actor_clock, so this
// one derives from it; it uses only the schedule it inherits from
// simple_actor_clock (the ring buffer and dispatch loop of the base stay
// unused). Every override takes mu_ around simple_actor_clock's own code.
class LazyWakeClock final : public caf::detail::thread_safe_actor_clock {
 public:
  using Simple = caf::detail::simple_actor_clock;

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                            uint64_t id) override {
    std::unique_lock<std::mutex> lock(mu_);
    Simple::set_ordinary_timeout(t, self, type, id);
    added(lock);
  }
  void set_multi_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                         uint64_t id) override {
    std::unique_lock<std::mutex> lock(mu_);
    Simple::set_multi_timeout(t, self, type, id);
    added(lock);
  }
  void set_request_timeout(time_point t, caf::abstract_actor* self, caf::message_id id) override {
    std::unique_lock<std::mutex> lock(mu_);
    Simple::set_request_timeout(t, self, id);
    added(lock);
  }
  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override {
    std::unique_lock<std::mutex> lock(mu_);
    Simple::schedule_message(t, std::move(receiver), std::move(content));
    added(lock);
  }
  void schedule_message(time_point t, caf::group target, caf::strong_actor_ptr sender,
                        caf::message content) override {
    std::unique_lock<std::mutex> lock(mu_);
    Simple::schedule_message(t, std::move(target), std::move(sender), std::move(content));
    added(lock);
  }
  // A cancellation never wakes the thread: at worst it wakes for a deadline
  // that is gone, finds nothing due, and waits again. What a cancellation
  // removes holds a reference to the cancelling actor only, which is alive.
  void cancel_ordinary_timeout(caf::abstract_actor* self, caf::atom_value type) override {
    std::lock_guard<std::mutex> lock(mu_);
    Simple::cancel_ordinary_timeout(self, type);
  }
  void cancel_request_timeout(caf::abstract_actor* self, caf::message_id id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Simple::cancel_request_timeout(self, id);
  }
  void cancel_timeouts(caf::abstract_actor* self) override {
    std::lock_guard<std::mutex> lock(mu_);
    Simple::cancel_timeouts(self);
  }
  // What it drops may hold the last reference to an actor, whose cleanup
  // cancels its timeouts here: it is destroyed outside the lock.
  void cancel_all() override {
    schedule_map dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      actor_lookup_.clear();
      dropped.swap(schedule_);
    }
  }

  // The clock's thread: waits for the earliest deadline (or for an earlier
  // one to be set), then delivers what is due outside the lock, since a
  // delivery may drop the last reference to an actor, whose cleanup cancels
  // its timeouts here.
  void run() {
    std::vector<unique_delayed_event_ptr> due;
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      if (schedule_.empty()) {
        waiting_until_ = time_point::max();
        changed_.wait(lock);
        waiting_until_ = time_point::min();
        wakes_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const time_point next = schedule_.begin()->first;
      if (next > now()) {
        waiting_until_ = next;
        changed_.wait_until(lock, next);
        waiting_until_ = time_point::min();
        wakes_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const time_point t = now();
      for (auto i = schedule_.begin(); i != schedule_.end() && i->first <= t;) {
        auto backlink = i->second->backlink;
        if (backlink != actor_lookup_.end()) actor_lookup_.erase(backlink);
        due.push_back(std::move(i->second));
        i = schedule_.erase(i);
      }
      lock.unlock();
      for (auto& e : due) ship(*e);
      due.clear();
      lock.lock();
    }
  }

  void quit() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    changed_.notify_one();
  }

  uint64_t wakes() const { return wakes_.load(std::memory_order_relaxed); }

  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return schedule_.size();
  }

 private:
  // Wakes the thread if what was just added is due before the time it waits
  // for (min while it is delivering: it looks at the schedule again anyway).
  void added(std::unique_lock<std::mutex>& lock) {
    const bool sooner = schedule_.begin()->first < waiting_until_;
    lock.unlock();
    if (sooner) changed_.notify_one();
  }

  std::mutex mu_;
  std::condition_variable changed_;
  time_point waiting_until_ = time_point::min();
  bool quit_ = false;
  std::atomic<uint64_t> wakes_{0};
};

class Coordinator final : public caf::scheduler::coordinator<caf::policy::work_stealing> {
 public:
  using Super = caf::scheduler::coordinator<caf::policy::work_stealing>;

  explicit Coordinator(caf::actor_system& system) : Super(system) {}

  caf::detail::thread_safe_actor_clock& clock() noexcept override { return lazy_clock_; }

  uint64_t clock_wakes() const { return lazy_clock_.wakes(); }
  size_t pending_timers() { return lazy_clock_.pending(); }

 protected:
  void start() override {
    clock_thread_ = std::thread([this] {
      caf::detail::set_thread_name("carapace.clock");
      system().thread_started();
      lazy_clock_.run();
      system().thread_terminates();
    });
    Super::start();
  }

  // The workers and actors stop first (they may still set timers); then the
  // clock's thread, and what is left in its schedule is dropped.
  void stop() override {
    Super::stop();
    lazy_clock_.quit();
    clock_thread_.join();
    lazy_clock_.cancel_all();
  }

 private:
  LazyWakeClock lazy_clock_;
  std::thread clock_thread_;
};

}  // namespace

void configure_scheduler(caf::actor_system_config& cfg) {
  // An idle worker waits on a condition variable that new work signals at
  // once, instead of CAF 0.17's default of polling with 50 us sleeps, which
  // adds up to ~100 us (timer slack) to every message hop of a turn.
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  cfg.module_factories.push_back(
      [](caf::actor_system& system) -> caf::actor_system::module* { return new Coordinator(system); });
}

std::optional<uint64_t> scheduler_clock_wakes(caf::actor_system& system) {
  auto* c = dynamic_cast<Coordinator*>(&system.scheduler());
  if (c == nullptr) return std::nullopt;
  return c->clock_wakes();
}

std::optional<size_t> scheduler_pending_timers(caf::actor_system& system) {
  auto* c = dynamic_cast<Coordinator*>(&system.scheduler());
  if (c == nullptr) return std::nullopt;
  return c->pending_timers();
}

}  // namespace carapace
