#include <boost/test/unit_test.hpp>

#include <future>

#include "events/fold.h"
#include "events/record.h"
#include "storage/keys.h"
#include "storage/session_journal.h"
#include "storage/synthetic_writer.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using carapace::testing::TempDir;

namespace {

struct JournalFixture {
  TempDir dir;
  std::unique_ptr<EventLog> log;
  int64_t now = 1'700'000'000'000'000;

  JournalFixture() { CHECK_OK(EventLog::open(EventLog::Options{.path = dir.sub("log")}, &log)); }

  JournalOptions options(uint64_t snapshot_every = 0) {
    return JournalOptions{.snapshot_every_turns = snapshot_every, .clock = [this] { return now += 1000; }};
  }

  std::unique_ptr<SessionJournal> create(const std::string& id, uint64_t snapshot_every = 0) {
    std::unique_ptr<SessionJournal> j;
    CHECK_OK(SessionJournal::create(log.get(), id,
                                    {SessionStarted{.agent_id = "t", .model = "m"}, UserMessage{"task"}},
                                    options(snapshot_every), &j));
    return j;
  }

  std::vector<Event> read_all(const std::string& id) {
    std::vector<Event> out;
    CHECK_OK(log->read(id, 1, UINT64_MAX, &out));
    return out;
  }

