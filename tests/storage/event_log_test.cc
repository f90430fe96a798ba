#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "events/record.h"
#include "storage/db_options.h"
#include "storage/event_log.h"
#include "storage/group_commit.h"
#include "storage/keys.h"
#include "storage/session_meta.h"
#include "tests/support/gated_sync_fs.h"
#include "tests/support/printing.h"
#include "tests/support/raw_db.h"
#include "tests/support/session_builder.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using carapace::testing::SessionBuilder;
using carapace::testing::TempDir;

namespace {

struct LogFixture {
  TempDir dir;
  std::unique_ptr<EventLog> log;

  LogFixture() { open(); }

  std::string path() const { return dir.sub("log"); }
  void open(EventLog::Mode mode = EventLog::Mode::kWriter) {
    log.reset();
    CHECK_OK(EventLog::open(EventLog::Options{.path = path(), .mode = mode}, &log));
  }
  // A writer under a runtime's memory cap (1 MB of write buffers), on `fs`.
  void open_capped(std::shared_ptr<rocksdb::FileSystem> fs) {
    log.reset();
    CHECK_OK(EventLog::open(EventLog::Options{.path = path(),
                                              .block_cache_bytes = 2 << 20,
                                              .write_buffer_bytes = 1 << 20,
                                              .file_system = std::move(fs)},
                            &log));
  }

  std::vector<Event> read_all(std::string_view session) {
    std::vector<Event> out;
    CHECK_OK(log->read(session, 1, UINT64_MAX, &out));
    return out;
  }

  Status append(std::string_view session, const std::vector<Event>& events,
                Durability durability = Durability::kBuffered) {
    return log->append(AppendRequest{.session = session, .events = events, .durability = durability});
  }
};

std::vector<Event> slice(const std::vector<Event>& events, size_t from, size_t to) {
  return std::vector<Event>(events.begin() + static_cast<std::ptrdiff_t>(from),
                            events.begin() + static_cast<std::ptrdiff_t>(to));
}

// A state of `bytes` pseudo-random bytes: compression cannot shrink it.
std::string incompressible(size_t bytes, uint64_t seed) {
  std::string out(bytes, '\0');
  for (char& c : out) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    c = static_cast<char>(seed);
  }
  return out;
}

// A file system over the real one that counts the table files written and
// their bytes.
class TableFileCounter : public rocksdb::FileSystemWrapper {
 public:
  TableFileCounter() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "TableFileCounter"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(f, options, &file, dbg);
    if (!s.ok() || !f.ends_with(".sst")) {
      *r = std::move(file);
      return s;
    }
    ++tables;
    *r = std::make_unique<Counted>(std::move(file), &table_bytes);
    return s;
  }
  std::atomic<uint64_t> tables{0};
  std::atomic<uint64_t> table_bytes{0};

 private:
  class Counted : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    Counted(std::unique_ptr<rocksdb::FSWritableFile> t, std::atomic<uint64_t>* bytes)
        : FSWritableFileOwnerWrapper(std::move(t)), bytes_(bytes) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
      *bytes_ += data.size();
      return target()->Append(data, o, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* dbg) override {
      *bytes_ += data.size();
      return target()->Append(data, o, info, dbg);
    }

   private:
    std::atomic<uint64_t>* bytes_;
  };
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(event_log_tests, LogFixture)

BOOST_AUTO_TEST_CASE(appended_events_read_back_in_order) {
  SessionBuilder b;
  b.start().turn({"shell", "read_file"});
  const auto& events = b.events();
  CHECK_OK(append("s1", slice(events, 0, 3)));
  CHECK_OK(append("s1", slice(events, 3, events.size()), Durability::kSynced));
  BOOST_TEST((read_all("s1") == events));
  uint64_t last = 0;
  CHECK_OK(log->last_seq("s1", &last));
  BOOST_TEST(last == events.size());
  std::vector<Event> tail;
  CHECK_OK(log->read("s1", 5, 7, &tail));
  BOOST_REQUIRE(tail.size() == 3u);
  BOOST_TEST(tail.front().seq == 5u);
}

BOOST_AUTO_TEST_CASE(events_survive_a_reopen) {
  SessionBuilder b;
  b.start().turn();
  CHECK_OK(append("s1", b.events(), Durability::kSynced));
  open();
  BOOST_TEST((read_all("s1") == b.events()));
}

// A home used as the CLI uses it: many short writers, each closing after a
// few appends. Each close flushes a file per family; a close that finds
// level-0 files piling up lets their compaction run, so the table files stay
// few (here 40 writers: without it 40, one a writer; with it 3) and everything is
// still there.
BOOST_AUTO_TEST_CASE(short_writers_leave_few_table_files) {
  SessionBuilder b;
  b.start().turn({"shell"});
  for (int i = 0; i < 40; ++i) {
    open();
    CHECK_OK(append("s" + std::to_string(i), b.events(), Durability::kSynced));
  }
  log.reset();
  size_t tables = 0;
  for (const auto& f : std::filesystem::directory_iterator(path())) tables += f.path().extension() == ".sst";
  BOOST_TEST(tables <= 12u, tables << " table files after 40 short writers");
  open(EventLog::Mode::kReader);
  for (int i = 0; i < 40; ++i) BOOST_TEST((read_all("s" + std::to_string(i)) == b.events()));
}

