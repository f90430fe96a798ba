#include <boost/test/unit_test.hpp>

#include <set>

#include "events/codec.h"
#include "events/fold.h"
#include "events/record.h"
#include "tests/support/fill.h"
#include "tests/support/printing.h"
#include "tests/support/session_builder.h"

using namespace carapace;
using carapace::testing::SessionBuilder;

namespace {

Event at(uint64_t seq, EventBody body) { return Event{seq, 0, std::move(body)}; }

// Applies `body` as the next event of `state` and returns the status.
Status try_apply(SessionState& state, EventBody body) {
  return apply(state, at(state.last_seq + 1, std::move(body)));
}

SessionState started() {
  SessionBuilder b;
  b.start();
  return b.state();
}

SessionState in_turn(std::vector<std::string> tools) {
  SessionState s = started();
  CHECK_OK(try_apply(s, TurnStarted{1}));
  LlmResponded r{.turn = 1, .attempt = 1, .text = "t"};
  for (size_t i = 0; i < tools.size(); ++i)
    r.tool_calls.push_back({"c" + std::to_string(i), tools[i], JsonText{"{}"}});
  CHECK_OK(try_apply(s, r));
  return s;
}

void expect_violation(SessionState s, EventBody body, const std::string& words) {
  SessionState before = s;
  Status st = try_apply(s, std::move(body));
  BOOST_TEST(st.is_inconsistent(), st.to_string());
  BOOST_TEST(st.message().find(words) != std::string::npos, st.message() << " lacks '" << words << "'");
  BOOST_TEST((s == before));  // a refused event changes nothing
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fold_tests)

BOOST_AUTO_TEST_CASE(session_started_sets_identity) {
  SessionState s;
  CHECK_OK(try_apply(s, SessionStarted{.agent_id = "a",
                                       .provider = "p",
                                       .model = "m",
                                       .parent_session = "src",
                                       .parent_turn = 3,
                                       .rng_seed = 42,
                                       .workspace = "/w"}));
  BOOST_TEST(s.agent_id == "a");
  BOOST_TEST(s.model == "m");
  BOOST_TEST(s.parent_session == "src");
  BOOST_TEST(s.parent_turn == 3u);
  BOOST_TEST(s.rng_seed == 42u);
  BOOST_TEST((s.status == SessionStatus::kRunning));
  expect_violation(s, SessionStarted{}, "already started");
}

BOOST_AUTO_TEST_CASE(nothing_comes_before_session_started) {
  expect_violation(SessionState{}, UserMessage{"hi"}, "before session.started");
}

BOOST_AUTO_TEST_CASE(user_message_appends_and_reopens_a_completed_session) {
  SessionState s = started();
  CHECK_OK(try_apply(s, SessionCompleted{.final_answer = "done"}));
  BOOST_TEST((s.status == SessionStatus::kCompleted));
  CHECK_OK(try_apply(s, UserMessage{"one more thing"}));
  BOOST_TEST((s.status == SessionStatus::kRunning));
  BOOST_TEST(s.messages.back().text == "one more thing");
  BOOST_TEST((s.messages.back().role == Role::kUser));
}

BOOST_AUTO_TEST_CASE(turns_start_in_order) {
  SessionState s = started();
  expect_violation(s, TurnStarted{2}, "does not follow turn 0");
  CHECK_OK(try_apply(s, TurnStarted{1}));
  BOOST_TEST(s.turn_open);
  expect_violation(s, TurnStarted{2}, "still open");
}

BOOST_AUTO_TEST_CASE(model_events_need_their_open_turn) {
  SessionState s = started();
  expect_violation(s, LlmRequested{.turn = 1}, "no turn is open");
  expect_violation(s, PromptAssembled{.turn = 1}, "no turn is open");
  CHECK_OK(try_apply(s, TurnStarted{1}));
  expect_violation(s, LlmFailed{.turn = 2}, "names turn 2 but turn 1 is open");
  CHECK_OK(try_apply(s, PromptAssembled{.turn = 1, .digest = Digest128{1, 2}}));
  BOOST_TEST((s.last_prompt_digest == Digest128{1, 2}));
  CHECK_OK(try_apply(s, LlmRequested{.turn = 1, .attempt = 1}));
  CHECK_OK(try_apply(s, LlmFailed{.turn = 1, .attempt = 1, .http_status = 429, .error = "rate limited"}));
  BOOST_TEST(s.llm_attempts == 1u);
  BOOST_TEST(s.llm_failures == 1u);
  BOOST_TEST(s.last_error == "rate limited");
}

BOOST_AUTO_TEST_CASE(llm_responded_appends_the_assistant_message_and_counts_usage) {
  SessionState s = started();
  CHECK_OK(try_apply(s, TurnStarted{1}));
  LlmResponded r{.turn = 1, .text = "let me look", .usage = {1000, 50, 400, 10}, .cost_usd = 0.5};
  r.tool_calls = {{"a", "shell", JsonText{"{}"}}, {"b", "read_file", JsonText{"{}"}}};
  CHECK_OK(try_apply(s, r));
  BOOST_TEST(s.pending.size() == 2u);
  BOOST_TEST((s.messages.back().role == Role::kAssistant));
  BOOST_TEST(s.messages.back().tool_calls.size() == 2u);
  BOOST_TEST(s.tokens.input == 1000u);
  BOOST_TEST(s.tokens.cache_read == 400u);
  BOOST_TEST(s.tokens.cache_write == 10u);
  BOOST_TEST(s.cost_usd == 0.5);
  BOOST_TEST(s.llm_calls == 1u);
  expect_violation(s, LlmResponded{.turn = 1}, "have no result");
}

BOOST_AUTO_TEST_CASE(duplicate_tool_call_ids_are_refused) {
  SessionState s = started();
  CHECK_OK(try_apply(s, TurnStarted{1}));
  LlmResponded r{.turn = 1};
  r.tool_calls = {{"a", "shell", JsonText{}}, {"a", "shell", JsonText{}}};
  expect_violation(s, r, "appears twice");
}

BOOST_AUTO_TEST_CASE(tool_events_match_pending_calls) {
  SessionState s = in_turn({"shell", "read_file"});
  expect_violation(s, ToolRequested{"zz", "shell", JsonText{}}, "no pending tool call has id 'zz'");
  expect_violation(s, ToolCompleted{.call_id = "zz"}, "no pending tool call has id 'zz'");
  CHECK_OK(try_apply(s, ToolRequested{"c0", "shell", JsonText{R"({"command":"ls"})"}}));
  BOOST_TEST(s.pending[0].requested);
  BOOST_TEST(s.pending[0].call.args.text == R"({"command":"ls"})");  // modified args are kept
  expect_violation(s, ToolRequested{"c0", "shell", JsonText{}}, "already requested");
  CHECK_OK(try_apply(s, ToolCompleted{.call_id = "c0", .output = "a b", .is_error = true}));
  BOOST_TEST(s.pending.size() == 1u);
  const Message& m = s.messages.back();
  BOOST_TEST((m.role == Role::kTool));
  BOOST_TEST(m.tool_call_id == "c0");
  BOOST_TEST(m.tool_name == "shell");
  BOOST_TEST(m.is_error);
  BOOST_TEST(s.tool_calls == 1u);
  BOOST_TEST(s.tool_errors == 1u);
  // A denied call gets its result without ever being requested.
  CHECK_OK(try_apply(s, ToolCompleted{.call_id = "c1", .output = "denied by hook", .is_error = true}));
  BOOST_TEST(s.pending.empty());
}

BOOST_AUTO_TEST_CASE(checkpoints_need_every_result_and_the_right_turn) {
  SessionState s = in_turn({"shell"});
  uint64_t next = s.last_seq + 1;
  expect_violation(s, TurnCommitted{.turn = 1, .last_seq = next - 1}, "1 tool calls have no result");
  CHECK_OK(try_apply(s, ToolCompleted{.call_id = "c0"}));
  next = s.last_seq + 1;
  expect_violation(s, TurnCommitted{.turn = 2, .last_seq = next - 1}, "commits turn 2");
  expect_violation(s, TurnCommitted{.turn = 1, .last_seq = next - 5}, "expected");
  CHECK_OK(try_apply(s, TurnCommitted{.turn = 1, .last_seq = next - 1}));
  BOOST_TEST(!s.turn_open);
  BOOST_TEST(s.committed_turn == 1u);
  BOOST_TEST(s.committed_seq == next);
}

BOOST_AUTO_TEST_CASE(hooks_count_and_stop_is_remembered_until_the_next_turn) {
  SessionState s = in_turn({});
  CHECK_OK(try_apply(s, HookDecided{.hook_event = "TurnEnd", .hook_name = "h", .decision = "stop"}));
  BOOST_TEST(s.stop_requested);
  BOOST_TEST(s.hook_decisions == 1u);
  CHECK_OK(try_apply(s, TurnCommitted{.turn = 1, .last_seq = s.last_seq}));
  CHECK_OK(try_apply(s, TurnStarted{2}));
  BOOST_TEST(!s.stop_requested);
}

BOOST_AUTO_TEST_CASE(hook_messages_reach_the_state) {
  SessionState s = in_turn({});
  size_t before = s.messages.size();
  CHECK_OK(try_apply(
      s, HookDecided{.hook_event = "TurnEnd", .decision = "system_message", .message = "be brief"}));
  CHECK_OK(try_apply(
      s, HookDecided{.hook_event = "TurnEnd", .decision = "append_context", .message = "tests fail"}));
  BOOST_TEST((s.hook_system_messages == std::vector<std::string>{"be brief"}));
  BOOST_REQUIRE(s.messages.size() == before + 1);
  BOOST_TEST(s.messages.back().text == "tests fail");
  BOOST_TEST((s.messages.back().role == Role::kUser));
  CHECK_OK(try_apply(s, TurnCommitted{.turn = 1, .last_seq = s.last_seq}));
  CHECK_OK(try_apply(s, TurnStarted{2}));
  BOOST_TEST(s.hook_system_messages.size() == 1u);  // kept until a prompt uses them
  CHECK_OK(try_apply(s, PromptAssembled{.turn = 2}));
  BOOST_TEST(s.hook_system_messages.empty());
}

BOOST_AUTO_TEST_CASE(context_trimmed_removes_a_range_and_rechains_the_digest) {
  SessionBuilder b;
  b.start().turn({"shell", "shell"}).turn({"shell"});
  SessionState s = b.state();
  size_t before = s.messages.size();
  CHECK_OK(try_apply(
      s, ContextTrimmed{.first_index = 1, .messages_removed = 3, .chars_before = 100, .chars_after = 40}));
  BOOST_TEST(s.messages.size() == before - 3);
  BOOST_TEST(s.context_trims == 1u);
  BOOST_TEST((s.messages_digest == digest_messages(s.messages)));
  expect_violation(s, ContextTrimmed{.first_index = 2, .messages_removed = 100}, "removes messages");
  expect_violation(s, ContextTrimmed{.first_index = 100, .messages_removed = 0}, "removes messages");
}

BOOST_AUTO_TEST_CASE(session_end_events_set_status) {
  SessionState s = started();
  CHECK_OK(try_apply(s, SessionFailed{.error = "provider down"}));
  BOOST_TEST((s.status == SessionStatus::kFailed));
  BOOST_TEST(s.last_error == "provider down");
  CHECK_OK(try_apply(s, SessionResumed{.mode = "turn"}));
  BOOST_TEST(s.resumes == 1u);
  CHECK_OK(try_apply(s, SessionCompleted{.final_answer = "42", .stop_reason = "final_answer"}));
  BOOST_TEST(s.final_answer == "42");
}

BOOST_AUTO_TEST_CASE(seq_must_advance) {
  SessionState s = started();
  Status st = apply(s, at(s.last_seq, UserMessage{"x"}));
  BOOST_TEST(st.is_inconsistent());
}

BOOST_AUTO_TEST_CASE(folder_equals_plain_apply_and_checks_every_checkpoint) {
  SessionBuilder b;
  b.start().turn({"shell"}).turn({"read_file", "shell"}).turn({});
  Folder folder;
  for (const Event& e : b.events()) CHECK_OK(folder.add(e));
  BOOST_TEST((folder.committed() == b.state()));
  BOOST_TEST(folder.checkpoints_verified() == 4u);
  BOOST_TEST(folder.uncommitted().empty());
}

BOOST_AUTO_TEST_CASE(folder_reports_a_checkpoint_whose_hash_disagrees) {
  SessionBuilder b;
  b.start().turn();
  std::vector<Event> events = b.events();
  std::get<TurnCommitted>(events.back().body).state_hash.lo ^= 1;
  Folder folder;
  Status st;
  for (const Event& e : events) {
    st = folder.add(e);
    if (!st.ok()) break;
  }
  BOOST_TEST(st.is_inconsistent());
  BOOST_TEST(st.message().find("seq " + std::to_string(events.back().seq) + " (turn.committed, turn 1)") !=
             std::string::npos);
  BOOST_TEST(st.message().find("hashes to") != std::string::npos);
  BOOST_TEST((st.detail() == Status::Detail::kStateHashMismatch));
}

BOOST_AUTO_TEST_CASE(folder_refuses_a_checkpoint_hash_of_an_unknown_version) {
  SessionBuilder b;
  b.start().turn();
  std::vector<Event> events = b.events();
  std::get<TurnCommitted>(events.back().body).hash_version = kStateHashVersion + 1;
  Folder folder;
  Status st;
  for (const Event& e : events) {
    st = folder.add(e);
    if (!st.ok()) break;
  }
  // Unchecked is not verified: the checkpoint is refused, not passed.
  BOOST_TEST(st.is_unsupported(), st.to_string());
  BOOST_TEST(st.message().find("version " + std::to_string(kStateHashVersion + 1)) != std::string::npos);
  BOOST_TEST(folder.checkpoints_verified() == 1u);  // turn 0's only
}

BOOST_AUTO_TEST_CASE(folder_reports_seq_gaps) {
  SessionBuilder b;
  b.start().turn();
  Folder folder;
  CHECK_OK(folder.add(b.events()[0]));
  Status st = folder.add(b.events()[2]);
  BOOST_TEST(st.is_inconsistent());
  BOOST_TEST(st.message().find("seq 3 follows seq 1: events are missing") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(folder_skips_rolled_back_events) {
  SessionBuilder b;
  b.start().turn();
  SessionState at_checkpoint = b.state();
  std::vector<Event> events = b.events();
  uint64_t seq = b.next_seq();
  // An interrupted turn: started, the model answered, a tool was requested.
  events.push_back(at(seq, TurnStarted{2}));
  events.push_back(at(seq + 1, LlmResponded{.turn = 2, .tool_calls = {{"x", "shell", JsonText{}}}}));
  events.push_back(at(seq + 2, ToolRequested{"x", "shell", JsonText{}}));
  Folder partial;
  for (const Event& e : events) CHECK_OK(partial.add(e));
  BOOST_TEST(partial.uncommitted().size() == 3u);
  SessionState where_it_stopped;
  CHECK_OK(partial.state_with_uncommitted(&where_it_stopped));
  BOOST_TEST(where_it_stopped.pending.size() == 1u);

  events.push_back(
      at(seq + 3, TurnRolledBack{.from_seq = seq, .to_seq = seq + 2, .turn = 2, .reason = "crash"}));
  Folder folder;
  for (const Event& e : events) CHECK_OK(folder.add(e));
  SessionState expected = at_checkpoint;
  CHECK_OK(apply(expected, events.back()));
  BOOST_TEST((folder.committed() == expected));
  BOOST_TEST(folder.committed().rolled_back_turns == 1u);
  BOOST_TEST(folder.uncommitted().empty());

  // The turn runs again and commits; the fold never saw the discarded events.
  SessionState s = folder.committed();
  std::vector<Event> rerun = {at(seq + 4, TurnStarted{2}),
                              at(seq + 5, LlmResponded{.turn = 2, .text = "done"})};
  for (const Event& e : rerun) CHECK_OK(apply(s, e));
  rerun.push_back(at(
      seq + 6,
      TurnCommitted{
          .turn = 2, .last_seq = seq + 5, .state_hash = state_hash(s), .hash_version = kStateHashVersion}));
  for (const Event& e : rerun) CHECK_OK(folder.add(e));
  BOOST_TEST(folder.committed().committed_turn == 2u);
  BOOST_TEST(folder.checkpoints_verified() == 3u);
}

BOOST_AUTO_TEST_CASE(folder_refuses_a_rollback_of_the_wrong_range) {
  SessionBuilder b;
  b.start();
  uint64_t seq = b.next_seq();
  Folder folder;
  for (const Event& e : b.events()) CHECK_OK(folder.add(e));
  CHECK_OK(folder.add(at(seq, TurnStarted{1})));
  CHECK_OK(folder.add(at(seq + 1, LlmRequested{.turn = 1})));
  Status st = folder.add(at(seq + 2, TurnRolledBack{.from_seq = seq + 1, .to_seq = seq + 1}));
  BOOST_TEST(st.is_inconsistent());
  BOOST_TEST(st.message().find("after the last checkpoint are [" + std::to_string(seq)) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(folder_skips_unknown_events) {
  SessionBuilder b;
  b.start();
  Folder folder;
  for (const Event& e : b.events()) CHECK_OK(folder.add(e));
  CHECK_OK(folder.add(at(b.next_seq(), UnknownEvent{.type = 500, .payload = "future"})));
  BOOST_TEST(folder.unknown_skipped() == 1u);
  SessionState s;
  CHECK_OK(folder.state_with_uncommitted(&s));
  SessionState expected = b.state();
  expected.last_seq = b.next_seq();
  BOOST_TEST((s == expected));
}

namespace {

// Events numbered from seq 1, each checkpoint hashed as the journal does.
struct Written {
  std::vector<Event> events;
  Folder folder;
  void add(EventBody body) {
    Event e{events.size() + 1, 0, std::move(body)};
    CHECK_OK(folder.add(e));
    events.push_back(std::move(e));
  }
  void commit(uint64_t turn) {
    SessionState s;
    CHECK_OK(folder.state_with_uncommitted(&s));
    add(TurnCommitted{.turn = turn,
                      .last_seq = events.size(),
                      .state_hash = state_hash(s),
                      .hash_version = kStateHashVersion});
  }
};

HookDecided hook(std::string event, std::string decision, std::string call_id, std::string message = "") {
  HookDecided h;
  h.hook_event = std::move(event);
  h.hook_name = "guard";
  h.decision = std::move(decision);
  h.tool_call_id = std::move(call_id);
  h.message = std::move(message);
  return h;
}

// A session that holds every event type fold_unread_tags() leaves fields of
// out: a configuration, a failed model call and its retry, a fault, tools
// and hooks, a trim, a turn rolled back and run again after a resume, a
// stop, and an open turn at the end.
std::vector<Event> a_session_of_every_kind() {
  Written w;
  w.add(SessionStarted{.agent_id = "test", .provider = "scripted", .model = "m1", .rng_seed = 7});
  SessionConfigured configured;
  testing::fill(configured, 4);
  w.add(configured);
  w.add(UserMessage{"fix the bug"});
  w.commit(0);
  w.add(TurnStarted{1});
  w.add(PromptAssembled{
      .turn = 1, .segments = {{"system", "config", 120}}, .digest = {1, 2}, .total_chars = 120});
  w.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  w.add(
      FaultInjected{.point = "provider.before_request", .action = "error", .detail = "HTTP 429", .turn = 1});
  w.add(LlmFailed{.turn = 1,
                  .attempt = 1,
                  .http_status = 429,
                  .error = "rate limited",
                  .category = ErrorCategory::kTransient,
                  .will_retry = true,
                  .retry_delay_ms = 100,
                  .provider_answered = true});
  w.add(LlmRequested{.turn = 1, .attempt = 2, .model = "m1"});
  w.add(LlmResponded{.turn = 1,
                     .attempt = 2,
                     .text = "reading",
                     .tool_calls = {{"c1", "shell", JsonText{"{}"}}},
                     .usage = {100, 20, 0, 0},
                     .cost_usd = 0.01});
  w.add(hook("PreToolUse", "allow", "c1"));
  w.add(ToolRequested{"c1", "shell", JsonText{"{}"}});
  w.add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "ok"});
  w.add(hook("PostToolUse", "system_message", "c1", "be brief"));
  w.add(ContextTrimmed{.first_index = 0, .messages_removed = 1});
  w.commit(1);
  uint64_t from = w.events.size() + 1;
  w.add(TurnStarted{2});
  w.add(LlmRequested{.turn = 2, .attempt = 1});
  w.add(TurnRolledBack{.from_seq = from, .to_seq = from + 1, .turn = 2, .reason = "crash"});
  w.add(SessionResumed{.max_turns = 9});
  w.add(TurnStarted{2});
  w.add(LlmResponded{.turn = 2, .attempt = 1, .text = "done"});
  w.commit(2);
  w.add(SessionStopped{.reason = "SIGTERM"});
  w.add(TurnStarted{3});
  w.add(LlmRequested{.turn = 3, .attempt = 1, .model = "m1"});
  return w.events;
}

// Sets every field of `e` that the fold does not read to another value.
void change_unread_fields(Event& e, uint64_t salt) {
  uint64_t mask = fold_unread_tags(e.type_number());
  std::visit(
      [&](auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (codec::Described<T>) {
          std::apply(
              [&](const auto&... f) {
                ((((mask >> f.tag) & 1) ? testing::fill(x.*(f.member), salt) : void()), ...);
              },
              T::fields());
        }
      },
      e.body);
}

// The fields of `e` that the fold does not read, all at their defaults.
bool unread_fields_are_defaults(const Event& e) {
  uint64_t mask = fold_unread_tags(e.type_number());
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (codec::Described<T>) {
          return std::apply(
              [&](const auto&... f) {
                return ((((mask >> f.tag) & 1) == 0 || codec::is_default(x.*(f.member))) && ...);
              },
              T::fields());
        } else {
          return true;
        }
      },
      e.body);
}

struct Folded {
  Status status;
  SessionState committed, at_end;
  uint64_t checkpoints = 0;
};

Folded fold_all(const std::vector<Event>& events) {
  Folded out;
  Folder folder;
  for (const Event& e : events) {
    out.status = folder.add(e);
    if (!out.status.ok()) return out;
  }
  out.committed = folder.committed();
  out.status = folder.state_with_uncommitted(&out.at_end);
  out.checkpoints = folder.checkpoints_verified();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_test_session_holds_every_type_whose_fields_the_fold_leaves_out) {
  std::set<uint16_t> present;
  for (const Event& e : a_session_of_every_kind()) present.insert(e.type_number());
  for (uint16_t type = 1; type <= kMaxKnownEventType; ++type) {
    if (fold_unread_tags(type) == 0) continue;
    BOOST_TEST(present.count(type) == 1u, wire_name(type)
                                              << " has fields the fold leaves out but no event here");
  }
}

BOOST_AUTO_TEST_CASE(records_decoded_for_the_fold_fold_to_the_same_state) {
  std::vector<Event> events = a_session_of_every_kind();
  std::vector<Event> decoded;
  size_t lighter = 0;
  for (const Event& e : events) {
    std::string key = "s1/" + std::to_string(e.seq), value;
    encode_record(key, e, &value);
    Event light;
    CHECK_OK(decode_record(key, value, e.seq, &light, fold_unread_tags));
    BOOST_TEST(unread_fields_are_defaults(light), "seq " << e.seq << " (" << e.type_name() << ")");
    if (!(light == e)) ++lighter;
    Event whole;
    CHECK_OK(decode_record(key, value, e.seq, &whole));
    BOOST_TEST((whole == e));
    decoded.push_back(std::move(light));
  }
  BOOST_TEST(lighter >= 10u);  // the decode did leave fields out
  Folded full = fold_all(events), light = fold_all(decoded);
  CHECK_OK(full.status);
  CHECK_OK(light.status);
  BOOST_TEST(light.checkpoints == full.checkpoints);
  BOOST_TEST(full.checkpoints == 3u);
  BOOST_TEST((light.committed == full.committed));
  BOOST_TEST((light.at_end == full.at_end));
}

// The guard of fold_unread_tags(): apply() reading one of those fields would
// make this fold differ (or its checkpoint hashes disagree).
BOOST_AUTO_TEST_CASE(changing_the_fields_the_fold_leaves_out_changes_nothing_it_folds) {
  std::vector<Event> events = a_session_of_every_kind();
  Folded full = fold_all(events);
  CHECK_OK(full.status);
  for (uint64_t salt : {1u, 2u, 3u}) {
    std::vector<Event> changed = events;
    for (Event& e : changed) change_unread_fields(e, salt + e.seq);
    Folded other = fold_all(changed);
    BOOST_TEST(other.status.ok(), other.status.to_string());
    BOOST_TEST((other.committed == full.committed));
    BOOST_TEST((other.at_end == full.at_end));
  }
}

BOOST_AUTO_TEST_SUITE_END()
