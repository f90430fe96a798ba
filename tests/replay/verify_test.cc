#include <boost/test/unit_test.hpp>

#include "replay/verify.h"
#include "storage/keys.h"
#include "tests/support/log_fixture.h"
#include "tests/support/raw_db.h"

using namespace carapace;

namespace {

struct VerifyFixture : testing::LogFixture {
  VerifyReport verify_all_ok_status() {
    VerifyReport report;
    CHECK_OK(verify_all(*log, &report));
    return report;
  }

  template <class F>
  void with_raw(F&& f) {
    close();
    {
      testing::RawDb raw(path());
      f(raw);
    }
    open(EventLog::Mode::kReader);
  }

  const VerifyIssue* find(const VerifyReport& report, const std::string& kind) {
    for (const auto& i : report.issues) {
      if (i.kind == kind) return &i;
    }
    return nullptr;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(verify_tests, VerifyFixture)

BOOST_AUTO_TEST_CASE(a_healthy_log_verifies) {
  synth("a", 10, 3);
  synth("b", 4);
  synth("c", 25, 5);
  VerifyReport report = verify_all_ok_status();
  BOOST_TEST(report.ok());
  BOOST_REQUIRE(report.sessions.size() == 3u);
  BOOST_TEST(report.sessions[0].session == "a");
  BOOST_TEST(report.sessions[0].checkpoints_verified == 11u);
  BOOST_TEST(report.sessions[0].snapshots_checked == 2u);  // the newest two of each session are kept
  BOOST_TEST(report.sessions[2].snapshots_checked == 2u);
}

BOOST_AUTO_TEST_CASE(a_missing_checkpoint_index_entry_is_reported) {
  synth("a", 5);
  std::vector<CheckpointEntry> checkpoints;
  CHECK_OK(log->checkpoints("a", &checkpoints));
  uint64_t seq = checkpoints[2].seq;
  with_raw([&](testing::RawDb& raw) { raw.erase(kCheckpointsFamily, keys::seq_key("a", seq)); });
  VerifyReport report = verify_all_ok_status();
  const VerifyIssue* issue = find(report, "checkpoint_index");
  BOOST_REQUIRE(issue != nullptr);
  BOOST_TEST(issue->seq == seq);
  BOOST_TEST(issue->detail.find("missing from the checkpoint index") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_index_entry_that_disagrees_is_reported) {
  synth("a", 5);
  std::vector<CheckpointEntry> checkpoints;
  CHECK_OK(log->checkpoints("a", &checkpoints));
  CheckpointEntry wrong = checkpoints[1];
  wrong.turn = 99;
  with_raw([&](testing::RawDb& raw) {
    std::string value;
    codec::encode(value, wrong);
    raw.put(kCheckpointsFamily, keys::seq_key("a", wrong.seq), value);
  });
  const VerifyIssue* issue = find(verify_all_ok_status(), "checkpoint_index");
  BOOST_REQUIRE(issue != nullptr);
  BOOST_TEST(issue->detail.find("says turn 99") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_or_stale_session_index_entry_is_reported) {
  synth("a", 3);
  synth("b", 3);
  SessionMeta meta;
  CHECK_OK(log->get_meta("b", &meta));
  meta.committed_seq -= 1;
  with_raw([&](testing::RawDb& raw) {
    raw.erase(kSessionsFamily, "a");
    std::string value;
    codec::encode(value, meta);
    raw.put(kSessionsFamily, "b", value);
  });
  VerifyReport report = verify_all_ok_status();
  BOOST_REQUIRE(report.issues.size() == 4u);
  BOOST_TEST(report.issues[0].session == "a");
  BOOST_TEST(report.issues[0].detail.find("no session index entry") != std::string::npos);
  BOOST_TEST(report.issues[1].session == "b");
  BOOST_TEST(report.issues[1].kind == "session_index");
  // The time index still has a's entry, and counts it.
  BOOST_TEST(report.issues[2].kind == "time_index");
  BOOST_TEST(report.issues[2].detail.find("entry for a at") != std::string::npos, report.issues[2].detail);
  BOOST_TEST(report.issues[3].detail.find("the session count is 2, but the session index has 1") != std::string::npos,
             report.issues[3].detail);
}

BOOST_AUTO_TEST_CASE(a_session_index_pointing_its_configuration_at_another_event_is_reported) {
  synth("a", 3);
  SessionMeta meta;
  CHECK_OK(log->get_meta("a", &meta));
  meta.configured_seq = 2;  // synthetic sessions record no configuration
  with_raw([&](testing::RawDb& raw) {
    std::string value;
    codec::encode(value, meta);
    raw.put(kSessionsFamily, "a", value);
  });
  VerifyReport report = verify_all_ok_status();
  BOOST_REQUIRE(report.issues.size() == 1u);
  BOOST_TEST(report.issues[0].seq == 2u);
  BOOST_TEST(report.issues[0].detail.find("not a session.configured") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_index_entry_without_events_is_reported) {
  synth("a", 2);
  with_raw([&](testing::RawDb& raw) { raw.put(kSessionsFamily, "ghost", ""); });
  VerifyReport report = verify_all_ok_status();
  BOOST_REQUIRE(report.issues.size() == 3u);
  BOOST_TEST(report.issues[0].session == "ghost");
  // Written behind the log's back: the time index has no entry for it, nor counts it.
  BOOST_TEST(report.issues[1].detail == "no entry for ghost, which last changed at 0");
  BOOST_TEST(report.issues[2].detail.find("the session count is 1") != std::string::npos, report.issues[2].detail);
}

BOOST_AUTO_TEST_CASE(a_wrong_snapshot_is_reported) {
  synth("a", 10, 5);
  std::vector<std::pair<SnapshotEntry, Status>> snaps;
  CHECK_OK(log->snapshots("a", &snaps));
  SnapshotEntry wrong = snaps[0].first;
  SessionState state;
  CHECK_OK(decode_state(wrong.state, &state));
  state.cost_usd += 1;
  wrong.state = encode_state(state);
  CHECK_OK(log->put_snapshot("a", wrong));
  VerifyReport report = verify_all_ok_status();
  const VerifyIssue* issue = find(report, "snapshot");
  BOOST_REQUIRE(issue != nullptr);
  BOOST_TEST(issue->seq == wrong.seq);
  BOOST_TEST(issue->detail.find("but its checkpoint recorded") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_unknown_session_is_not_found) {
  synth("a", 2);
  VerifyReport report;
  BOOST_TEST(verify_session(*log, "zzz", &report).is_not_found());
}

BOOST_AUTO_TEST_SUITE_END()
