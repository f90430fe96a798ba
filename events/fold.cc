#include "events/fold.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <variant>

namespace carapace {
namespace {

std::string n(uint64_t v) { return std::to_string(v); }

Status violation(const Event& e, const std::string& what) {
  return Status::inconsistent("seq " + n(e.seq) + " (" + std::string(e.type_name()) + "): " + what);
}

// Rules for events that belong to an open turn.
Status check_in_turn(const SessionState& s, const Event& e, uint64_t turn) {
  if (!s.turn_open) return violation(e, "no turn is open");
  if (turn != s.turn) return violation(e, "names turn " + n(turn) + " but turn " + n(s.turn) + " is open");
  return Status();
}

PendingToolCall* find_pending(SessionState& s, const std::string& id) {
  auto it = std::find_if(s.pending.begin(), s.pending.end(),
                         [&](const PendingToolCall& p) { return p.call.id == id; });
  return it == s.pending.end() ? nullptr : &*it;
}

struct Applier {
  SessionState& s;
  const Event& e;
  // True when the caller gave the event up (apply(state, Event&&)): its
  // strings are moved into the state instead of copied.
  bool consume;

  template <class T>
  T take(const T& field) const {
    return consume ? std::move(const_cast<T&>(field)) : field;
  }

  Status operator()(const SessionStarted& x) {
    if (s.status != SessionStatus::kNew) return violation(e, "the session has already started");
    s.agent_id = x.agent_id;
    s.provider = x.provider;
    s.model = x.model;
    s.config_digest = x.config_digest;
    s.parent_session = x.parent_session;
    s.parent_turn = x.parent_turn;
    s.parent_seq = x.parent_seq;
    s.rng_seed = x.rng_seed;
    s.workspace = x.workspace;
    s.max_turns = x.max_turns;
    s.instructions = x.instructions;
    s.status = SessionStatus::kRunning;
    return Status();
  }

  Status operator()(const UserMessage& x) {
    if (x.follow_up) {
      s.follow_ups.push_back(take(x.text));
      return Status();
    }
    if (x.from_follow_ups) {
      if (s.follow_ups.empty() || s.follow_ups.front() != x.text) {
        return violation(e, "no waiting follow-up comes first with this text");
      }
      s.follow_ups.erase(s.follow_ups.begin());
    }
    if (x.queued) {
      s.queued_inputs.push_back(take(x.text));
      return Status();
    }
    append_message(s, Message{.role = Role::kUser, .text = take(x.text)});
    if (s.status != SessionStatus::kRunning) s.status = SessionStatus::kRunning;
    return Status();
  }

  Status operator()(const TurnStarted& x) {
    if (s.turn_open) return violation(e, "turn " + n(s.turn) + " is still open");
    if (x.turn != s.turn + 1) return violation(e, "turn " + n(x.turn) + " does not follow turn " + n(s.turn));
    s.turn = x.turn;
    s.turn_open = true;
    s.stop_requested = false;
    s.turn_responded = false;
    s.turn_attempts = 0;
    s.turn_failures = 0;
    s.turn_start_decided = false;
    s.turn_prompted = false;
    s.turn_retry_delay_ms = 0;
    s.turn_gave_up = false;
    s.turn_last_call = ToolCall{};
    s.turn_last_call_hooked = false;
    s.turn_system_messages.clear();
    s.approvals.clear();
    // Messages sent while the previous run went on join the conversation now.
    for (auto& text : s.queued_inputs) append_message(s, Message{.role = Role::kUser, .text = std::move(text)});
    if (!s.queued_inputs.empty()) s.status = SessionStatus::kRunning;
    s.queued_inputs.clear();
    return Status();
  }

  Status operator()(const PromptAssembled& x) {
    CARAPACE_RETURN_IF_ERROR(check_in_turn(s, e, x.turn));
    s.last_prompt_digest = x.digest;
    if (!s.turn_prompted) {
      // The prompt just assembled includes them; one assembled again in the
      // same turn (after a resume) holds the same ones.
      s.turn_system_messages = std::move(s.hook_system_messages);
      s.hook_system_messages.clear();
    }
    s.turn_prompted = true;
    return Status();
  }

