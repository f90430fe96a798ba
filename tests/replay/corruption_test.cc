// Breaks stored records on purpose, directly through RocksDB, and checks that
// verify names the exact session, seq and reason, and that recovery refuses
// to fold past the damage.
#include <boost/test/unit_test.hpp>

#include <functional>

#include "events/record.h"
#include "events/record_format.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "storage/keys.h"
#include "tests/support/log_fixture.h"
#include "tests/support/raw_db.h"

using namespace carapace;

namespace {

struct CorruptionFixture : testing::LogFixture {
  // Rewrites the stored value of `seq` with `edit` while the log is closed.
  void tamper(const std::string& id, uint64_t seq, const std::function<void(std::string&)>& edit) {
    close();
    {
      testing::RawDb raw(path());
      std::string key = keys::seq_key(id, seq);
      std::string value = raw.get(kEventsFamily, key);
      edit(value);
      raw.put(kEventsFamily, key, value);
    }
    open(EventLog::Mode::kReader);
  }

  void put_record(const std::string& id, const Event& e) {
    close();
    {
      testing::RawDb raw(path());
      std::string key = keys::seq_key(id, e.seq);
      std::string value;
      encode_record(key, e, &value);
      raw.put(kEventsFamily, key, value);
    }
    open(EventLog::Mode::kReader);
  }

  VerifyReport verify(const std::string& id) {
    VerifyReport report;
    CHECK_OK(verify_session(*log, id, &report));
    return report;
  }

  Status recover_status(const std::string& id, RecoveredSession* r = nullptr) {
    RecoveredSession local;
    return recover(*log, id, RecoverOptions{}, r ? r : &local);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(corruption_tests, CorruptionFixture)

BOOST_AUTO_TEST_CASE(an_altered_byte_is_reported_at_its_seq_and_stops_recovery) {
  synth("s1", 20);
  uint64_t total = read_all("s1").size();
  tamper("s1", 57, [](std::string& v) { v[v.size() / 2] ^= 0x20; });

  VerifyReport report = verify("s1");
  BOOST_REQUIRE(!report.ok());
  BOOST_TEST(report.issues.front().session == "s1");
  BOOST_TEST(report.issues.front().seq == 57u);
  BOOST_TEST(report.issues.front().kind == "checksum");
  BOOST_TEST(report.sessions.front().events == total);  // every record was still checksummed

  RecoveredSession r;
  Status s = recover_status("s1", &r);
  BOOST_TEST(s.is_corruption());
  BOOST_TEST(s.message().find("session s1 seq 57: checksum mismatch") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(every_damaged_record_is_listed) {
  synth("s1", 10);
  tamper("s1", 12, [](std::string& v) { v[20] ^= 1; });
  tamper("s1", 30, [](std::string& v) { v[0] ^= 1; });
  VerifyReport report = verify("s1");
  BOOST_REQUIRE(report.issues.size() == 2u);
  BOOST_TEST(report.issues[0].seq == 12u);
  BOOST_TEST(report.issues[1].seq == 30u);
}

BOOST_AUTO_TEST_CASE(a_truncated_record_is_reported) {
  synth("s1", 5);
  tamper("s1", 9, [](std::string& v) { v.resize(10); });
  VerifyReport report = verify("s1");
  BOOST_REQUIRE(!report.ok());
  BOOST_TEST(report.issues.front().seq == 9u);
  BOOST_TEST(report.issues.front().detail.find("truncated: 10 bytes") != std::string::npos);
  BOOST_TEST(recover_status("s1").message().find("session s1 seq 9: record truncated") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_garbage_record_is_reported) {
  synth("s1", 5);
  tamper("s1", 4, [](std::string& v) { v.assign(40, '\x5a'); });
  VerifyReport report = verify("s1");
  BOOST_REQUIRE(!report.ok());
  BOOST_TEST(report.issues.front().seq == 4u);
  BOOST_TEST(report.issues.front().kind == "checksum");
  BOOST_TEST(recover_status("s1").is_corruption());
}

BOOST_AUTO_TEST_CASE(a_missing_record_is_a_gap) {
  synth("s1", 5);
  close();
  {
    testing::RawDb raw(path());
    raw.erase(kEventsFamily, keys::seq_key("s1", 8));
  }
  open(EventLog::Mode::kReader);
  VerifyReport report = verify("s1");
  BOOST_REQUIRE(!report.ok());
  BOOST_TEST(report.issues.front().seq == 9u);
  BOOST_TEST(report.issues.front().kind == "gap");
  BOOST_TEST(report.issues.front().detail == "seq 8 to 8 are missing");
  Status s = recover_status("s1");
  BOOST_TEST(s.is_inconsistent());
  BOOST_TEST(s.message().find("seq 9 follows seq 7: events are missing") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(a_checkpoint_whose_hash_is_wrong_is_found_by_refolding) {
  synth("s1", 5);
  std::vector<Event> events = read_all("s1");
  // Rewrite the turn 3 checkpoint with a valid checksum but a wrong hash, as
  // a buggy fold in the writer would have.
  auto it = std::find_if(events.begin(), events.end(), [](const Event& e) {
    const auto* c = get_if<TurnCommitted>(e);
    return c != nullptr && c->turn == 3;
  });
  BOOST_REQUIRE(it != events.end());
  Event forged = *it;
  std::get<TurnCommitted>(forged.body).state_hash.hi ^= 1;
  put_record("s1", forged);
  VerifyReport report = verify("s1");
  BOOST_REQUIRE(!report.ok());
  BOOST_TEST(report.issues.front().seq == forged.seq);
  BOOST_TEST(report.issues.front().kind == "hash");
  Status s = recover_status("s1");
  BOOST_TEST(s.is_inconsistent());
  BOOST_TEST(s.message().find("seq " + std::to_string(forged.seq) + " (turn.committed, turn 3)") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_unknown_event_type_is_kept_and_skipped) {
  synth("s1", 3);
  uint64_t last = read_all("s1").size();
  put_record("s1", Event{last + 1, 1,
                         UnknownEvent{.type = 777, .format_version = 1, .flags = 0, .payload = "\x08\x01"}});
  VerifyReport report = verify("s1");
  BOOST_TEST(report.ok());
  BOOST_TEST(report.sessions.front().unknown_skipped == 1u);
  RecoveredSession r;
  CHECK_OK(recover_status("s1", &r));
  BOOST_TEST(r.unknown_skipped == 1u);
  BOOST_TEST(r.last_seq == last + 1);
  BOOST_TEST(r.uncommitted.size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_unknown_event_marked_required_stops_recovery) {
  synth("s1", 3);
  uint64_t last = read_all("s1").size();
  put_record(
      "s1",
      Event{last + 1, 1,
            UnknownEvent{.type = 778, .format_version = 1, .flags = record::kFlagRequired, .payload = ""}});
  Status s = recover_status("s1");
  BOOST_TEST(s.is_unsupported());
  BOOST_TEST(s.message().find("seq " + std::to_string(last + 1)) != std::string::npos);
  BOOST_TEST(!verify("s1").ok());
}

BOOST_AUTO_TEST_CASE(damage_before_the_newest_snapshot_does_not_stop_recovery_but_verify_reports_it) {
  synth("s1", 30, /*snapshot_every=*/10);
  tamper("s1", 5, [](std::string& v) { v[3] ^= 1; });
  RecoveredSession r;
  CHECK_OK(recover_status("s1", &r));  // the snapshot's checkpoint proves the state
  BOOST_TEST(r.snapshot_seq > 5u);
  BOOST_TEST(!verify("s1").ok());
}

BOOST_AUTO_TEST_SUITE_END()
