// SessionState: what a session is, as folded from its events.
//
// The state holds the conversation (messages with roles, assistant tool calls
// and their results), the turn counters, token and cost totals, the tool calls
// still waiting for a result, and the status. System prompts are not part of
// it: they are rebuilt every turn. The state is a plain value: copy it, compare
// it, encode it for a snapshot. It is built only by apply() (events/fold.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/digest.h"
#include "base/status.h"
#include "events/events.h"

namespace carapace {

enum class Role : uint8_t { kUser = 1, kAssistant = 2, kTool = 3 };
std::string_view role_name(Role role);

struct Message {
  Role role = Role::kUser;
  std::string text;
  std::vector<ToolCall> tool_calls;  // assistant messages
  std::string tool_call_id;          // tool results
  std::string tool_name;
  bool is_error = false;

  static constexpr auto fields() {
    return std::tuple{Field{1, "role", &Message::role},
                      Field{2, "text", &Message::text},
                      Field{3, "tool_calls", &Message::tool_calls},
                      Field{4, "tool_call_id", &Message::tool_call_id},
                      Field{5, "tool_name", &Message::tool_name},
                      Field{6, "is_error", &Message::is_error}};
  }
  friend bool operator==(const Message&, const Message&) = default;
};

// A tool call the model asked for that has no result yet.
struct PendingToolCall {
  ToolCall call;           // args as finally requested (after modify_args hooks)
  bool requested = false;  // tool.requested was recorded: execution may have begun
  std::string node;        // the tools node it was last sent to ("": this process)
  uint32_t attempt = 0;    // of the latest tool.requested (0: the first)

  static constexpr auto fields() {
    return std::tuple{Field{1, "call", &PendingToolCall::call}, Field{2, "requested", &PendingToolCall::requested},
                      Field{3, "node", &PendingToolCall::node}, Field{4, "attempt", &PendingToolCall::attempt}};
  }
  friend bool operator==(const PendingToolCall&, const PendingToolCall&) = default;
};

// An approval.requested of the open turn, and its decision once recorded.
struct PendingApproval {
  ApprovalRequested request;
  uint64_t seq = 0;  // of the request
  bool decided = false;
  ApprovalDecided decision;  // the first one recorded that is bound to the request's arguments
  uint64_t decided_seq = 0;

  static constexpr auto fields() {
    using P = PendingApproval;
    return std::tuple{Field{1, "request", &P::request}, Field{2, "seq", &P::seq}, Field{3, "decided", &P::decided},
                      Field{4, "decision", &P::decision}, Field{5, "decided_seq", &P::decided_seq}};
  }
  friend bool operator==(const PendingApproval&, const PendingApproval&) = default;
};

enum class SessionStatus : uint8_t { kNew = 0, kRunning = 1, kCompleted = 2, kFailed = 3 };
std::string_view status_name(SessionStatus status);

struct SessionState {
  // From session.started.
  std::string agent_id;
  std::string provider;
  std::string model;
  std::string config_digest;
  std::string parent_session;
  uint64_t parent_turn = 0;
  uint64_t parent_seq = 0;
  uint64_t rng_seed = 0;
  std::string workspace;
  uint64_t max_turns = 0;
  std::string instructions;

  SessionStatus status = SessionStatus::kNew;
  uint64_t turn = 0;            // the last turn started
  bool turn_open = false;       // started and not yet committed
  uint64_t committed_turn = 0;  // turns completed as of the last checkpoint
  uint64_t committed_seq = 0;   // seq of the last turn.committed
  uint64_t last_seq = 0;        // seq of the last event folded
  // How far the open turn got, so that a resumed session can go on from there.
  bool turn_responded = false;  // the model answered in this turn
  uint32_t turn_attempts = 0;   // llm.requested in this turn
  uint32_t turn_failures = 0;   // llm.failed in this turn: the retry policy's attempt count
  bool turn_start_decided = false;  // TurnStart hooks' decisions are recorded
  bool turn_prompted = false;       // prompt.assembled in this turn
  uint64_t turn_retry_delay_ms = 0; // the last attempt failed and the next waits this long
  bool turn_gave_up = false;        // the last attempt failed for good
  // The last tool call of this turn that ran, and whether its PostToolUse
  // hooks are recorded (a resumed session asks them if not).
  ToolCall turn_last_call;
  bool turn_last_call_hooked = false;
  bool agent_start_decided = false;  // AgentStart hooks' decisions are recorded