  Status operator()(const LlmRequested& x) {
    CARAPACE_RETURN_IF_ERROR(check_in_turn(s, e, x.turn));
    ++s.llm_attempts;
    ++s.turn_attempts;
    s.turn_retry_delay_ms = 0;
    return Status();
  }

  Status operator()(const LlmFailed& x) {
    CARAPACE_RETURN_IF_ERROR(check_in_turn(s, e, x.turn));
    ++s.llm_failures;
    ++s.turn_failures;
    if (x.provider_answered) ++s.provider_answers;
    s.last_error = x.error;
    s.last_http_status = x.http_status;
    s.last_failure_transient = x.category == ErrorCategory::kTransient;
    s.turn_retry_delay_ms = x.will_retry ? x.retry_delay_ms : 0;
    s.turn_gave_up = !x.will_retry;
    return Status();
  }

  Status operator()(const LlmResponded& x) {
    CARAPACE_RETURN_IF_ERROR(check_in_turn(s, e, x.turn));
    if (!s.pending.empty()) {
      return violation(e, n(s.pending.size()) + " tool calls of the previous response have no result");
    }
    for (size_t i = 0; i < x.tool_calls.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (x.tool_calls[i].id == x.tool_calls[j].id) {
          return violation(e, "tool call id '" + x.tool_calls[i].id + "' appears twice");
        }
      }
    }
    for (const auto& call : x.tool_calls) s.pending.push_back(PendingToolCall{.call = call});
    append_message(s,
                   Message{.role = Role::kAssistant, .text = take(x.text), .tool_calls = take(x.tool_calls)});
    s.tokens.input += x.usage.input;
    s.tokens.output += x.usage.output;
    s.tokens.cache_read += x.usage.cache_read;
    s.tokens.cache_write += x.usage.cache_write;
    s.cost_usd += x.cost_usd;
    ++s.llm_calls;
    ++s.provider_answers;
    s.turn_responded = true;
    return Status();
  }

  Status operator()(const HookDecided& x) {
    ++s.hook_decisions;
    if (x.hook_event == "AgentStart") s.agent_start_decided = true;
    if (x.hook_event == "TurnStart") s.turn_start_decided = true;
    if ((x.hook_event == "PostToolUse" || x.hook_event == "PostToolUseFailure") &&
        x.tool_call_id == s.turn_last_call.id)
      s.turn_last_call_hooked = true;
    if (x.decision == "stop") s.stop_requested = true;
    if (x.decision == "system_message" && !x.message.empty())
      s.hook_system_messages.push_back(take(x.message));
    if (x.decision == "append_context" && !x.message.empty()) {
      append_message(s, Message{.role = Role::kUser, .text = take(x.message)});
    }
    return Status();
  }

  Status operator()(const ToolRequested& x) {
    PendingToolCall* p = find_pending(s, x.call_id);
    if (p == nullptr) return violation(e, "no pending tool call has id '" + x.call_id + "'");
    // Requested again only as a further attempt on another node, after the
    // node that had it was lost (an idempotent tool), with the same arguments.
    if (p->requested && x.attempt <= std::max<uint32_t>(p->attempt, 1)) {
      return violation(e, "tool call '" + x.call_id + "' was already requested");
    }
    if (p->requested && x.args != p->call.args) {
      return violation(e, "tool call '" + x.call_id + "' was requested again with other arguments");
    }
    p->requested = true;
    p->node = x.node;
    p->attempt = x.attempt;
    p->call.args = take(x.args);
    return Status();
  }

  Status operator()(const ToolCompleted& x) {
    PendingToolCall* p = find_pending(s, x.call_id);
    if (p == nullptr) return violation(e, "no pending tool call has id '" + x.call_id + "'");
    Message m{.role = Role::kTool,
              .text = take(x.output),
              .tool_call_id = take(x.call_id),
              .tool_name = p->call.name,
              .is_error = x.is_error};
    if (p->requested) {  // it ran (or may have): its PostToolUse hooks follow
      s.turn_last_call = std::move(p->call);  // erased from pending below
      s.turn_last_call_hooked = false;
    }
    s.pending.erase(s.pending.begin() + (p - s.pending.data()));
    append_message(s, std::move(m));
    ++s.tool_calls;
    if (x.is_error) ++s.tool_errors;
    return Status();
  }

