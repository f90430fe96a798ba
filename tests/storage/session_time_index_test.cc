// The session time index (storage/session_time_index.h): sessions_by_time
// lists newest first what a sort of the whole session index lists, through
// updates, removals, clocks that go back, reopens, asynchronous appends and
// logs written before the index; verify finds an index that disagrees.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <random>

#include "storage/event_log.h"
#include "storage/session_time_index.h"
#include "tests/support/printing.h"
#include "tests/support/raw_db.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using carapace::testing::TempDir;

namespace {

struct IndexFixture {
  TempDir dir;
  std::unique_ptr<EventLog> log;

  IndexFixture() { open(); }

  std::string path() const { return dir.sub("log"); }
  void open(EventLog::Mode mode = EventLog::Mode::kWriter) {
    log.reset();
    CHECK_OK(EventLog::open(EventLog::Options{.path = path(), .mode = mode}, &log));
  }

  // Writes the session's index entry as if a checkpoint at `updated_us`.
  void touch(const std::string& id, int64_t created_us, int64_t updated_us) {
    SessionMeta meta{.id = id, .created_us = created_us, .updated_us = updated_us, .agent_id = "a"};
    CHECK_OK(log->append(AppendRequest{.session = id, .meta = &meta}));
  }

  std::vector<std::string> newest(int64_t since_us = 0, size_t limit = 0, const EventLog* from = nullptr) {
    std::vector<std::string> ids;
    CHECK_OK((from ? from : log.get())->sessions_by_time(since_us, [&](SessionMeta& m) {
      ids.push_back(m.id);
      return limit == 0 || ids.size() < limit;
    }));
    return ids;
  }

  // The same query answered by sorting every session index entry.
  std::vector<std::string> sorted(int64_t since_us = 0, size_t limit = 0) {
    std::vector<SessionMeta> all;
    CHECK_OK(log->list_sessions(&all));
    std::sort(all.begin(), all.end(), newer_session);
    std::vector<std::string> ids;
    for (const auto& m : all) {
      if (session_time(m) < since_us || (limit > 0 && ids.size() == limit)) break;
      ids.push_back(m.id);
    }
    return ids;
  }

  std::vector<std::string> problems() {
    std::vector<std::string> out;
    CHECK_OK(log->check_time_index(&out));
    return out;
  }

