// pipe_batches (tools/batch_pipe.h), on a thread of its own and on the
// caller's: the same batches in the same order, the same statuses when the
// consumer stops or the producer throws, and a consumer's exception reaching
// the caller.
#define BOOST_TEST_MODULE tools_unit_test
#include "tools/batch_pipe.h"

#include <boost/test/unit_test.hpp>

#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace carapace;
using namespace carapace::cli;

namespace {

struct Run {
  std::vector<int> consumed;
  std::thread::id producer_thread;
  Status status;
};

// A producer of `batches` batches of three numbers, counting up; the
// consumer stops after `stop_after` batches (0: never). `fail` makes the
// producer return an error after its last batch.
Run run(bool own_thread, int batches, int stop_after, bool fail = false) {
  Run r;
  int seen = 0;
  r.status = pipe_batches<int>(
      "counting", own_thread,
      [&](const PushBatch<int>& push) {
        r.producer_thread = std::this_thread::get_id();
        int next = 0;
        for (int b = 0; b < batches; ++b) {
          std::vector<int> batch = {next, next + 1, next + 2};
          next += 3;
          if (!push(std::move(batch))) return Status();
        }
        return fail ? Status::corruption("a damaged record") : Status();
      },
      [&](std::vector<int>& batch) {
        r.consumed.insert(r.consumed.end(), batch.begin(), batch.end());
        return stop_after == 0 || ++seen < stop_after;
      });
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batch_pipe)

BOOST_AUTO_TEST_CASE(both_ways_consume_every_batch_in_order_and_return_the_producers_status) {
  for (bool own_thread : {true, false}) {
    BOOST_TEST_CONTEXT("own thread: " << own_thread) {
      Run r = run(own_thread, 40, 0);
      BOOST_TEST(r.status.ok());
      BOOST_REQUIRE_EQUAL(r.consumed.size(), 120u);
      for (int i = 0; i < 120; ++i) BOOST_TEST(r.consumed[static_cast<size_t>(i)] == i);
      // The producer ran where it was asked to.
      BOOST_TEST((r.producer_thread == std::this_thread::get_id()) == !own_thread);

      Run failed = run(own_thread, 5, 0, /*fail=*/true);
      BOOST_TEST(failed.status.is_corruption());
      BOOST_TEST(failed.consumed.size() == 15u);  // every batch before the error

      Run none = run(own_thread, 0, 0);
      BOOST_TEST(none.status.ok());
      BOOST_TEST(none.consumed.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_consumer_that_stops_stops_the_producer_and_the_status_is_ok) {
  for (bool own_thread : {true, false}) {
    BOOST_TEST_CONTEXT("own thread: " << own_thread) {
      Run r = run(own_thread, 100, 3, /*fail=*/true);
      BOOST_TEST(r.status.ok());
      BOOST_TEST(r.consumed.size() == 9u);  // three batches, then nothing more
    }
  }
}

BOOST_AUTO_TEST_CASE(a_producers_exception_is_its_status_and_a_consumers_reaches_the_caller) {
  for (bool own_thread : {true, false}) {
    BOOST_TEST_CONTEXT("own thread: " << own_thread) {
      int consumed = 0;
      Status s = pipe_batches<int>(
          "reading the log", own_thread,
          [&](const PushBatch<int>& push) -> Status {
            push({1});
            throw std::runtime_error("the disk went away");
          },
          [&](std::vector<int>&) { return ++consumed > 0; });
      BOOST_TEST(s.is_io_error());
      BOOST_TEST(s.message().find("reading the log: the disk went away") != std::string::npos, s.message());
      BOOST_TEST(consumed == 1);

      bool producer_went_on = false;
      BOOST_CHECK_THROW(pipe_batches<int>(
                            "reading the log", own_thread,
                            [&](const PushBatch<int>& push) {
                              for (int i = 0; i < 10; ++i) {
                                if (!push({i})) return Status();
                              }
                              producer_went_on = true;
                              return Status();
                            },
                            [&](std::vector<int>&) -> bool { throw std::logic_error("a bad span"); }),
                        std::logic_error);
      BOOST_TEST(!producer_went_on);
    }
  }
}

// waiting(): what the producer reads to take part of the consumer's work
// while it is behind (tools/trace_load.cc reads stored spans so).
BOOST_AUTO_TEST_CASE(the_producer_sees_the_batches_the_consumer_has_not_taken) {
  // On the caller's thread each batch is consumed as it is pushed: none waits.
  std::vector<size_t> here;
  Status s = pipe_batches<int>(
      "counting", false,
      [&](const PushBatch<int>& push) {
        for (int b = 0; b < 3; ++b) {
          push({b});
          here.push_back(push.waiting());
        }
        return Status();
      },
      [&](std::vector<int>&) { return true; });
  BOOST_TEST(s.ok());
  BOOST_TEST(here == std::vector<size_t>({0, 0, 0}), boost::test_tools::per_element());
  // On a thread of its own, with the consumer held on its first batch: the
  // batches pushed after it wait, and the producer sees them.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<size_t> seen;
  std::vector<int> consumed;
  s = pipe_batches<int>(
      "counting", true,
      [&](const PushBatch<int>& push) {
        for (int b = 0; b < 3; ++b) {
          push({b});
          seen.push_back(push.waiting());
        }
        release.set_value();
        return Status();
      },
      [&](std::vector<int>& batch) {
        released.wait();
        consumed.push_back(batch[0]);
        return true;
      });
  BOOST_TEST(s.ok());
  BOOST_REQUIRE_EQUAL(seen.size(), 3u);
  BOOST_TEST(seen[2] >= 2u);  // at most the first was taken
  BOOST_TEST(consumed == std::vector<int>({0, 1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