// A writer that closes with much in its memtables writes it to table files,
// so that no reader's open replays it from the write-ahead log.
BOOST_AUTO_TEST_CASE(a_writer_closing_with_much_in_memory_leaves_it_in_table_files) {
  SessionBuilder b;
  b.start().turn({"shell", "read_file", "write_file"});
  for (int i = 0; i < 2000; ++i) CHECK_OK(append("s" + std::to_string(i), b.events()));  // ~1.6 MB, unsynced
  log.reset();
  uintmax_t wal = 0;
  size_t tables = 0;
  for (const auto& f : std::filesystem::directory_iterator(path())) {
    if (f.path().extension() == ".log") wal += f.file_size();
    tables += f.path().extension() == ".sst";
  }
  BOOST_TEST(wal < 64u * 1024, wal << " bytes left in the write-ahead log");
  BOOST_TEST(tables > 0u);
  open(EventLog::Mode::kReader);
  for (int i = 0; i < 2000; i += 37) BOOST_TEST((read_all("s" + std::to_string(i)) == b.events()));
}

BOOST_AUTO_TEST_CASE(appends_must_continue_the_sessions_seq) {
  SessionBuilder b;
  b.start().turn();
  const auto& events = b.events();
  Status s = append("s1", slice(events, 2, 4));
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message().find("at seq 3, but its log ends at seq 0") != std::string::npos);
  CHECK_OK(append("s1", slice(events, 0, 4)));
  // Rewriting seq 1..2 would overwrite history: refused, and nothing changes.
  s = append("s1", slice(events, 0, 2));
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST((read_all("s1") == slice(events, 0, 4)));
  // A batch with a hole inside.
  std::vector<Event> holey = {events[4], events[6]};
  s = append("s1", holey);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message().find("seq 7 follows 5 in one batch") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_seq_position_is_read_back_after_a_reopen) {
  SessionBuilder b;
  b.start().turn();
  const auto& events = b.events();
  CHECK_OK(append("s1", slice(events, 0, 3)));
  open();
  BOOST_TEST(append("s1", slice(events, 0, 3)).is_invalid_argument());
  CHECK_OK(append("s1", slice(events, 3, events.size())));
  BOOST_TEST((read_all("s1") == events));
}

BOOST_AUTO_TEST_CASE(session_ids_that_share_a_prefix_stay_apart) {
  SessionBuilder a, b, c;
  a.start("a");
  b.start("b").turn();
  c.start("c").turn().turn();
  CHECK_OK(append("s1", a.events()));
  CHECK_OK(append("s10", b.events()));
  CHECK_OK(append("s1.x", c.events()));
  BOOST_TEST((read_all("s1") == a.events()));
  BOOST_TEST((read_all("s10") == b.events()));
  BOOST_TEST((read_all("s1.x") == c.events()));
  std::vector<std::string> ids;
  CHECK_OK(log->list_logged_sessions(&ids));
  BOOST_TEST((ids == std::vector<std::string>{"s1", "s1.x", "s10"}));
  uint64_t last = 0;
  CHECK_OK(log->last_seq("s1", &last));
  BOOST_TEST(last == a.events().size());
}

BOOST_AUTO_TEST_CASE(bad_session_ids_are_refused) {
  SessionBuilder b;
  b.start();
  for (std::string id : {std::string(""), std::string("a b"), std::string("x\0y", 3), std::string(200, 'a'),
                         std::string("ünï")}) {
    Status s = append(id, b.events());
    BOOST_TEST(s.is_invalid_argument(), s.to_string());
  }
}

BOOST_AUTO_TEST_CASE(generated_session_ids_are_valid_and_carry_their_prefix) {
  std::string id = keys::generate_session_id("synth");
  BOOST_TEST(id.rfind("synth-", 0) == 0u, id);
  BOOST_TEST(id.size() == std::string("synth-20261121-193000-4f2a09c1").size(), id);
  BOOST_TEST(keys::validate_session_id(id).ok(), id);
  SessionBuilder b;
  b.start();
  BOOST_TEST(append(id, b.events()).ok());
}