  Status operator()(const ContextTrimmed& x) {
    if (x.first_index > s.messages.size() || x.messages_removed > s.messages.size() - x.first_index) {
      return violation(e, "removes messages [" + n(x.first_index) + ", " +
                              n(x.first_index + x.messages_removed) + ") of " + n(s.messages.size()));
    }
    auto first = static_cast<std::ptrdiff_t>(x.first_index);
    auto last = first + static_cast<std::ptrdiff_t>(x.messages_removed);
    s.messages.erase(s.messages.begin() + first, s.messages.begin() + last);
    s.message_digests.erase(s.message_digests.begin() + first, s.message_digests.begin() + last);
    rechain_messages(s);
    ++s.context_trims;
    return Status();
  }

  Status operator()(const TurnCommitted& x) {
    if (x.turn != s.turn)
      return violation(e, "commits turn " + n(x.turn) + " but the session is at turn " + n(s.turn));
    if (!s.pending.empty()) return violation(e, n(s.pending.size()) + " tool calls have no result");
    if (x.last_seq + 1 != e.seq)
      return violation(e, "covers up to seq " + n(x.last_seq) + ", expected " + n(e.seq - 1));
    if (const PendingApproval* w = waiting_approval(s)) {
      return violation(e, "the approval request of tool call '" + w->request.call_id + "' has no decision");
    }
    s.turn_open = false;
    s.approvals.clear();
    s.committed_turn = x.turn;
    s.committed_seq = e.seq;
    return Status();
  }

  Status operator()(const TurnRolledBack&) {
    ++s.rolled_back_turns;
    s.approvals.clear();
    return Status();
  }

  Status operator()(const SessionResumed& x) {
    ++s.resumes;
    if (x.max_turns != 0) s.max_turns = x.max_turns;
    return Status();
  }

  Status operator()(const SessionCompleted& x) {
    s.status = SessionStatus::kCompleted;
    s.final_answer = x.final_answer;
    s.stop_reason = x.stop_reason;
    return Status();
  }

  Status operator()(const SessionFailed& x) {
    s.status = SessionStatus::kFailed;
    s.last_error = x.error;
    s.stop_reason = x.stop_reason;
    return Status();
  }

  // The call waits for a person with these arguments (after modify_args hooks).
  Status operator()(const ApprovalRequested& x) {
    PendingToolCall* p = find_pending(s, x.call_id);
    if (p == nullptr) return violation(e, "no pending tool call has id '" + x.call_id + "'");
    if (p->requested) return violation(e, "tool call '" + x.call_id + "' was already requested");
    p->call.args = x.args;
    note_approval(s.approvals, e);
    // Its wall-clock times stay in the event (the log scans read them), out
    // of the state: a replay's request is made at another time, and the
    // checkpoint hashes must agree.
    for (auto& a : s.approvals) {
      if (a.request.call_id != x.call_id) continue;
      a.request.requested_at_us = 0;
      a.request.expires_at_us = 0;
    }
    ++s.approvals_requested;
    return Status();
  }

  // The first decision bound to the request's arguments decides it; any
  // other is kept in the log and ignored.
  Status operator()(const ApprovalDecided&) {
    if (!note_approval(s.approvals, e)) ++s.approvals_ignored;
    return Status();
  }

  Status operator()(const FaultInjected&) { return Status(); }
  Status operator()(const SessionConfigured&) { return Status(); }
  // The state is as the stop left it: a resume goes on from there.
  Status operator()(const SessionStopped&) { return Status(); }

