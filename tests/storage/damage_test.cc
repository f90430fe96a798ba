// Damaged storage: every open applies the same WAL recovery rule (a torn tail
// is tolerated, damage before it refuses the open and changes nothing), a
// directory that lost CURRENT or its MANIFEST is never opened over, and
// `repair` rebuilds the log from every intact record, closing the sessions
// that lost records, with the original kept aside.
#include <sys/wait.h>
#include <unistd.h>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "storage/db_salvage.h"
#include "storage/event_log.h"
#include "storage/keys.h"
#include "storage/wal_scan.h"
#include "tests/support/full_disk_fs.h"
#include "tests/support/log_fixture.h"
#include "tests/support/raw_db.h"

using namespace carapace;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

fs::path newest_wal(const std::string& dir) {
  std::vector<fs::path> wals;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".log") wals.push_back(e.path());
  }
  BOOST_REQUIRE(!wals.empty());
  return *std::max_element(wals.begin(), wals.end());
}

// Every file of a directory with its bytes: what "nothing changed" compares.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("LOG", 0) != 0) {
      out[e.path().filename().string()] = read_bytes(e.path());
    }
  }
  return out;
}

// Two sessions of five turns written by a process that then died (exited
// without closing the log, as a crash or a power cut leaves it): the newest
// WAL holds both. (A writer that closes writes them to table files first.)
struct Damaged : testing::LogFixture {
  std::vector<Event> a, b;
  Damaged() {
    close();
    const pid_t writer = ::fork();
    BOOST_REQUIRE(writer >= 0);
    if (writer == 0) {
      open();
      synth("a", 5);
      synth("b", 5, 0, 2);
      ::_exit(0);
    }
    int status = 0;
    BOOST_REQUIRE(::waitpid(writer, &status, 0) == writer);
    BOOST_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    open(EventLog::Mode::kReader);  // a reader changes no file of the log
    a = read_all("a");
    b = read_all("b");
    close();
  }
  // Flips one byte of the newest WAL inside the write of session b's record
  // at `seq` (just after its key); returns the byte's offset.
  uint64_t flip_in_wal(uint64_t seq = 20) {
    fs::path wal = newest_wal(path());
    std::string bytes = read_bytes(wal);
    size_t key_at = bytes.find(keys::seq_key("b", seq));
    BOOST_REQUIRE(key_at != std::string::npos);
    uint64_t at = key_at + keys::seq_key("b", seq).size() + 8;
    bytes[at] = static_cast<char>(bytes[at] ^ 0xFF);
    write_bytes(wal, bytes);
    return at;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(damage)

BOOST_AUTO_TEST_CASE(the_wal_scanner_reads_rocksdbs_own_wal_and_finds_the_damaged_record) {
  Damaged d;
  fs::path wal = newest_wal(d.path());
  WalScan whole = scan_wal(read_bytes(wal));
  BOOST_TEST(!whole.damaged);
  BOOST_TEST(!whole.cut_short);
  BOOST_TEST(whole.records > 10u);
  uint64_t at = d.flip_in_wal();
  WalScan flipped = scan_wal(read_bytes(wal));
  BOOST_TEST(flipped.damaged);
  BOOST_TEST(flipped.offset <= at);
  BOOST_TEST(flipped.reason == "a checksum mismatch");
  std::string cut = read_bytes(wal).substr(0, whole.bytes - 3);
  BOOST_TEST(scan_wal(cut).damaged);  // the flip comes first
}

BOOST_AUTO_TEST_CASE(damage_before_the_wal_tail_refuses_writers_and_readers_and_changes_nothing) {
  Damaged d;
  d.flip_in_wal();
  auto before = contents(d.path());
  for (auto mode : {EventLog::Mode::kWriter, EventLog::Mode::kReader}) {
    std::unique_ptr<EventLog> log;
    Status s = EventLog::open(EventLog::Options{.path = d.path(), .mode = mode}, &log);
    BOOST_TEST(s.is_corruption(), s.to_string());
    BOOST_TEST(s.message().find(newest_wal(d.path()).filename().string()) != std::string::npos, s.to_string());
    BOOST_TEST(s.message().find("at byte") != std::string::npos, s.to_string());
    BOOST_TEST(s.message().find("carapace repair") != std::string::npos, s.to_string());
  }
  BOOST_TEST((contents(d.path()) == before), "an open that failed changed the directory");
}

BOOST_AUTO_TEST_CASE(a_torn_tail_is_tolerated_and_everything_before_it_kept) {
  Damaged d;
  fs::path wal = newest_wal(d.path());
  std::string bytes = read_bytes(wal);
  WalScan whole = scan_wal(bytes);
  write_bytes(wal, bytes.substr(0, bytes.size() - 5));  // the last write, cut short
  WalScan torn = scan_wal(read_bytes(wal));
  BOOST_TEST(torn.cut_short);
  BOOST_TEST(!torn.damaged);
  BOOST_TEST(torn.records == whole.records - 1);
  d.open();
  // Only the last batch (the end of session b) is gone; a is whole.
  BOOST_TEST((d.read_all("a") == d.a));
  std::vector<Event> b = d.read_all("b");
  BOOST_TEST(b.size() < d.b.size());
  BOOST_TEST((std::equal(b.begin(), b.end(), d.b.begin())));
  d.synth("c", 1);  // and the log takes new writes
}

BOOST_AUTO_TEST_CASE(a_directory_without_current_or_its_manifest_is_never_opened_over) {
  for (std::string lost : {"CURRENT", "MANIFEST"}) {
    BOOST_TEST_CONTEXT(lost) {
      Damaged d;
      for (const auto& e : fs::directory_iterator(d.path())) {
        if (e.path().filename().string().rfind(lost, 0) == 0) fs::remove(e.path());
      }
      auto before = contents(d.path());
      for (auto mode : {EventLog::Mode::kWriter, EventLog::Mode::kReader}) {
        std::unique_ptr<EventLog> log;
        Status s = EventLog::open(EventLog::Options{.path = d.path(), .mode = mode}, &log);
        BOOST_TEST(s.is_corruption(), s.to_string());  // not busy, not "nothing written yet"
        BOOST_TEST(s.message().find(lost) != std::string::npos, s.to_string());
        BOOST_TEST(s.message().find("carapace repair") != std::string::npos, s.to_string());
      }
      BOOST_TEST((contents(d.path()) == before));
    }
  }
}

BOOST_AUTO_TEST_CASE(repair_after_a_lost_current_or_manifest_brings_back_every_record) {
  for (std::string lost : {"CURRENT", "MANIFEST"}) {
    BOOST_TEST_CONTEXT(lost) {
      Damaged d;
      for (const auto& e : fs::directory_iterator(d.path())) {
        if (e.path().filename().string().rfind(lost, 0) == 0) fs::remove(e.path());
      }
      auto damaged = contents(d.path());
      SalvageReport r;
      CHECK_OK(salvage_log_db(d.path(), &r));
      BOOST_TEST(r.repaired);
      BOOST_REQUIRE(r.sessions.size() == 2u);
      for (const auto& s : r.sessions) {
        BOOST_TEST(!s.closed, s.id);
        BOOST_TEST(s.first_lost == 0u, s.id << ": " << s.why);
      }
      BOOST_TEST((contents(r.original) == damaged), "the original was changed");
      d.open();
      BOOST_TEST((d.read_all("a") == d.a));
      BOOST_TEST((d.read_all("b") == d.b));
      SessionMeta meta;
      CHECK_OK(d.log->get_meta("a", &meta));
      BOOST_TEST((meta.status == SessionStatus::kCompleted));
    }
  }
}

BOOST_AUTO_TEST_CASE(repair_after_wal_damage_closes_the_session_that_lost_records_and_keeps_the_rest) {
  Damaged d;
  d.flip_in_wal();
  SalvageReport r;
  CHECK_OK(salvage_log_db(d.path(), &r));
  BOOST_TEST(r.repaired);
  BOOST_TEST(r.damaged_wal_records >= 1u);
  std::map<std::string, SalvagedSession> by_id;
  for (const auto& s : r.sessions) by_id[s.id] = s;
  BOOST_REQUIRE(by_id.count("a") == 1u);
  BOOST_REQUIRE(by_id.count("b") == 1u);
  // The flip lands in b's record of seq 20: b lost that write's records, a none.
  BOOST_TEST(!by_id["a"].closed);
  const SalvagedSession& b = by_id["b"];
  BOOST_TEST(b.closed);
  BOOST_TEST(b.first_lost > 0u);
  BOOST_TEST(b.first_lost <= 20u);
  BOOST_TEST(b.kept_to < b.first_lost);
  BOOST_TEST(b.highest_seq == d.b.size());  // records after the damage were found, and reported
  d.open();
  BOOST_TEST((d.read_all("a") == d.a));
  std::vector<Event> kept = d.read_all("b");
  BOOST_REQUIRE_MESSAGE(kept.size() == b.kept_to + 2, kept.size() << " vs " << b.kept_to << " " << b.why);  // the history to its last good checkpoint, then the closing step
  BOOST_TEST((std::equal(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(b.kept_to), d.b.begin())));
  BOOST_TEST(get_if<TurnCommitted>(kept[b.kept_to - 1]) != nullptr);
  const auto* failed = get_if<SessionFailed>(kept[b.kept_to]);
  BOOST_REQUIRE(failed != nullptr);
  BOOST_TEST(failed->stop_reason == "log_damaged");
  SessionMeta meta;
  CHECK_OK(d.log->get_meta("b", &meta));
  BOOST_TEST((meta.status == SessionStatus::kFailed));
}

BOOST_AUTO_TEST_CASE(repair_leaves_a_log_that_opens_alone) {
  Damaged d;
  auto before = contents(d.path());
  SalvageReport r;
  CHECK_OK(salvage_log_db(d.path(), &r));
  BOOST_TEST(!r.repaired);
  BOOST_TEST(r.original.empty());
  BOOST_TEST((contents(d.path()) == before));
  testing::TempDir nothing;
  BOOST_TEST(salvage_log_db(nothing.sub("none"), &r).is_not_found());
}

BOOST_AUTO_TEST_CASE(a_garbage_session_index_entry_is_named_and_the_others_still_listed) {
  Damaged d;
  {
    testing::RawDb raw(d.path());
    raw.put(kSessionsFamily, "a", "\xff\xff\xff garbage");
    raw.put(kSessionsFamily, std::string("bad\x01key", 7), "x");
  }
  d.open(EventLog::Mode::kReader);
  std::vector<SessionMeta> listed;
  std::vector<std::string> unreadable;
  CHECK_OK(d.log->list_sessions(&listed, &unreadable));
  BOOST_REQUIRE(listed.size() == 1u);
  BOOST_TEST(listed[0].id == "b");
  BOOST_REQUIRE(unreadable.size() == 2u);
  BOOST_TEST(unreadable[0].find("'a'") != std::string::npos, unreadable[0]);
  BOOST_TEST(unreadable[1].find("\\x01") != std::string::npos, unreadable[1]);
  listed.clear();
  BOOST_TEST(d.log->list_sessions(&listed).is_corruption());
}

BOOST_AUTO_TEST_CASE(a_full_disk_is_a_clean_error_and_the_log_goes_on_once_there_is_room) {
  testing::TempDir dir;
  auto disk = std::make_shared<testing::FullDiskFs>();
  auto open = [&](std::unique_ptr<EventLog>* log) {
    CHECK_OK(EventLog::open(EventLog::Options{.path = dir.sub("log"), .file_system = disk}, log));
  };
  std::unique_ptr<EventLog> log;
  open(&log);
  SyntheticWriteStats stats;
  CHECK_OK(write_synthetic_session(log.get(), "before", SyntheticOptions{.turns = 3}, JournalOptions{}, &stats));
  std::vector<Event> before;
  CHECK_OK(log->read("before", 1, UINT64_MAX, &before));
  disk->set_room(64 << 10);
  Status s = write_synthetic_session(log.get(), "big", SyntheticOptions{.turns = 2000}, JournalOptions{}, &stats);
  BOOST_TEST(disk->filled());
  BOOST_TEST(s.is_io_error(), s.to_string());
  BOOST_TEST((s.detail() == Status::Detail::kNoSpace), s.to_string());
  // The log stops writing, and says why, instead of half-writing.
  Status again = write_synthetic_session(log.get(), "after", SyntheticOptions{.turns = 1}, JournalOptions{}, &stats);
  BOOST_TEST(!again.ok());
  log.reset();  // closing on a full disk must not abort (RocksDB's info log once did)
  // Still full: opening fails cleanly too.
  std::unique_ptr<EventLog> full;
  Status reopen = EventLog::open(EventLog::Options{.path = dir.sub("log"), .file_system = disk}, &full);
  if (!reopen.ok()) BOOST_TEST((reopen.detail() == Status::Detail::kNoSpace), reopen.to_string());
  full.reset();
  disk->set_room(UINT64_MAX);
  open(&log);
  std::vector<Event> kept;
  CHECK_OK(log->read("before", 1, UINT64_MAX, &kept));
  BOOST_TEST((kept == before));
  std::vector<Event> big;
  CHECK_OK(log->read("big", 1, UINT64_MAX, &big));
  for (size_t i = 0; i < big.size(); ++i) BOOST_TEST(big[i].seq == i + 1);
  CHECK_OK(write_synthetic_session(log.get(), "after", SyntheticOptions{.turns = 2}, JournalOptions{}, &stats));
}

BOOST_AUTO_TEST_SUITE_END()