  uint64_t count() {
    uint64_t n = 0;
    CHECK_OK(log->session_count(&n));
    return n;
  }
};

using Ids = std::vector<std::string>;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(session_time_index, IndexFixture)

BOOST_AUTO_TEST_CASE(sessions_come_newest_first_and_follow_their_updates) {
  for (int i = 1; i <= 5; ++i) touch("s" + std::to_string(i), i * 100, i * 100);
  BOOST_TEST(newest() == (Ids{"s5", "s4", "s3", "s2", "s1"}));
  touch("s2", 200, 900);  // s2 checkpoints again
  BOOST_TEST(newest() == (Ids{"s2", "s5", "s4", "s3", "s1"}));
  BOOST_TEST(newest(300) == (Ids{"s2", "s5", "s4", "s3"}));  // changed at 300 or later
  BOOST_TEST(newest(0, 2) == (Ids{"s2", "s5"}));
  BOOST_TEST(count() == 5u);
  CHECK_OK(log->remove_session("s5"));
  BOOST_TEST(newest() == (Ids{"s2", "s4", "s3", "s1"}));
  BOOST_TEST(count() == 4u);
  BOOST_TEST(problems().empty(), problems().front());
  // A reader sees the same; so does the writer after a reopen.
  std::unique_ptr<EventLog> reader;
  CHECK_OK(EventLog::open(EventLog::Options{.path = path(), .mode = EventLog::Mode::kReader}, &reader));
  BOOST_TEST(newest(0, 0, reader.get()) == (Ids{"s2", "s4", "s3", "s1"}));
  reader.reset();
  open();
  touch("s1", 100, 1000);
  BOOST_TEST(newest() == (Ids{"s1", "s2", "s4", "s3"}));
  BOOST_TEST(count() == 4u);
  BOOST_TEST(problems().empty());
}

BOOST_AUTO_TEST_CASE(the_index_agrees_with_a_sort_of_the_whole_session_index) {
  // Random creations, updates (the clock sometimes going back, times
  // shared), removals and reopens; after each step the index must answer
  // every query as the sort does, and keep an exact count.
  std::mt19937_64 rng(7);
  std::map<std::string, int64_t> created;
  for (int step = 0; step < 600; ++step) {
    const int op = static_cast<int>(rng() % 20);
    const std::string id = "t" + std::to_string(rng() % 40);
    const int64_t at = static_cast<int64_t>(rng() % 50) * 10;  // few times: many ties
    if (op == 0 && created.count(id)) {
      CHECK_OK(log->remove_session(id));
      created.erase(id);
    } else if (op == 1) {
      open();  // a new writer: nothing cached
    } else {
      auto [it, fresh] = created.emplace(id, at);
      touch(id, it->second, at);
    }
    const int64_t since = static_cast<int64_t>(rng() % 50) * 10;
    const size_t limit = rng() % 6;
    BOOST_TEST_REQUIRE(newest(since, limit) == sorted(since, limit), "step " << step);
    BOOST_TEST_REQUIRE(count() == created.size(), "step " << step);
  }
  BOOST_TEST(newest() == sorted());
  BOOST_TEST(problems().empty());
}

BOOST_AUTO_TEST_CASE(asynchronous_appends_in_flight_keep_the_index_whole) {
  // Durable appends of the same sessions queued behind each other, each
  // moving its session's time: the index must end with one entry each.
  std::vector<std::promise<Status>> done(200);
  std::vector<SessionMeta> metas(done.size());
  for (size_t i = 0; i < done.size(); ++i) {
    const std::string id = "q" + std::to_string(i % 7);
    metas[i] = SessionMeta{.id = id, .created_us = 1, .updated_us = static_cast<int64_t>(1000 - i % 13 * 50 + i)};
    log->append_async(AppendRequest{.session = metas[i].id, .durability = Durability::kSynced, .meta = &metas[i]},
                      [&, i](Status s) { done[i].set_value(s); });
  }
  for (auto& d : done) CHECK_OK(d.get_future().get());
  BOOST_TEST(newest().size() == 7u);
  BOOST_TEST(newest() == sorted());
  BOOST_TEST(count() == 7u);
  BOOST_TEST(problems().empty(), problems().front());
}

BOOST_AUTO_TEST_CASE(a_log_written_before_the_index_is_sorted_then_indexed_by_its_next_writer) {
  for (int i = 1; i <= 6; ++i) touch("o" + std::to_string(i), i, i * 10);
  touch("o3", 3, 100);
  const Ids expected = {"o3", "o6", "o5", "o4", "o2", "o1"};
  log.reset();
  {
    // As an older build left it: no time index family, no count, no mark.
    testing::RawDb raw(path());
    raw.drop_family(kSessionsByTimeFamily);
    raw.erase(rocksdb::kDefaultColumnFamilyName, std::string(time_index::kCountKey));
    raw.erase(rocksdb::kDefaultColumnFamilyName, std::string(time_index::kBuiltKey));
  }
  open(EventLog::Mode::kReader);  // a reader opens it as it is, and sorts
  BOOST_TEST(newest() == expected);
  BOOST_TEST(newest(40, 2) == (Ids{"o3", "o6"}));
  BOOST_TEST(count() == 6u);
  open();  // the writer builds the index
  log.reset();
  {
    testing::RawDb raw(path());
    BOOST_TEST(raw.get(rocksdb::kDefaultColumnFamilyName, std::string(time_index::kBuiltKey)) == "1");
    BOOST_TEST(raw.get(kSessionsByTimeFamily, time_index::key(100, "o3")).empty());  // there, and empty
  }
  open();
  BOOST_TEST(newest() == expected);
  BOOST_TEST(count() == 6u);
  BOOST_TEST(problems().empty());
  touch("o1", 1, 200);
  BOOST_TEST(newest(0, 1) == (Ids{"o1"}));
  open(EventLog::Mode::kReader);
  BOOST_TEST(newest(0, 2) == (Ids{"o1", "o3"}));
  BOOST_TEST(count() == 6u);
}

BOOST_AUTO_TEST_CASE(entries_that_disagree_with_the_session_index_are_passed_over_and_reported) {
  touch("a", 10, 10);
  touch("b", 20, 20);
  log.reset();
  {
    testing::RawDb raw(path());
    raw.put(kSessionsByTimeFamily, time_index::key(500, "a"), "");      // a's entry at a wrong time
    raw.put(kSessionsByTimeFamily, time_index::key(600, "ghost"), "");  // no such session
    raw.put(kSessionsByTimeFamily, "\x01short", "");                    // not a key at all
  }
  open(EventLog::Mode::kReader);
  std::vector<std::string> ids, unreadable;
  CHECK_OK(log->sessions_by_time(0, [&](SessionMeta& m) {
    ids.push_back(m.id);
    return true;
  }, &unreadable));
  BOOST_TEST(ids == (Ids{"b", "a"}));
  BOOST_TEST(unreadable.size() == 1u);
  std::vector<std::string> found = problems();
  BOOST_REQUIRE(found.size() == 3u);
  std::string all;
  for (const auto& p : found) all += p + "\n";
  BOOST_TEST(all.find("entry for a at 500, but it last changed at 10") != std::string::npos, all);
  BOOST_TEST(all.find("entry for ghost at 600, which has no session index entry") != std::string::npos, all);
  BOOST_TEST(all.find("is not a time and a session id") != std::string::npos, all);
}

BOOST_AUTO_TEST_SUITE_END()