  // A schedule's events belong to its own stream (schedule/schedule_state.h).
  Status operator()(const ScheduleDefined&) { return foreign(); }
  Status operator()(const ScheduleRemoved&) { return foreign(); }
  Status operator()(const SchedulePaused&) { return foreign(); }
  Status operator()(const ScheduleResumed&) { return foreign(); }
  Status operator()(const ScheduleFired&) { return foreign(); }
  Status operator()(const ScheduleSkipped&) { return foreign(); }
  Status operator()(const ScheduleRunEnded&) { return foreign(); }
  Status foreign() { return violation(e, "a schedule's event in a session's log"); }

  Status operator()(const UnknownEvent&) { return Status(); }
};

Status apply_event(SessionState& state, const Event& event, bool consume) {
  if (event.seq <= state.last_seq) {
    return violation(event, "seq does not advance past " + n(state.last_seq));
  }
  bool is_start = std::holds_alternative<SessionStarted>(event.body);
  if (!is_start && state.status == SessionStatus::kNew && !std::holds_alternative<UnknownEvent>(event.body)) {
    return violation(event, "comes before session.started");
  }
  CARAPACE_RETURN_IF_ERROR(std::visit(Applier{state, event, consume}, event.body));
  state.last_seq = event.seq;
  return Status();
}

constexpr uint64_t tags(std::initializer_list<uint32_t> list) {
  uint64_t mask = 0;
  for (uint32_t t : list) mask |= uint64_t{1} << t;
  return mask;
}

template <class T>
constexpr uint64_t all_tags() {
  return std::apply([](const auto&... f) { return tags({f.tag...}); }, T::fields());
}

// What the Applier above does not read, by type; every other type is read
// whole. Keep in step with the Applier (see fold.h).
template <class T>
constexpr uint64_t kUnread = 0;
template <>
constexpr uint64_t kUnread<PromptAssembled> = tags({2, 4});  // segments, total_chars
template <>
constexpr uint64_t kUnread<LlmRequested> = tags({2, 3, 4, 5, 6});  // all but turn
template <>
constexpr uint64_t kUnread<LlmFailed> = tags({2, 8, 9, 10});  // attempt, retry_after, latency, body_ref
template <>
constexpr uint64_t kUnread<LlmResponded> = tags({2, 5, 8, 9});  // attempt, finish_reason, latency, body_ref
template <>
constexpr uint64_t kUnread<HookDecided> = tags({2, 4, 5});  // hook_name, reason, modified_args
template <>
constexpr uint64_t kUnread<ToolRequested> = tags({2, 6});  // tool, retry_reason
// All but call_id, output and is_error:
template <>
constexpr uint64_t kUnread<ToolCompleted> = tags({2, 5, 6, 7, 8, 9, 10, 11, 12});
template <>
constexpr uint64_t kUnread<ContextTrimmed> = tags({3, 4});  // chars before and after
template <>
constexpr uint64_t kUnread<TurnRolledBack> = tags({3, 4});  // turn, reason
template <>
constexpr uint64_t kUnread<SessionResumed> = tags({1, 2, 3, 4, 5});  // all but max_turns
template <>
constexpr uint64_t kUnread<FaultInjected> = all_tags<FaultInjected>();
template <>
constexpr uint64_t kUnread<SessionConfigured> = all_tags<SessionConfigured>();
template <>
constexpr uint64_t kUnread<SessionStopped> = all_tags<SessionStopped>();

template <size_t... I>
constexpr std::array<uint64_t, kMaxKnownEventType + 1> make_unread(std::index_sequence<I...>) {
  std::array<uint64_t, kMaxKnownEventType + 1> table{};
  (
      [&] {
        using T = std::variant_alternative_t<I, EventBody>;
        if constexpr (!std::is_same_v<T, UnknownEvent>) table[static_cast<size_t>(T::kType)] = kUnread<T>;
      }(),
      ...);
  return table;
}

constexpr auto kUnreadByType = make_unread(std::make_index_sequence<std::variant_size_v<EventBody>>{});

}  // namespace

uint64_t fold_unread_tags(uint16_t type) { return type < kUnreadByType.size() ? kUnreadByType[type] : 0; }

Status apply(SessionState& state, const Event& event) { return apply_event(state, event, false); }

Status apply(SessionState& state, Event&& event) { return apply_event(state, event, true); }