  std::vector<Message> messages;
  std::vector<PendingToolCall> pending;

  TokenUsage tokens;
  double cost_usd = 0;
  uint64_t llm_attempts = 0;
  uint64_t llm_calls = 0;  // successful responses
  uint64_t llm_failures = 0;
  uint64_t provider_answers = 0;  // responses, and failures the provider itself produced
  uint64_t tool_calls = 0;        // completed, errors included
  uint64_t tool_errors = 0;
  uint64_t hook_decisions = 0;
  uint64_t context_trims = 0;
  uint64_t rolled_back_turns = 0;
  uint64_t resumes = 0;
  bool stop_requested = false;  // a hook said stop
  // System messages hooks added, for the next prompt's session layer;
  // consumed (cleared) by the next prompt.assembled, which moves them to
  // turn_system_messages: the ones this turn's prompt holds.
  std::vector<std::string> hook_system_messages;
  std::vector<std::string> turn_system_messages;
  Digest128 last_prompt_digest;
  std::string final_answer;
  std::string stop_reason;  // why the loop last stopped: final_answer, max_turns, hook_stop, provider_error
  std::string last_error;
  uint32_t last_http_status = 0;       // of the last failed model call
  bool last_failure_transient = false;  // of the last failed model call
  // User messages sent while the loop ran; they join `messages` when the next turn starts.
  std::vector<std::string> queued_inputs;
  std::vector<std::string> follow_ups;  // waiting for the session to have nothing left to do, in order
  // This turn's approval requests (cleared when the next turn starts); one
  // not decided parks the session (waiting_approval()).
  std::vector<PendingApproval> approvals;
  uint64_t approvals_requested = 0;  // over the session
  uint64_t approvals_ignored = 0;    // decisions that came second, or bound to other arguments

  // XXH3-128 chain over `messages` (see state_hash); kept up to date by apply().
  Digest128 messages_digest;
  // Each message's own digest, parallel to `messages`: derived, not stored
  // (decode_state rebuilds it), so that a trim re-chains 32 bytes a message
  // instead of re-encoding every message.
  std::vector<Digest128> message_digests;

  static constexpr uint32_t kMessagesTag = 20;