BOOST_AUTO_TEST_CASE(checkpoint_and_index_entries_commit_with_their_batch) {
  SessionBuilder b;
  b.start();
  const Event& commit = b.events().back();
  const auto& c = std::get<TurnCommitted>(commit.body);
  CheckpointEntry entry{.seq = commit.seq, .turn = c.turn, .state_hash = c.state_hash};
  SessionMeta meta = meta_from_state("s1", b.state(), 1234, nullptr);
  CHECK_OK(log->append(AppendRequest{.session = "s1",
                                     .events = b.events(),
                                     .durability = Durability::kSynced,
                                     .meta = &meta,
                                     .checkpoints = std::span(&entry, 1)}));
  std::vector<CheckpointEntry> checkpoints;
  CHECK_OK(log->checkpoints("s1", &checkpoints));
  BOOST_REQUIRE(checkpoints.size() == 1u);
  BOOST_TEST((checkpoints[0] == entry));
  SessionMeta stored;
  CHECK_OK(log->get_meta("s1", &stored));
  BOOST_TEST((stored == meta));
  std::vector<SessionMeta> all;
  CHECK_OK(log->list_sessions(&all));
  BOOST_TEST(all.size() == 1u);
  BOOST_TEST(log->get_meta("nope", &stored).is_not_found());
}

BOOST_AUTO_TEST_CASE(a_checkpoint_entry_must_index_a_turn_committed_of_its_batch) {
  SessionBuilder b;
  b.start();
  CheckpointEntry wrong{.seq = 1, .turn = 0};
  Status s = log->append(AppendRequest{.session = "s1", .events = b.events(), .checkpoints = std::span(&wrong, 1)});
  BOOST_TEST(s.is_invalid_argument());
  uint64_t last = 0;
  CHECK_OK(log->last_seq("s1", &last));
  BOOST_TEST(last == 0u);  // nothing was written
}

