#include <boost/test/unit_test.hpp>

#include "events/fold.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "storage/keys.h"
#include "tests/support/log_fixture.h"
#include "tests/support/raw_db.h"

using namespace carapace;

namespace {

struct RecoveryFixture : testing::LogFixture {
  RecoveredSession recover_ok(const std::string& id, bool snapshots = true) {
    RecoveredSession r;
    CHECK_OK(recover(*log, id, RecoverOptions{.use_snapshots = snapshots}, &r));
    return r;
  }

  // A session with `turns` complete turns, then an interrupted one: the model
  // asked for two tools; the first ran, the second was requested.
  std::unique_ptr<SessionJournal> interrupted(const std::string& id, int turns) {
    std::unique_ptr<SessionJournal> j;
    CHECK_OK(SessionJournal::create(log.get(), id, {SessionStarted{.model = "m"}, UserMessage{"task"}},
                                    options(), &j));
    for (int t = 1; t <= turns + 1; ++t) {
      CHECK_OK(j->append({TurnStarted{static_cast<uint64_t>(t)}}));
      std::string a = "a" + std::to_string(t), b = "b" + std::to_string(t);
      CHECK_OK(j->append({LlmResponded{.turn = static_cast<uint64_t>(t),
                                       .tool_calls = {{a, "shell", JsonText{}}, {b, "shell", JsonText{}}}}}));
      CHECK_OK(j->append({ToolRequested{a, "shell", JsonText{}}}));
      CHECK_OK(j->append({ToolCompleted{.call_id = a, .output = "A"}}));
      CHECK_OK(j->append({ToolRequested{b, "shell", JsonText{}}}));
      if (t <= turns) CHECK_OK(j->commit({ToolCompleted{.call_id = b, .output = "B"}}));
    }
    return j;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(recovery_tests, RecoveryFixture)

BOOST_AUTO_TEST_CASE(recovery_from_a_snapshot_equals_a_full_fold) {
  synth("s1", 200, /*snapshot_every=*/7);
  RecoveredSession from_snapshot = recover_ok("s1", true);
  RecoveredSession full = recover_ok("s1", false);
  BOOST_TEST(from_snapshot.snapshot_seq > 0u);
  BOOST_TEST(full.snapshot_seq == 0u);
  BOOST_TEST((from_snapshot.committed == full.committed));
  BOOST_TEST((state_hash(from_snapshot.committed) == state_hash(full.committed)));
  BOOST_TEST(from_snapshot.last_seq == full.last_seq);
  BOOST_TEST(from_snapshot.events_folded < full.events_folded / 10);
  BOOST_TEST(full.checkpoints_verified == 201u);
  SessionState direct;
  CHECK_OK(fold(read_all("s1"), &direct));
  BOOST_TEST((full.committed == direct));
}

BOOST_AUTO_TEST_CASE(an_unknown_session_is_not_found) {
  RecoveredSession r;
  Status s = recover(*log, "nobody", RecoverOptions{}, &r);
  BOOST_TEST(s.is_not_found());
  BOOST_TEST(s.message().find("no session 'nobody'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_interrupted_turn_is_returned_uncommitted) {
  auto j = interrupted("s1", 2);
  SessionState at_crash = j->state();
  j.reset();
  RecoveredSession r = recover_ok("s1");
  BOOST_TEST(r.committed.committed_turn == 2u);
  BOOST_TEST(r.uncommitted.size() == 5u);
  BOOST_TEST(r.last_seq == at_crash.last_seq);
  SessionState replayed = r.committed;
  for (const Event& e : r.uncommitted) CHECK_OK(apply(replayed, e));
  BOOST_TEST((replayed == at_crash));
  // Handed on whole, as written, though the fold decoded them without the
  // fields it does not read (a tool call's tool name, for one).
  std::vector<Event> written = read_all("s1");
  BOOST_TEST((r.uncommitted == std::vector<Event>(written.end() - 5, written.end())));
  BOOST_TEST(get_if<ToolRequested>(r.uncommitted.back())->tool == "shell");
}

BOOST_AUTO_TEST_CASE(turn_mode_rolls_the_interrupted_turn_back_and_runs_it_again) {
  interrupted("s1", 2).reset();
  RecoveredSession r = recover_ok("s1");
  SessionState checkpoint_state = r.committed;
  uint64_t first = r.uncommitted.front().seq, last = r.uncommitted.back().seq;
  auto j = SessionJournal::attach(log.get(), "s1", r.committed, r.uncommitted, r.last_seq, options());
  BOOST_TEST(j->append({UserMessage{"too early"}}).is_invalid_argument());  // settle first
  CHECK_OK(j->roll_back_uncommitted("crash"));
  // The discarded events stay on disk.
  std::vector<Event> events = read_all("s1");
  const auto& rb = std::get<TurnRolledBack>(events.back().body);
  BOOST_TEST(rb.from_seq == first);
  BOOST_TEST(rb.to_seq == last);
  BOOST_TEST(rb.turn == 3u);
  BOOST_TEST(events.size() == last + 1);

  // Turn 3 runs again and commits.
  CHECK_OK(j->append({TurnStarted{3}}));
  CHECK_OK(j->commit({LlmResponded{.turn = 3, .text = "done"}, SessionCompleted{.final_answer = "done"}}));
  j.reset();
  RecoveredSession after = recover_ok("s1");
  BOOST_TEST(after.uncommitted.empty());
  BOOST_TEST(after.committed.committed_turn == 3u);
  BOOST_TEST(after.committed.rolled_back_turns == 1u);
  BOOST_TEST(after.committed.tool_calls == checkpoint_state.tool_calls);  // turn 3's tool never counted
  VerifyReport report;
  CHECK_OK(verify_session(*log, "s1", &report));
  BOOST_TEST(report.ok());
}

BOOST_AUTO_TEST_CASE(step_mode_keeps_the_completed_steps) {
  interrupted("s1", 1).reset();
  RecoveredSession r = recover_ok("s1");
  auto j = SessionJournal::attach(log.get(), "s1", r.committed, r.uncommitted, r.last_seq, options());
  CHECK_OK(j->adopt_uncommitted());
  BOOST_TEST(j->state().pending.size() == 1u);  // b2 was requested, never completed
  BOOST_TEST(j->state().pending[0].requested);
  CHECK_OK(j->commit(
      {ToolCompleted{.call_id = "b2", .output = "interrupted", .is_error = true, .interrupted = true}}));
  j.reset();
  RecoveredSession after = recover_ok("s1");
  BOOST_TEST(after.committed.committed_turn == 2u);
  BOOST_TEST(after.committed.rolled_back_turns == 0u);
  BOOST_TEST(after.committed.tool_calls == 4u);
}

BOOST_AUTO_TEST_CASE(a_rollback_after_a_rollback_needs_nothing_more) {
  interrupted("s1", 1).reset();
  RecoveredSession r = recover_ok("s1");
  auto j = SessionJournal::attach(log.get(), "s1", r.committed, r.uncommitted, r.last_seq, options());
  CHECK_OK(j->roll_back_uncommitted("crash"));
  j.reset();
  RecoveredSession again = recover_ok("s1");
  BOOST_TEST(again.uncommitted.empty());
  auto j2 =
      SessionJournal::attach(log.get(), "s1", again.committed, again.uncommitted, again.last_seq, options());
  uint64_t before = j2->last_seq();
  CHECK_OK(j2->roll_back_uncommitted("crash again"));
  BOOST_TEST(j2->last_seq() == before);  // nothing to roll back
}

BOOST_AUTO_TEST_CASE(a_damaged_snapshot_falls_back_to_an_older_one) {
  synth("s1", 60, /*snapshot_every=*/10);
  std::vector<std::pair<SnapshotEntry, Status>> snaps;
  CHECK_OK(log->snapshots("s1", &snaps));
  BOOST_REQUIRE(snaps.size() == 2u);  // the newest two are kept
  uint64_t newest = snaps.back().first.seq;
  close();
  {
    testing::RawDb raw(path());
    std::string key = keys::seq_key("s1", newest);
    std::string value = raw.get(kSnapshotsFamily, key);
    value[value.size() - 3] ^= 0x01;
    raw.put(kSnapshotsFamily, key, value);
  }
  open();
  RecoveredSession r = recover_ok("s1");
  BOOST_TEST(r.snapshot_seq == snaps[0].first.seq);
  BOOST_TEST(r.snapshots_rejected == 1u);
  BOOST_TEST((r.committed == recover_ok("s1", false).committed));
}

BOOST_AUTO_TEST_CASE(a_snapshot_that_disagrees_with_its_checkpoint_is_rejected) {
  synth("s1", 30, /*snapshot_every=*/10);
  std::vector<std::pair<SnapshotEntry, Status>> snaps;
  CHECK_OK(log->snapshots("s1", &snaps));
  BOOST_REQUIRE(!snaps.empty());
  // A well-framed snapshot of a wrong state: one token too many.
  SnapshotEntry lie = snaps.back().first;
  SessionState state;
  CHECK_OK(decode_state(lie.state, &state));
  state.tokens.output += 1;
  lie.state = encode_state(state);
  CHECK_OK(log->put_snapshot("s1", lie));
  RecoveredSession r = recover_ok("s1");
  BOOST_TEST(r.snapshots_rejected >= 1u);
  BOOST_TEST(r.snapshot_seq < lie.seq);
  BOOST_TEST((r.committed == recover_ok("s1", false).committed));
}

BOOST_AUTO_TEST_SUITE_END()
