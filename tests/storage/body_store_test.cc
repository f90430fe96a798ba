// BodyStore: content addressing, synced puts from many threads, the writer
// thread's batches, and what a reader finds.
#include "storage/body_store.h"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

BOOST_AUTO_TEST_SUITE(body_store)

BOOST_AUTO_TEST_CASE(identical_bodies_are_stored_once_and_read_back_exactly) {
  testing::TempDir dir;
  std::string binary("data: caf\xC3\xA9\r\n\0tail", 18);
  {
    std::unique_ptr<BodyStore> store;
    CHECK_OK(BodyStore::open(dir.sub("bodies"), BodyStore::Mode::kWriter, &store));
    std::string a, b;
    CHECK_OK(store->put(binary, &a));
    CHECK_OK(store->put(binary, &b));
    BOOST_TEST(a == b);
    BOOST_TEST(a == BodyStore::ref_of(binary));
    BOOST_TEST(store->writes() == 1u);
    // Asynchronous puts: one batch may hold the same body twice; every
    // callback runs, and the destructor waits for the queue.
    std::atomic<int> called{0}, wrong{0};  // counted: Boost.Test's checks are not thread-safe
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) {
          std::string body = "body " + std::to_string(i % 25);  // each body from several threads
          store->put_async(body, [&called, &wrong, body](Status s, std::string ref) {
            if (!s.ok() || ref != BodyStore::ref_of(body)) ++wrong;
            ++called;
          });
        }
      });
    }
    for (auto& t : threads) t.join();
    store.reset();  // drains
    BOOST_TEST(called.load() == 200);
    BOOST_TEST(wrong.load() == 0);
  }
  std::unique_ptr<BodyStore> reader;
  CHECK_OK(BodyStore::open(dir.sub("bodies"), BodyStore::Mode::kReader, &reader));
  std::string got;
  CHECK_OK(reader->get(BodyStore::ref_of(binary), &got));
  BOOST_TEST(got == binary);
  for (int i = 0; i < 25; ++i) {
    CHECK_OK(reader->get(BodyStore::ref_of("body " + std::to_string(i)), &got));
    BOOST_TEST(got == "body " + std::to_string(i));
  }
  BOOST_TEST(reader->get(BodyStore::ref_of("never stored"), &got).is_not_found());
  std::unique_ptr<BodyStore> missing;
  BOOST_TEST(BodyStore::open(dir.sub("none"), BodyStore::Mode::kReader, &missing).is_not_found());
}

BOOST_AUTO_TEST_SUITE_END()
