// The actors' scheduler (actors/actor_scheduler.h): timers fire when due and
// in order, a sooner deadline is not held up behind a later one, stopping
// does not wait for timers far ahead, and the clock's thread is not woken by
// timers that are set and cancelled long before they are due.
#define BOOST_TEST_MODULE actor_scheduler_test
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "actors/actor_scheduler.h"

using namespace carapace;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct System {
  System() : system(configure(config)) {}
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    configure_scheduler(cfg);
    return cfg;
  }
  caf::actor_system_config config;
  caf::actor_system system;
};

// Makes `n` requests one after another, each with a 60 s timeout (as a
// session's model and tool calls have), then answers how many were answered.
void ask(caf::event_based_actor* self, caf::actor echo, int left, int answered,
         caf::response_promise promise) {
  if (left == 0) {
    promise.deliver(answered);
    return;
  }
  self->request(echo, 60s, left)
      .then([=](int) { ask(self, echo, left - 1, answered + 1, promise); },
            [=](caf::error&) { ask(self, echo, left - 1, answered, promise); });
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_plain_system_has_no_such_clock) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  BOOST_TEST(!scheduler_clock_wakes(system).has_value());
}

BOOST_AUTO_TEST_CASE(requests_answered_long_before_their_timeout_do_not_wake_the_clock) {
  System s;
  auto echo = s.system.spawn([]() -> caf::behavior { return {[](int x) { return x; }}; });
  auto driver = s.system.spawn([echo](caf::event_based_actor* self) -> caf::behavior {
    return {[=](int n) {
      auto promise = self->make_response_promise();
      ask(self, echo, n, 0, promise);
      return promise;
    }};
  });
  // Let the clock's thread settle into its wait.
  std::this_thread::sleep_for(50ms);
  const uint64_t before = scheduler_clock_wakes(s.system).value();
  const int n = 2000;
  caf::scoped_actor self{s.system};
  int answered = 0;
  self->request(driver, caf::infinite, n).receive([&](int a) { answered = a; }, [](caf::error&) {});
  BOOST_TEST(answered == n);
  const uint64_t wakes = scheduler_clock_wakes(s.system).value() - before;
  // 2,000 timeouts set and 2,000 cancelled. CAF's own clock wakes its thread
  // for each; this one only for the first deadline (and the odd spurious wake).
  BOOST_TEST_MESSAGE("clock wakes for " << n << " requests: " << wakes);
  BOOST_TEST(wakes <= 20u);
}

BOOST_AUTO_TEST_CASE(a_sooner_deadline_is_not_held_up_behind_a_later_one) {
  System s;
  caf::scoped_actor self{s.system};
  // The clock's thread waits for a deadline 30 s away ...
  self->delayed_send(self, 30s, std::string("late"));
  std::this_thread::sleep_for(50ms);
  // ... when one 50 ms away is set.
  const auto start = Clock::now();
  self->delayed_send(self, 50ms, std::string("soon"));
  std::string got;
  self->receive([&](const std::string& x) { got = x; }, caf::after(std::chrono::seconds(5)) >> [] {});
  const double took = ms_since(start);
  BOOST_TEST(got == "soon");
  BOOST_TEST(took >= 49.0);
  BOOST_TEST(took < 2000.0);
}

BOOST_AUTO_TEST_CASE(timers_fire_in_the_order_they_are_due) {
  System s;
  caf::scoped_actor self{s.system};
  self->delayed_send(self, 150ms, 3);
  self->delayed_send(self, 50ms, 1);
  self->delayed_send(self, 100ms, 2);
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    self->receive([&](int x) { order.push_back(x); }, caf::after(std::chrono::seconds(5)) >> [] {});
  }
  BOOST_TEST(order == (std::vector<int>{1, 2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_request_nobody_answers_times_out_when_due) {
  System s;
  auto silent = s.system.spawn([](caf::event_based_actor* self) -> caf::behavior {
    return {[self](int) {
      // Keeps the promise unanswered.
      return self->make_response_promise();
    }};
  });
  caf::scoped_actor self{s.system};
  const auto start = Clock::now();
  std::optional<caf::error> failed;
  self->request(silent, 100ms, 1).receive([](int) {}, [&](caf::error& e) { failed = e; });
  const double took = ms_since(start);
  BOOST_REQUIRE(failed.has_value());
  BOOST_TEST((*failed == caf::sec::request_timeout));
  BOOST_TEST(took >= 99.0);
  BOOST_TEST(took < 3000.0);
  caf::anon_send_exit(silent, caf::exit_reason::kill);
}

BOOST_AUTO_TEST_CASE(stopping_does_not_wait_for_timers_far_ahead) {
  const auto start = Clock::now();
  {
    System s;
    auto sleeper = s.system.spawn([](caf::event_based_actor* self) -> caf::behavior {
      self->delayed_send(self, std::chrono::hours(1), 1);
      return {[self](int) { self->quit(); }};
    });
    caf::anon_send_exit(sleeper, caf::exit_reason::user_shutdown);
  }
  BOOST_TEST(ms_since(start) < 5000.0);
}