Folder::Folder() : Folder(Options{}) {}

Folder::Folder(Options options) : options_(options) {}

Folder::Folder(SessionState start, Options options)
    : options_(options), committed_(std::move(start)), last_seq_(committed_.last_seq) {}

Status Folder::add(Event&& event) {
  staging() = std::move(event);
  return add_staged();
}

Event& Folder::staging() {
  if (uncommitted_count_ == uncommitted_.size()) uncommitted_.emplace_back();
  return uncommitted_[uncommitted_count_];
}

Status Folder::add_staged() {
  const Event& event = uncommitted_[uncommitted_count_];
  if (event.seq != last_seq_ + 1) {
    return Status::inconsistent("seq " + n(event.seq) + " follows seq " + n(last_seq_) +
                                (event.seq > last_seq_ ? ": events are missing" : ": seq goes backwards"));
  }
  if (std::holds_alternative<UnknownEvent>(event.body)) ++unknown_skipped_;
  Status s;
  if (std::holds_alternative<TurnCommitted>(event.body)) {
    s = commit(event);
  } else if (std::holds_alternative<TurnRolledBack>(event.body)) {
    s = roll_back(event);
  } else {
    ++uncommitted_count_;
  }
  if (s.ok()) {
    ++last_seq_;
    ++events_folded_;
  }
  return s;
}

Status Folder::commit(const Event& event) {
  // In place: copying the state at every checkpoint would make a fold O(n^2).
  SessionState& next = committed_;
  for (size_t i = 0; i < uncommitted_count_; ++i)
    CARAPACE_RETURN_IF_ERROR(apply(next, std::move(uncommitted_[i])));
  const auto& c = std::get<TurnCommitted>(event.body);
  if (options_.verify_hashes) {
    if (!state_hash_version_known(c.hash_version)) {
      // A hash this build cannot compute proves nothing: refuse rather than trust it unchecked.
      return Status::unsupported("seq " + n(event.seq) + " (turn.committed, turn " + n(c.turn) +
                                 "): its state hash is of version " + n(c.hash_version) +
                                 " and this build computes version " + n(kStateHashVersion) +
                                 "; a carapace that knows that version can check it");
    }
    Digest128 actual = state_hash(next, c.hash_version);
    if (actual != c.state_hash) {
      return Status::inconsistent("seq " + n(event.seq) + " (turn.committed, turn " + n(c.turn) +
                                  "): the folded state hashes to " + actual.hex() +
                                  " but the checkpoint recorded " + c.state_hash.hex())
          .with_detail(Status::Detail::kStateHashMismatch);
    }
    ++checkpoints_verified_;
  }
  CARAPACE_RETURN_IF_ERROR(apply(next, event));
  uncommitted_count_ = 0;
  return Status();
}

Status Folder::roll_back(const Event& event) {
  const auto& r = std::get<TurnRolledBack>(event.body);
  auto pending = uncommitted();
  uint64_t first = pending.empty() ? 0 : pending.front().seq;
  uint64_t last = pending.empty() ? 0 : pending.back().seq;
  if (pending.empty() || r.from_seq != first || r.to_seq != last) {
    return Status::inconsistent(
        "seq " + n(event.seq) + " (turn.rolled_back): rolls back [" + n(r.from_seq) + ", " + n(r.to_seq) +
        "] but the events after the last checkpoint are " +
        (pending.empty() ? std::string("none") : "[" + n(first) + ", " + n(last) + "]"));
  }
  uncommitted_count_ = 0;
  return apply(committed_, event);
}

Status Folder::state_with_uncommitted(SessionState* out) const {
  SessionState s = committed_;
  for (const Event& e : uncommitted()) CARAPACE_RETURN_IF_ERROR(apply(s, e));
  *out = std::move(s);
  return Status();
}

Status fold(const std::vector<Event>& events, SessionState* out) {
  Folder folder;
  for (const Event& e : events) CARAPACE_RETURN_IF_ERROR(folder.add(e));
  return folder.state_with_uncommitted(out);
}

}  // namespace carapace