BOOST_AUTO_TEST_CASE(durable_appends_from_many_threads_all_land) {
  // Blocking appends, written from each thread.
  constexpr int kSessions = 16;
  constexpr int kTurns = 15;
  std::vector<SessionBuilder> builders(kSessions);
  for (auto& b : builders) {
    b.start();
    for (int t = 0; t < kTurns; ++t) b.turn({"shell"});
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> appends{0};
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      const auto& events = builders[i].events();
      size_t pos = 0;
      while (pos < events.size()) {
        size_t end = std::min(events.size(), pos + 7);
        Status s = append("session-" + std::to_string(i), slice(events, pos, end), Durability::kSynced);
        if (!s.ok()) ++failures;
        ++appends;
        pos = end;
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(failures.load() == 0);
  for (int i = 0; i < kSessions; ++i) {
    BOOST_TEST((read_all("session-" + std::to_string(i)) == builders[i].events()));
  }
  BOOST_TEST(log->durable_appends() == appends.load());
}

BOOST_AUTO_TEST_CASE(asynchronous_durable_appends_share_syncs_and_keep_order) {
  // Appends queued while the committer syncs go out together in one write.
  constexpr int kSessions = 16;
  std::vector<SessionBuilder> builders(kSessions);
  for (auto& b : builders) b.start().turn().turn();
  std::vector<std::promise<Status>> done(kSessions * 4);
  std::vector<std::future<Status>> futures;
  for (auto& p : done) futures.push_back(p.get_future());
  size_t slot = 0;
  for (int i = 0; i < kSessions; ++i) {
    const auto& events = builders[i].events();
    for (size_t pos = 0; pos < events.size(); pos += 4) {
      size_t n = std::min<size_t>(4, events.size() - pos);
      auto* p = &done[slot++];
      log->append_async(AppendRequest{.session = "async-" + std::to_string(i),
                                      .events = std::span(events).subspan(pos, n),
                                      .durability = Durability::kSynced},
                        [p](Status s) { p->set_value(s); });
    }
  }
  for (size_t i = 0; i < slot; ++i) CHECK_OK(futures[i].get());
  for (int i = 0; i < kSessions; ++i) {
    BOOST_TEST((read_all("async-" + std::to_string(i)) == builders[i].events()));
  }
  BOOST_TEST(log->durable_appends() == slot);
  BOOST_TEST(log->durable_syncs() >= 1u);
  BOOST_TEST(log->durable_syncs() <= slot);
  BOOST_TEST_MESSAGE(slot << " asynchronous durable appends took " << log->durable_syncs()
                          << " synced writes");
}

BOOST_AUTO_TEST_CASE(a_buffered_append_may_follow_a_durable_one_still_in_flight) {
  SessionBuilder b;
  b.start().turn().turn();
  const auto& events = b.events();
  std::promise<Status> first;
  log->append_async(
      AppendRequest{
          .session = "s1", .events = std::span(events).subspan(0, 3), .durability = Durability::kSynced},
      [&](Status s) { first.set_value(s); });
  // Without waiting: the log queues this behind the durable append.
  CHECK_OK(append("s1", slice(events, 3, events.size())));
  CHECK_OK(first.get_future().get());
  BOOST_TEST((read_all("s1") == events));
}

// A durable append's records are in the log when append_async returns; what
// the session writes next goes in behind them at once, not after the sync.
BOOST_AUTO_TEST_CASE(a_session_writes_on_while_its_durable_append_syncs) {
  auto gate = std::make_shared<testing::GatedSyncFs>();
  log.reset();
  CHECK_OK(EventLog::open(EventLog::Options{.path = dir.sub("gated"), .file_system = gate}, &log));
  SessionBuilder b;
  b.start().turn().turn();
  const auto& events = b.events();
  gate->close_gate();
  std::promise<Status> durable;
  auto durable_done = durable.get_future();
  log->append_async(
      AppendRequest{
          .session = "s1", .events = std::span(events).subspan(0, 3), .durability = Durability::kSynced},
      [&](Status s) { durable.set_value(s); });
  BOOST_REQUIRE(gate->wait_for_held(1, std::chrono::seconds(10)));
  BOOST_TEST(read_all("s1").size() == 3u);  // written, not yet durable
  auto next = std::async(std::launch::async, [&] { return append("s1", slice(events, 3, events.size())); });
  const bool went_on = next.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!went_on) {
    gate->open_gate();
    durable_done.wait();
  }
  BOOST_REQUIRE_MESSAGE(went_on, "the buffered append waited for the sync of the durable one");
  CHECK_OK(next.get());
  BOOST_TEST((durable_done.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout));
  BOOST_TEST((read_all("s1") == events));
  gate->open_gate();
  CHECK_OK(durable_done.get());
}

BOOST_AUTO_TEST_CASE(the_data_directory_is_owner_only) {
  struct stat st {};
  BOOST_REQUIRE(::stat(path().c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
}

BOOST_AUTO_TEST_CASE(a_second_writer_is_kept_out_and_readers_are_not) {
  SessionBuilder b;
  b.start().turn();
  CHECK_OK(append("s1", b.events(), Durability::kSynced));
  std::unique_ptr<EventLog> second;
  Status s = EventLog::open(EventLog::Options{.path = path()}, &second);
  BOOST_TEST(s.is_busy(), s.to_string());
  BOOST_TEST((s.detail() == Status::Detail::kLockHeld));
  BOOST_TEST(s.message().find("this process") != std::string::npos, s.message());

  std::unique_ptr<EventLog> reader;
  CHECK_OK(EventLog::open(EventLog::Options{.path = path(), .mode = EventLog::Mode::kReader}, &reader));
  std::vector<Event> seen;
  CHECK_OK(reader->read("s1", 1, UINT64_MAX, &seen));
  BOOST_TEST((seen == b.events()));
  BOOST_TEST(reader->append(AppendRequest{.session = "s1", .events = b.events()}).is_invalid_argument());

  // The writer goes on; the reader catches up on refresh().
  SessionBuilder more = b;
  more.turn();
  CHECK_OK(append("s1", slice(more.events(), b.events().size(), more.events().size()), Durability::kSynced));
  CHECK_OK(reader->refresh());
  seen.clear();
  CHECK_OK(reader->read("s1", 1, UINT64_MAX, &seen));
  BOOST_TEST((seen == more.events()));
}

BOOST_AUTO_TEST_CASE(a_writer_in_another_process_is_named_by_its_pid) {
  std::string other = dir.sub("other");
  int ready[2];
  BOOST_REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    std::unique_ptr<EventLog> held;
    bool ok = EventLog::open(EventLog::Options{.path = other}, &held).ok();
    [[maybe_unused]] ssize_t n = ::write(ready[1], ok ? "1" : "0", 1);
    ::pause();  // holds the lock until killed
    ::_exit(0);
  }
  char c = 0;
  BOOST_REQUIRE(::read(ready[0], &c, 1) == 1);
  BOOST_REQUIRE(c == '1');
  std::unique_ptr<EventLog> second;
  Status s = EventLog::open(EventLog::Options{.path = other}, &second);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  BOOST_TEST(s.is_busy(), s.to_string());
  BOOST_TEST((s.detail() == Status::Detail::kLockHeld));
  BOOST_TEST(s.message().find("pid " + std::to_string(child)) != std::string::npos, s.message());
  // Once the holder is gone, the log opens.
  CHECK_OK(EventLog::open(EventLog::Options{.path = other}, &second));
}

BOOST_AUTO_TEST_CASE(a_reader_of_a_missing_log_gets_not_found) {
  std::unique_ptr<EventLog> reader;
  Status s =
      EventLog::open(EventLog::Options{.path = dir.sub("nothing"), .mode = EventLog::Mode::kReader}, &reader);
  BOOST_TEST(s.is_not_found());
}

BOOST_AUTO_TEST_CASE(the_latest_intact_snapshot_is_found) {
  for (uint64_t seq : {10, 20, 30}) {
    CHECK_OK(log->put_snapshot(
        "s1", SnapshotEntry{.seq = seq, .turn = seq / 10, .state = "state@" + std::to_string(seq)}));
  }
  CHECK_OK(log->put_snapshot("s10", SnapshotEntry{.seq = 99, .turn = 9, .state = "other session"}));
  SnapshotEntry snap;
  CHECK_OK(log->latest_snapshot("s1", UINT64_MAX, &snap));
  BOOST_TEST(snap.seq == 30u);
  BOOST_TEST(snap.state == "state@30");
  CHECK_OK(log->latest_snapshot("s1", 25, &snap));
  BOOST_TEST(snap.seq == 20u);
  BOOST_TEST(snap.turn == 2u);
  BOOST_TEST(log->latest_snapshot("s1", 15, &snap).is_not_found());  // the oldest was pruned: two are kept
  BOOST_TEST(log->latest_snapshot("s1", 5, &snap).is_not_found());
  CHECK_OK(log->latest_snapshot("s10", UINT64_MAX, &snap));  // other sessions keep theirs
  BOOST_TEST(snap.seq == 99u);

  log.reset();
  {
    testing::RawDb raw(path());
    std::string key = keys::seq_key("s1", 30);
    std::string value = raw.get(kSnapshotsFamily, key);
    value[value.size() - 1] ^= 1;
    raw.put(kSnapshotsFamily, key, value);
  }
  open();
  uint64_t skipped = 0;
  CHECK_OK(log->latest_snapshot("s1", UINT64_MAX, &snap, &skipped));
  BOOST_TEST(snap.seq == 20u);
  BOOST_TEST(skipped == 1u);
  std::vector<std::pair<SnapshotEntry, Status>> all;
  CHECK_OK(log->snapshots("s1", &all));
  BOOST_REQUIRE(all.size() == 2u);
  BOOST_TEST(all[0].second.ok());
  BOOST_TEST(all[1].second.is_corruption());
}

// A block of the snapshots family is often one whole state. Finding one
// session's snapshot must not read the blocks of the session that sorts
// next, in the table files that hold only that one's (a bloom filter on the
// session prefix skips them), from a writer or a reader.
BOOST_AUTO_TEST_CASE(finding_a_snapshot_reads_no_block_of_another_session) {
  // Past the 16 KB block size: the block that holds it holds nothing else.
  const std::string small = incompressible(20 << 10, 1);
  CHECK_OK(log->put_snapshot("a", SnapshotEntry{.seq = 7, .turn = 1, .state = small}));
  constexpr size_t kBig = 2 << 20;
  for (uint64_t seq = 10; seq < 300; seq += 10) {  // 58 MB: several table files, none with "a"
    CHECK_OK(
        log->put_snapshot("b", SnapshotEntry{.seq = seq, .turn = seq, .state = incompressible(kBig, seq)}));
  }
  for (auto mode : {EventLog::Mode::kWriter, EventLog::Mode::kReader}) {
    open(mode);  // an empty block cache
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    SnapshotEntry snap;
    CHECK_OK(log->latest_snapshot("a", UINT64_MAX, &snap));
    uint64_t read = rocksdb::get_perf_context()->block_read_byte;
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    BOOST_TEST((snap.state == small));
    BOOST_TEST(read < 2 * small.size(), read << " bytes of blocks read to find a snapshot of 20 KB");
    CHECK_OK(log->latest_snapshot("b", UINT64_MAX, &snap));
    BOOST_TEST(snap.seq == 290u);
    BOOST_TEST((snap.state == incompressible(kBig, 290)));
    CHECK_OK(log->latest_snapshot("b", 285, &snap));
    BOOST_TEST(snap.seq == 280u);
    BOOST_TEST(log->latest_snapshot("b", 275, &snap).is_not_found());  // two are kept
    BOOST_TEST(log->latest_snapshot("c", UINT64_MAX, &snap).is_not_found());
  }
  // A removed session's range deletion reaches past the filter: the files
  // that hold the snapshots are not the file that holds their deletion.
  open();
  CHECK_OK(log->remove_session("b"));
  for (auto mode : {EventLog::Mode::kWriter, EventLog::Mode::kReader}) {
    open(mode);
    SnapshotEntry snap;
    BOOST_TEST(log->latest_snapshot("b", UINT64_MAX, &snap).is_not_found());
    std::vector<std::pair<SnapshotEntry, Status>> all;
    CHECK_OK(log->snapshots("b", &all));
    BOOST_TEST(all.empty());
    CHECK_OK(log->latest_snapshot("a", UINT64_MAX, &snap));
    BOOST_TEST(snap.seq == 7u);
  }
}

// Table files of the snapshots family written without the session filter
// (as a build before it wrote them) are read as before, beside files that
// have it, and pruning old snapshots reaches into them.
BOOST_AUTO_TEST_CASE(snapshots_in_table_files_without_the_filter_are_found) {
  for (uint64_t seq : {10, 20}) {
    CHECK_OK(
        log->put_snapshot("a", SnapshotEntry{.seq = seq, .turn = seq, .state = "a@" + std::to_string(seq)}));
    CHECK_OK(
        log->put_snapshot("b", SnapshotEntry{.seq = seq, .turn = seq, .state = "b@" + std::to_string(seq)}));
  }
  log.reset();
  {
    testing::RawDb raw(path());  // recovers the log's writes with RocksDB's defaults
    raw.flush();
    std::vector<std::string> extractors = raw.prefix_extractors(kSnapshotsFamily);
    BOOST_REQUIRE(!extractors.empty());
    for (const auto& name : extractors) BOOST_TEST(name == "nullptr");
  }
  open();
  CHECK_OK(log->put_snapshot("a", SnapshotEntry{.seq = 30, .turn = 30, .state = "a@30"}));
  open();  // recovers that write into a table file of its own, with the filter
  log.reset();
  {
    testing::RawDb raw(path());
    std::vector<std::string> extractors = raw.prefix_extractors(kSnapshotsFamily);
    BOOST_TEST(std::count(extractors.begin(), extractors.end(), "nullptr") >= 1);
    BOOST_TEST(std::count(extractors.begin(), extractors.end(), "carapace.SessionPrefix") >= 1);
  }
  for (auto mode : {EventLog::Mode::kWriter, EventLog::Mode::kReader}) {
    open(mode);
    SnapshotEntry snap;
    CHECK_OK(log->latest_snapshot("a", UINT64_MAX, &snap));
    BOOST_TEST(snap.state == "a@30");
    CHECK_OK(log->latest_snapshot("a", 29, &snap));
    BOOST_TEST(snap.state == "a@20");
    BOOST_TEST(log->latest_snapshot("a", 19, &snap).is_not_found());  // pruned, in the older file
    CHECK_OK(log->latest_snapshot("b", UINT64_MAX, &snap));
    BOOST_TEST(snap.state == "b@20");
    CHECK_OK(log->latest_snapshot("b", 15, &snap));
    BOOST_TEST(snap.state == "b@10");
  }
}

BOOST_AUTO_TEST_CASE(a_cursor_reports_the_damaged_record_by_seq) {
  SessionBuilder b;
  b.start().turn();
  CHECK_OK(append("s1", b.events()));
  log.reset();
  {
    testing::RawDb raw(path());
    std::string key = keys::seq_key("s1", 4);
    std::string value = raw.get(kEventsFamily, key);
    value[value.size() / 2] ^= 0x40;
    raw.put(kEventsFamily, key, value);
  }
  open(EventLog::Mode::kReader);
  std::vector<Event> out;
  Status s = log->read("s1", 1, UINT64_MAX, &out);
  BOOST_TEST(s.is_corruption());
  BOOST_TEST(s.message().find("session s1 seq 4: checksum mismatch") != std::string::npos, s.message());
  BOOST_TEST(out.size() == 3u);  // the records before it
}

// A write outside the committer failed (a full disk in RocksDB's write-ahead
// log): the committer writes and syncs nothing more, and says why. RocksDB
// 7.8 aborts the process when it syncs a WAL file a write failed on.
BOOST_AUTO_TEST_CASE(the_committer_writes_and_syncs_nothing_after_a_write_outside_it_failed) {
  TempDir raw_dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  BOOST_REQUIRE(rocksdb::DB::Open(options, raw_dir.sub("db"), &db).ok());
  {
    GroupCommitter committer(db, {db->DefaultColumnFamily()});
    auto commit = [&](rocksdb::WriteBatch batch) {
      std::promise<rocksdb::Status> done;
      committer.submit(std::move(batch), [&](const rocksdb::Status& s) { done.set_value(s); });
      return done.get_future().get();
    };
    rocksdb::WriteBatch before;
    BOOST_REQUIRE(before.Put("before", "1").ok());
    BOOST_TEST(commit(std::move(before)).ok());
    committer.fail(rocksdb::Status::IOError("No space left on device"));
    rocksdb::WriteBatch after;
    BOOST_REQUIRE(after.Put("after", "1").ok());
    rocksdb::Status s = commit(std::move(after));
    BOOST_TEST(s.IsIOError(), s.ToString());
    BOOST_TEST(s.ToString().find("No space left on device") != std::string::npos, s.ToString());
    std::promise<rocksdb::Status> synced;
    committer.submit_sync([&](const rocksdb::Status& st) { synced.set_value(st); });
    BOOST_TEST(synced.get_future().get().IsIOError());
    std::string value;
    BOOST_TEST(db->Get(rocksdb::ReadOptions(), "before", &value).ok());
    BOOST_TEST(db->Get(rocksdb::ReadOptions(), "after", &value).IsNotFound());
  }
  delete db;
}

// A runtime's log runs under a cap on all its memtables together
// (Runtime::Options::log_write_buffer_bytes, 1 MB), and its families must
// each reach a fair share of it before they flush: every small table file is
// one more merge into level 1, which rewrites that level. 16 sessions of 400
// turns (~3 MB of events, the index, checkpoints and time index written with
// each, and a snapshot every 100 turns), as the runtime writes them: 42-58
// table files in all; 118-135 when the five families' first arena blocks
// alone took 5/8 of the cap (storage/db_options.cc).
BOOST_AUTO_TEST_CASE(a_log_under_a_memory_cap_flushes_in_large_files) {
  auto counter = std::make_shared<TableFileCounter>();
  open_capped(counter);
  constexpr int kSessions = 16;
  constexpr int kTurns = 400;
  std::vector<SessionBuilder> sessions(kSessions);
  uint64_t event_bytes = 0;
  for (int t = 0; t <= kTurns; ++t) {
    for (int i = 0; i < kSessions; ++i) {
      SessionBuilder& b = sessions[i];
      size_t from = b.events().size();
      if (t == 0) {
        b.start();
      } else {
        uint64_t turn = b.state().turn + 1;
        std::string id = "c" + std::to_string(turn);
        b.add(TurnStarted{turn});
        b.add(LlmRequested{.turn = turn, .attempt = 1, .model = "m1"});
        b.add(LlmResponded{.turn = turn,
                           .attempt = 1,
                           .text = "calling the tool for turn " + std::to_string(turn),
                           .tool_calls = {{id, "shell", JsonText{"{\"command\":\"ls\"}"}}}});
        b.add(ToolRequested{id, "shell", JsonText{"{\"command\":\"ls\"}"}});
        std::string out;
        while (out.size() < 200) out += "line " + std::to_string(out.size() * 7 + turn) + " of the output\n";
        b.add(ToolCompleted{.call_id = id, .tool = "shell", .output = out});
        b.commit();
      }
      std::string session = "s" + std::to_string(i);
      const Event& commit = b.events().back();
      CheckpointEntry entry{.seq = commit.seq,
                            .turn = std::get<TurnCommitted>(commit.body).turn,
                            .state_hash = std::get<TurnCommitted>(commit.body).state_hash};
      SessionMeta meta = meta_from_state(session, b.state(), 1'000'000 * (t + 1), nullptr);
      CHECK_OK(log->append(AppendRequest{.session = session,
                                         .events = slice(b.events(), from, b.events().size()),
                                         .meta = &meta,
                                         .checkpoints = std::span(&entry, 1),
                                         .event_bytes = &event_bytes}));
      if (t % 100 == 50) {
        CHECK_OK(log->put_snapshot(
            session, SnapshotEntry{.seq = commit.seq, .turn = entry.turn, .state = encode_state(b.state())}));
      }
    }
  }
  log.reset();
  uint64_t tables = counter->tables;
  uint64_t table_bytes = counter->table_bytes;
  BOOST_TEST_MESSAGE(tables << " table files, " << table_bytes << " bytes, for " << event_bytes
                            << " bytes of events");
  BOOST_TEST(event_bytes > (2u << 20));
  BOOST_TEST(tables <= 85u, tables << " table files written");
  open(EventLog::Mode::kReader);
  for (int i = 0; i < kSessions; ++i) BOOST_TEST((read_all("s" + std::to_string(i)) == sessions[i].events()));
}

// Sessions come and go under one that lives throughout (a service's): every
// flush spans the keys from the long one's to the newest session's. With
// RocksDB's level sizes (level 1 up to 256 MB), each compaction of level 0
// rewrote most of level 1, which only grew, so the bytes written grew with
// the square of the log: for these 160 MB of events, 9.9 times what the log
// stores at the end (891 MB for 90), against 5.9 times with level 1 sized
// to level 0 (size_levels_to_flushes; bench/README.md, compaction_bench, for
// the growth). Under the load of the whole suite the sized log wrote a
// quarter more (6.5 times for 96 MB, against 5.1-5.4 alone): hence 8.
BOOST_AUTO_TEST_CASE(a_log_under_a_memory_cap_rewrites_what_it_stores_a_few_times_not_ever_more) {
  auto counter = std::make_shared<TableFileCounter>();
  open_capped(counter);
  constexpr int kAtOnce = 16;
  constexpr int kTurnsEach = 30;
  constexpr uint64_t kEventBytes = 160 << 20;
  struct Live {
    std::string id;
    SessionBuilder b;
    bool opened = false;  // its opening events are in the log
  };
  std::vector<Live> live(kAtOnce);
  int next_id = 0;
  auto fresh = [&](Live& l, bool long_lived) {
    char id[32];
    std::snprintf(id, sizeof id, long_lived ? "a-long" : "s-%06d", next_id++);
    l = Live{id, SessionBuilder()};
    l.b.start();
  };
  for (int i = 0; i < kAtOnce; ++i) fresh(live[i], i == 0);
  std::mt19937 rng(7);
  uint64_t event_bytes = 0;
  std::vector<std::string> ids;
  std::vector<Event> finished;  // the last finished session's
  for (uint64_t round = 0; event_bytes < kEventBytes; ++round) {
    for (int i = 0; i < kAtOnce; ++i) {
      Live& l = live[i];
      size_t from = 0;
      if (!l.opened) {
        l.opened = true;
      } else {
        from = l.b.events().size();
        uint64_t turn = l.b.state().turn + 1;
        std::string call = "c" + std::to_string(turn);
        l.b.add(TurnStarted{turn});
        l.b.add(LlmRequested{.turn = turn, .attempt = 1, .model = "m1"});
        l.b.add(LlmResponded{.turn = turn,
                             .attempt = 1,
                             .text = "calling the tool for turn " + std::to_string(turn),
                             .tool_calls = {{call, "shell", JsonText{"{\"command\":\"ls\"}"}}}});
        l.b.add(ToolRequested{call, "shell", JsonText{"{\"command\":\"ls\"}"}});
        std::string out;
        while (out.size() < 600) out += "file_" + std::to_string(rng() % 100000) + ".txt\n";
        l.b.add(ToolCompleted{.call_id = call, .tool = "shell", .output = out});
        l.b.commit();
      }
      const Event& commit = l.b.events().back();
      CheckpointEntry entry{.seq = commit.seq,
                            .turn = std::get<TurnCommitted>(commit.body).turn,
                            .state_hash = std::get<TurnCommitted>(commit.body).state_hash};
      SessionMeta meta = meta_from_state(l.id, l.b.state(), 1'000'000 * (round + 1), nullptr);
      CHECK_OK(log->append(AppendRequest{.session = l.id,
                                         .events = slice(l.b.events(), from, l.b.events().size()),
                                         .meta = &meta,
                                         .checkpoints = std::span(&entry, 1),
                                         .event_bytes = &event_bytes}));
      if (i != 0 && l.b.state().turn == kTurnsEach) {
        ids.push_back(l.id);
        finished = l.b.events();
        fresh(l, false);
      }
    }
  }
  const uint64_t before_close = counter->table_bytes;
  log.reset();
  BOOST_TEST_MESSAGE(before_close << " bytes of table files written before the close");
  // What the log holds once compacted, against what compaction and flushes wrote.
  const uint64_t written = counter->table_bytes;
  uint64_t stored = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path())) {
    if (entry.path().extension() == ".sst") stored += entry.file_size();
  }
  BOOST_TEST_MESSAGE(written << " bytes of table files written, " << stored << " stored, for " << event_bytes
                             << " bytes of events in " << next_id << " sessions");
  BOOST_TEST(ids.size() > 600u);
  BOOST_TEST(written <= 8 * stored, written << " bytes written to store " << stored);
  open(EventLog::Mode::kReader);
  BOOST_TEST((read_all("a-long") == live[0].b.events()));
  BOOST_TEST((read_all(ids.back()) == finished));
}