  // Steps of one turn with one tool call.
  static void run_turn(SessionJournal& j, const std::string& call_id) {
    uint64_t t = j.state().turn + 1;
    CHECK_OK(j.append({TurnStarted{t}, LlmRequested{.turn = t, .attempt = 1}}));
    CHECK_OK(j.append(
        {LlmResponded{.turn = t, .attempt = 1, .tool_calls = {{call_id, "shell", JsonText{"{}"}}}}}));
    CHECK_OK(j.append({ToolRequested{call_id, "shell", JsonText{"{}"}}}));
    CHECK_OK(j.commit({ToolCompleted{.call_id = call_id, .tool = "shell", .output = "ok"}}));
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(journal_tests, JournalFixture)

BOOST_AUTO_TEST_CASE(create_writes_the_opening_with_a_checkpoint) {
  auto j = create("s1");
  std::vector<Event> events = read_all("s1");
  BOOST_REQUIRE(events.size() == 3u);
  BOOST_TEST(events[0].type_name() == "session.started");
  BOOST_TEST(events[1].type_name() == "user.message");
  BOOST_TEST(events[2].type_name() == "turn.committed");
  BOOST_TEST(events[1].ts_us > events[0].ts_us);  // the injected clock
  SessionMeta meta;
  CHECK_OK(log->get_meta("s1", &meta));
  BOOST_TEST(meta.committed_seq == 3u);
  BOOST_TEST(meta.agent_id == "t");
  BOOST_TEST((meta.status == SessionStatus::kRunning));
}

BOOST_AUTO_TEST_CASE(a_session_is_created_once) {
  auto j = create("s1");
  std::unique_ptr<SessionJournal> again;
  Status s = SessionJournal::create(log.get(), "s1", {SessionStarted{}}, options(), &again);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message().find("already exists") != std::string::npos);
  s = SessionJournal::create(log.get(), "s2", {UserMessage{"no start"}}, options(), &again);
  BOOST_TEST(s.is_invalid_argument());
}

BOOST_AUTO_TEST_CASE(the_journal_state_equals_a_fold_of_what_it_wrote) {
  auto j = create("s1");
  for (int i = 0; i < 5; ++i) run_turn(*j, "c" + std::to_string(i));
  Folder folder;
  for (Event& e : read_all("s1")) CHECK_OK(folder.add(std::move(e)));
  BOOST_TEST((folder.committed() == j->state()));
  BOOST_TEST(folder.checkpoints_verified() == 6u);
  std::vector<CheckpointEntry> checkpoints;
  CHECK_OK(log->checkpoints("s1", &checkpoints));
  BOOST_TEST(checkpoints.size() == 6u);
  BOOST_TEST(checkpoints.back().turn == 5u);
  BOOST_TEST(checkpoints.back().seq == j->last_seq());
}

BOOST_AUTO_TEST_CASE(a_step_the_fold_refuses_is_not_written) {
  auto j = create("s1");
  uint64_t before = j->last_seq();
  Status s = j->append({ToolCompleted{.call_id = "never-asked"}});
  BOOST_TEST(s.is_inconsistent());
  BOOST_TEST(s.message().find("session s1: seq 4 (tool.completed)") != std::string::npos, s.message());
  BOOST_TEST(j->last_seq() == before);
  BOOST_TEST(!j->broken());
  run_turn(*j, "c1");  // still usable
  BOOST_TEST(read_all("s1").size() == j->last_seq());
}

BOOST_AUTO_TEST_CASE(a_step_refused_halfway_breaks_the_journal) {
  auto j = create("s1");
  Status s = j->append({TurnStarted{1}, TurnStarted{2}});
  BOOST_TEST(s.is_inconsistent());
  BOOST_TEST(j->broken());
  Status next = j->append({UserMessage{"more"}});
  BOOST_TEST(next.is_aborted());
  BOOST_TEST(next.message().find("recover the session") != std::string::npos);
  BOOST_TEST(read_all("s1").size() == 3u);  // nothing of the bad step was written
}

BOOST_AUTO_TEST_CASE(snapshots_are_written_every_k_turns_before_their_checkpoint) {
  auto j = create("s1", /*snapshot_every=*/3);
  for (int i = 0; i < 10; ++i) run_turn(*j, "c" + std::to_string(i));
  std::vector<std::pair<SnapshotEntry, Status>> snaps;
  CHECK_OK(log->snapshots("s1", &snaps));
  BOOST_REQUIRE(snaps.size() == 2u);  // turns 3, 6 and 9 were snapshotted; the newest two are kept
  std::vector<CheckpointEntry> checkpoints;
  CHECK_OK(log->checkpoints("s1", &checkpoints));
  for (size_t i = 0; i < snaps.size(); ++i) {
    const auto& [snap, frame] = snaps[i];
    CHECK_OK(frame);
    BOOST_TEST(snap.turn == 3 * (i + 2));
    SessionState state;
    CHECK_OK(decode_state(snap.state, &state));
    BOOST_TEST(state.last_seq + 1 == snap.seq);  // the state just before its checkpoint
    auto it = std::find_if(checkpoints.begin(), checkpoints.end(),
                           [&](const auto& c) { return c.seq == snap.seq; });
    BOOST_REQUIRE(it != checkpoints.end());
    BOOST_TEST((state_hash(state) == it->state_hash));
  }
}

// The state keeps the whole conversation, so a snapshot every K turns would
// grow with every turn; a snapshot waits until the events written since the
// last one weigh half of it.
BOOST_AUTO_TEST_CASE(snapshots_of_a_growing_state_wait_for_half_their_weight_in_events) {
  auto j = create("s1", /*snapshot_every=*/2);
  const uint64_t kTurns = 240;
  std::vector<SnapshotEntry> taken;  // each snapshot, seen as the newest after its turn
  for (uint64_t i = 0; i < kTurns; ++i) {
    uint64_t t = j->state().turn + 1;
    std::string call_id = "c" + std::to_string(i);
    CHECK_OK(j->append({TurnStarted{t}, LlmRequested{.turn = t, .attempt = 1}}));
    CHECK_OK(j->append(
        {LlmResponded{.turn = t, .attempt = 1, .tool_calls = {{call_id, "shell", JsonText{"{}"}}}}}));
    CHECK_OK(j->append({ToolRequested{call_id, "shell", JsonText{"{}"}}}));
    CHECK_OK(
        j->commit({ToolCompleted{.call_id = call_id, .tool = "shell", .output = std::string(300, 'x')}}));
    std::vector<std::pair<SnapshotEntry, Status>> snaps;
    CHECK_OK(log->snapshots("s1", &snaps));
    if (!snaps.empty() && (taken.empty() || snaps.back().first.seq != taken.back().seq)) {
      taken.push_back(snaps.back().first);
    }
  }
  // Each event's record, as the log stores it; bytes[seq] = the records up to seq.
  std::vector<Event> events = read_all("s1");
  std::vector<uint64_t> bytes(events.size() + 1, 0);
  std::string value;
  for (const Event& e : events) {
    value.clear();
    encode_record(keys::seq_key("s1", e.seq), e, &value);
    bytes[e.seq] = bytes[e.seq - 1] + value.size();
  }
  BOOST_REQUIRE(taken.size() >= 3u);
  BOOST_TEST(taken.front().turn == 2u);  // the first at the first multiple of K
  uint64_t snapshot_bytes = 0;
  for (size_t i = 0; i < taken.size(); ++i) {
    BOOST_TEST(taken[i].turn % 2 == 0u);
    if (i + 1 < taken.size()) snapshot_bytes += taken[i].state.size();
  }
  // Every snapshot but the newest was followed by at least half its weight
  // in events before the next: together they weigh at most twice the events.
  BOOST_TEST(snapshot_bytes <= 2 * bytes.back());
  // Far fewer than one every 2 turns, and a recovery from the newest folds
  // at most half of it in events, or the K turns before the next multiple.
  BOOST_TEST(taken.size() < kTurns / 8);
  const uint64_t after_newest = bytes.back() - bytes[taken.back().seq];
  const uint64_t three_turns = bytes.back() - bytes[bytes.size() - 1 - 3 * 6];
  BOOST_TEST(after_newest <= taken.back().state.size() / 2 + three_turns);
}

BOOST_AUTO_TEST_CASE(asynchronous_commits_pipeline_with_appends) {
  auto j = create("s1");
  std::vector<std::future<Status>> done;
  for (int i = 0; i < 20; ++i) {
    uint64_t t = j->state().turn + 1;
    CHECK_OK(j->append({TurnStarted{t}}));
    auto p = std::make_shared<std::promise<Status>>();
    done.push_back(p->get_future());
    j->commit_async({LlmResponded{.turn = t, .text = "done " + std::to_string(t)}},
                    [p](Status s) { p->set_value(s); });
  }
  for (auto& f : done) CHECK_OK(f.get());
  Folder folder;
  for (Event& e : read_all("s1")) CHECK_OK(folder.add(std::move(e)));
  BOOST_TEST(folder.committed().committed_turn == 20u);
  BOOST_TEST((folder.committed() == j->state()));
}

// Staged steps are in the state at once and in the log only with the next
// write, all in it: a flush, or a durable write that carries them ahead of
// its own step.
BOOST_AUTO_TEST_CASE(staged_steps_are_written_with_the_next_write) {
  auto j = create("s1");
  const uint64_t opening = j->last_seq();
  CHECK_OK(j->stage_append({TurnStarted{1}}));
  CHECK_OK(j->stage_append({LlmRequested{.turn = 1, .attempt = 1}}));
  BOOST_TEST(j->has_staged());
  BOOST_TEST(j->last_seq() == opening + 2);
  BOOST_TEST(j->state().turn == 1u);
  BOOST_TEST(read_all("s1").size() == opening);  // nothing written yet
  std::vector<Event> flushed;
  CHECK_OK(j->flush(&flushed));
  BOOST_TEST(!j->has_staged());
  BOOST_REQUIRE_EQUAL(flushed.size(), 2u);
  BOOST_TEST(flushed[0].seq == opening + 1);
  BOOST_TEST(read_all("s1").size() == opening + 2);
  CHECK_OK(j->flush(&flushed));  // nothing staged: nothing written
  BOOST_TEST(flushed.size() == 2u);

  // A checkpoint carries what is staged, ahead of its own step.
  CHECK_OK(j->stage_append({LlmResponded{.turn = 1, .attempt = 1, .text = "done"}}));
  auto p = std::make_shared<std::promise<Status>>();
  std::vector<Event> staged, earlier;
  j->commit_async(
      {}, [p](Status s) { p->set_value(s); }, &staged, &earlier);
  CHECK_OK(p->get_future().get());
  BOOST_REQUIRE_EQUAL(earlier.size(), 1u);
  BOOST_TEST(earlier[0].type_name() == "llm.responded");
  BOOST_REQUIRE_EQUAL(staged.size(), 1u);
  BOOST_TEST(staged[0].type_name() == "turn.committed");
  // So does a durable append.
  CHECK_OK(j->stage_append({TurnStarted{2}}));
  auto q = std::make_shared<std::promise<Status>>();
  earlier.clear();
  j->append_durable_async(
      {UserMessage{.text = "more", .queued = true}}, [q](Status s) { q->set_value(s); }, nullptr, &earlier);
  CHECK_OK(q->get_future().get());
  BOOST_REQUIRE_EQUAL(earlier.size(), 1u);
  BOOST_TEST(earlier[0].type_name() == "turn.started");
  std::vector<Event> events = read_all("s1");
  BOOST_REQUIRE_EQUAL(events.size(), j->last_seq());
  for (size_t i = 0; i < events.size(); ++i) BOOST_TEST(events[i].seq == i + 1);
  Folder folder;
  for (Event& e : events) CHECK_OK(folder.add(std::move(e)));
  BOOST_TEST(folder.committed().committed_turn == 1u);
}

namespace {
// Refuses every step at log.before_append whose first event is `type`.
struct RefuseAt : FaultInjector {
  std::string type;
  explicit RefuseAt(std::string t) : type(std::move(t)) {}
  Fault check(const FaultSite& site) override {
    if (site.point != FaultPoint::kLogBeforeAppend || site.event_type != type) return {};
    return Fault{.action = FaultAction::kError, .message = "refused"};
  }
};
}  // namespace

// A step refused before anything of it is written leaves the steps staged
// before it written, as they would have been had each been written when made.
BOOST_AUTO_TEST_CASE(a_refused_step_leaves_the_steps_staged_before_it_written) {
  JournalOptions o = options();
  o.faults = std::make_shared<RefuseAt>("llm.requested");
  std::unique_ptr<SessionJournal> j;
  CHECK_OK(SessionJournal::create(
      log.get(), "s1", {SessionStarted{.agent_id = "t", .model = "m"}, UserMessage{"task"}}, o, &j));
  const uint64_t opening = j->last_seq();
  CHECK_OK(j->stage_append({TurnStarted{1}}));
  std::vector<Event> written;
  Status s = j->stage_append({LlmRequested{.turn = 1, .attempt = 1}}, &written);
  BOOST_TEST(s.is_io_error(), s.to_string());
  BOOST_REQUIRE_EQUAL(written.size(), 1u);
  BOOST_TEST(written[0].type_name() == "turn.started");
  std::vector<Event> events = read_all("s1");
  BOOST_REQUIRE_EQUAL(events.size(), opening + 1);
  BOOST_TEST(events.back().type_name() == "turn.started");
  BOOST_TEST(!j->has_staged());
}

BOOST_AUTO_TEST_CASE(a_synthetic_session_writes_through_the_journal) {
  SyntheticWriteStats stats;
  CHECK_OK(write_synthetic_session(log.get(), "synth", SyntheticOptions{.turns = 25, .seed = 3}, options(10),
                                   &stats));
  BOOST_TEST(stats.turns == 25u);
  BOOST_TEST(stats.checkpoints == 26u);
  BOOST_TEST(read_all("synth").size() == stats.events);
  SessionMeta meta;
  CHECK_OK(log->get_meta("synth", &meta));
  BOOST_TEST((meta.status == SessionStatus::kCompleted));
}

BOOST_AUTO_TEST_SUITE_END()