  static constexpr auto fields() {
    using S = SessionState;
    return std::tuple{
        Field{1, "agent_id", &S::agent_id},
        Field{2, "provider", &S::provider},
        Field{3, "model", &S::model},
        Field{4, "config_digest", &S::config_digest},
        Field{5, "parent_session", &S::parent_session},
        Field{6, "parent_turn", &S::parent_turn},
        Field{7, "parent_seq", &S::parent_seq},
        Field{8, "rng_seed", &S::rng_seed},
        Field{9, "workspace", &S::workspace},
        Field{16, "max_turns", &S::max_turns},
        Field{17, "instructions", &S::instructions},
        Field{10, "status", &S::status},
        Field{11, "turn", &S::turn},
        Field{12, "turn_open", &S::turn_open},
        Field{13, "committed_turn", &S::committed_turn},
        Field{14, "committed_seq", &S::committed_seq},
        Field{15, "last_seq", &S::last_seq},
        Field{kMessagesTag, "messages", &S::messages},
        Field{21, "pending", &S::pending},
        Field{22, "tokens", &S::tokens},
        Field{23, "cost_usd", &S::cost_usd},
        Field{24, "llm_attempts", &S::llm_attempts},
        Field{25, "llm_calls", &S::llm_calls},
        Field{26, "llm_failures", &S::llm_failures},
        Field{27, "tool_calls", &S::tool_calls},
        Field{28, "tool_errors", &S::tool_errors},
        Field{29, "hook_decisions", &S::hook_decisions},
        Field{30, "context_trims", &S::context_trims},
        Field{31, "rolled_back_turns", &S::rolled_back_turns},
        Field{32, "resumes", &S::resumes},
        Field{33, "stop_requested", &S::stop_requested},
        Field{34, "last_prompt_digest", &S::last_prompt_digest},
        Field{35, "final_answer", &S::final_answer},
        Field{36, "last_error", &S::last_error},
        Field{37, "hook_system_messages", &S::hook_system_messages},
        Field{38, "turn_responded", &S::turn_responded},
        Field{39, "turn_attempts", &S::turn_attempts},
        Field{41, "provider_answers", &S::provider_answers},
        Field{42, "turn_start_decided", &S::turn_start_decided},
        Field{43, "turn_prompted", &S::turn_prompted},
        Field{44, "turn_retry_delay_ms", &S::turn_retry_delay_ms},
        Field{45, "turn_gave_up", &S::turn_gave_up},
        Field{46, "turn_last_call", &S::turn_last_call},
        Field{47, "turn_last_call_hooked", &S::turn_last_call_hooked},
        Field{48, "agent_start_decided", &S::agent_start_decided},
        Field{49, "stop_reason", &S::stop_reason},
        Field{50, "last_http_status", &S::last_http_status},
        Field{51, "last_failure_transient", &S::last_failure_transient},
        Field{52, "queued_inputs", &S::queued_inputs},
        Field{53, "turn_system_messages", &S::turn_system_messages},
        Field{54, "turn_failures", &S::turn_failures},
        Field{55, "follow_ups", &S::follow_ups},
        Field{56, "approvals", &S::approvals},
        Field{57, "approvals_requested", &S::approvals_requested},
        Field{58, "approvals_ignored", &S::approvals_ignored},
        Field{40, "messages_digest", &S::messages_digest},
    };
  }
  friend bool operator==(const SessionState&, const SessionState&) = default;
};

// The request of call `call_id` in this turn, or null.
const PendingApproval* find_approval(const SessionState& state, const std::string& call_id);
// The first request of this turn still waiting for its decision, or null:
// the session is parked on it.
const PendingApproval* waiting_approval(const SessionState& state);

// The fold's rules for a turn's approvals, also used to read a parked
// session's requests from its open turn without folding it all:
// turn.started and turn.rolled_back clear them; approval.requested adds one
// (replacing an earlier request of the same call); approval.decided decides
// its call's request if that is still undecided and the decision names the
// request's argument digest, and is ignored otherwise (returns false: the
// first answer wins, and a changed call cannot ride an old approval).
bool note_approval(std::vector<PendingApproval>& approvals, const Event& e);

// The XXH3-128 of a call's arguments as recorded (their exact bytes).
Digest128 args_digest(const JsonText& args);

// Version of the state_hash() definition, stored in every turn.committed.
// Checkpoints of every earlier version stay checkable.
constexpr uint32_t kStateHashVersion = 2;
bool state_hash_version_known(uint32_t version);

// The canonical hash of a state: XXH3-128 over the state's encoding without
// its messages (messages_digest included). messages_digest chains the
// messages: m(i) = XXH3-128(encode(message i)), d(0) = 0,
// d(i) = XXH3-128(d(i-1) || m(i)), each digest as 16 big-endian bytes. So the
// hash is a pure function of the state's content, and costs O(1) in the
// number of messages at a checkpoint instead of O(history).
// `version` (1 to kStateHashVersion) chooses the definition: version 1
// covers the fields up to tag 41, which is what it knew.
Digest128 state_hash(const SessionState& state, uint32_t version = kStateHashVersion);

// m(i): the digest of one message.
Digest128 message_digest(const Message& message);

// d(i) from d(i-1) and m(i).
Digest128 chain_digest(const Digest128& previous, const Digest128& message);

// Appends a message, keeping messages_digest and message_digests current.
void append_message(SessionState& state, Message message);

// Recomputes messages_digest from message_digests (after a trim).
void rechain_messages(SessionState& state);

// Recomputes messages_digest from the messages themselves.
Digest128 digest_messages(const std::vector<Message>& messages);

// The snapshot encoding of a state (tagged fields, events/codec.h).
std::string encode_state(const SessionState& state);

// Decodes a snapshot and re-checks its messages_digest against its messages.
Status decode_state(std::string_view bytes, SessionState* out);

}  // namespace carapace