// The arena blocks follow the cap (1/64 of it), never smaller than RocksDB
// takes nor larger than its own choice (an eighth of a family's buffer, at
// most 1 MB); a log without a cap keeps RocksDB's.
BOOST_AUTO_TEST_CASE(arena_blocks_follow_the_memory_cap_within_rocksdbs_bounds) {
  auto block = [](size_t cap) { return log_db_options(true, 2 << 20, cap).family.arena_block_size; };
  BOOST_TEST(block(0) == 0u);  // RocksDB's default
  BOOST_TEST(block(64 << 10) == 4096u);
  BOOST_TEST(block(1 << 20) == 16384u);
  BOOST_TEST(block(16 << 20) == 262144u);
  BOOST_TEST(block(size_t{1} << 30) == 1048576u);
  BOOST_TEST(log_db_options(true, 2 << 20, 1 << 20).snapshots.arena_block_size == 16384u);
}

// Level 1 holds what four flushes do (at least 4 MB), in files of at least
// 8 MB; at most RocksDB's 64 MB files, whatever the buffers. Every family.
BOOST_AUTO_TEST_CASE(level_sizes_follow_the_write_buffers) {
  const LogDbOptions capped = log_db_options(true, 2 << 20, 1 << 20);
  for (const auto* f : {&capped.family, &capped.snapshots}) {
    BOOST_TEST(f->max_bytes_for_level_base == uint64_t{4} << 20);
    BOOST_TEST(f->target_file_size_base == uint64_t{8} << 20);
  }
  const LogDbOptions uncapped = log_db_options(true, 2 << 20, 0);  // 16 MB buffers
  BOOST_TEST(uncapped.family.max_bytes_for_level_base == uint64_t{64} << 20);
  BOOST_TEST(uncapped.family.target_file_size_base == uint64_t{64} << 20);
  rocksdb::ColumnFamilyOptions big;
  big.write_buffer_size = size_t{256} << 20;
  size_levels_to_flushes(big);
  BOOST_TEST(big.max_bytes_for_level_base == uint64_t{64} << 20);
}

BOOST_AUTO_TEST_SUITE_END()
