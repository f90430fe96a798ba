// The messages actors exchange: plain structs with field lists (so one
// generic CAF inspect serializes them all, see actors/caf_types.h), free of
// CAF headers so that pure code can use them.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "actors/fault_note.h"
#include "actors/provider/retry_policy.h"
#include "actors/tool/tool.h"
#include "events/events.h"
#include "events/session_state.h"

namespace carapace {

using codec::Field;

// ---- provider ---------------------------------------------------------------

struct ProviderRequest {
  std::string session_id;
  uint64_t turn = 0;
  uint32_t attempt = 0;        // 1-based within the turn
  uint64_t attempt_index = 0;  // attempts this session made before this one
  std::string model;
  std::string system_prompt;
  std::vector<Message> messages;  // empty for a provider that does not read them
  std::vector<ToolSpec> tools;
  uint64_t message_chars = 0;  // the conversation's size (context_chars), sent or not

  static constexpr auto fields() {
    using R = ProviderRequest;
    return std::tuple{Field{1, "session_id", &R::session_id},
                      Field{2, "turn", &R::turn},
                      Field{3, "attempt", &R::attempt},
                      Field{4, "attempt_index", &R::attempt_index},
                      Field{5, "model", &R::model},
                      Field{6, "system_prompt", &R::system_prompt},
                      Field{7, "messages", &R::messages},
                      Field{8, "tools", &R::tools},
                      Field{9, "message_chars", &R::message_chars}};
  }
  friend bool operator==(const ProviderRequest&, const ProviderRequest&) = default;
};

struct ProviderResponse {
  std::string text;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;
  TokenUsage usage;

  static constexpr auto fields() {
    using R = ProviderResponse;
    return std::tuple{Field{1, "text", &R::text}, Field{2, "tool_calls", &R::tool_calls},
                      Field{3, "finish_reason", &R::finish_reason}, Field{4, "usage", &R::usage}};
  }
  friend bool operator==(const ProviderResponse&, const ProviderResponse&) = default;
};

// The outcome of one provider attempt.
struct ProviderReply {
  bool ok = false;
  ProviderResponse response;  // when ok
  ProviderFailure failure;    // otherwise
  uint64_t latency_ms = 0;    // measured, or simulated by the scripted provider
  std::vector<FaultNote> faults;
  bool answered = false;  // the provider itself produced this reply
  std::string body_ref;   // the verbatim response (or error) body in the body store; "" if none

  static constexpr auto fields() {
    using R = ProviderReply;
    return std::tuple{Field{1, "ok", &R::ok},           Field{2, "response", &R::response},
                      Field{3, "failure", &R::failure}, Field{4, "latency_ms", &R::latency_ms},
                      Field{5, "faults", &R::faults},   Field{6, "answered", &R::answered},
                      Field{7, "body_ref", &R::body_ref}};
  }
  friend bool operator==(const ProviderReply&, const ProviderReply&) = default;
};

// A piece of a streamed response: text, or a fragment of a tool call.
struct StreamDelta {
  std::string session_id;
  uint64_t turn = 0;
  uint32_t attempt = 0;
  std::string text;
  int32_t tool_index = -1;  // >= 0 for a tool call fragment
  std::string tool_id;
  std::string tool_name;
  std::string args_fragment;

  static constexpr auto fields() {
    using D = StreamDelta;
    return std::tuple{Field{1, "session_id", &D::session_id}, Field{2, "turn", &D::turn},
                      Field{3, "attempt", &D::attempt},       Field{4, "text", &D::text},
                      Field{5, "tool_index", &D::tool_index}, Field{6, "tool_id", &D::tool_id},
                      Field{7, "tool_name", &D::tool_name},   Field{8, "args_fragment", &D::args_fragment}};
  }
  friend bool operator==(const StreamDelta&, const StreamDelta&) = default;
};

// ---- tools ------------------------------------------------------------------

struct ToolInvocation {
  std::string session_id;
  ToolCall call;
  std::string workspace;
  // Set by a resume for a call a crash or a stop interrupted: the tool's
  // recover function decides (ToolRecovery); this is the result to give when
  // it cannot tell.
  std::string recovering;
  uint64_t timeout_ms = 0;  // the call's time-out (the tool's own, else the config's); 0: none
  // The tools node to run it on (its name in the config); "": this process.
  // The session picks it, and records it in tool.requested, before sending.
  std::string node;
  uint32_t attempt = 1;

  static constexpr auto fields() {
    using T = ToolInvocation;
    return std::tuple{Field{1, "session_id", &T::session_id}, Field{2, "call", &T::call},
                      Field{3, "workspace", &T::workspace}, Field{4, "recovering", &T::recovering},
                      Field{5, "timeout_ms", &T::timeout_ms}, Field{6, "node", &T::node},
                      Field{7, "attempt", &T::attempt}};
  }
  friend bool operator==(const ToolInvocation&, const ToolInvocation&) = default;
};

struct ToolOutcome {
  std::string call_id;
  std::string output;
  bool is_error = false;
  bool timed_out = false;
  bool truncated = false;
  uint64_t original_bytes = 0;
  uint64_t duration_ms = 0;
  std::vector<FaultNote> faults;
  bool hang = false;         // an injected hang: the worker never answers
  bool interrupted = false;  // a crash interrupted the call; its outcome is unknown
  std::string node;          // the tools node that answered (or was lost); "": this process
  // The node was lost (killed, frozen, cut off) with the call in flight: no
  // result came and none will. The session decides what that means.
  bool node_lost = false;

  static constexpr auto fields() {
    using T = ToolOutcome;
    return std::tuple{Field{1, "call_id", &T::call_id},
                      Field{2, "output", &T::output},
                      Field{3, "is_error", &T::is_error},
                      Field{4, "timed_out", &T::timed_out},
                      Field{5, "truncated", &T::truncated},
                      Field{6, "original_bytes", &T::original_bytes},
                      Field{7, "duration_ms", &T::duration_ms},
                      Field{8, "faults", &T::faults},
                      Field{9, "hang", &T::hang},
                      Field{10, "interrupted", &T::interrupted},
                      Field{11, "node", &T::node},
                      Field{12, "node_lost", &T::node_lost}};
  }
  friend bool operator==(const ToolOutcome&, const ToolOutcome&) = default;
};

// ---- sessions ---------------------------------------------------------------

// How a session stands when its loop stops (completed, failed, or waiting for input).
struct SessionOutcome {
  std::string session_id;
  SessionStatus status = SessionStatus::kNew;
  std::string final_answer;
  std::string stop_reason;
  std::string error;
  uint64_t turns = 0;
  TokenUsage tokens;
  double cost_usd = 0;
  uint64_t last_seq = 0;
  // The session goes on at once with another run: a message sent meanwhile,
  // or the next follow-up. A waiter that wants the very end waits again.
  bool continues = false;
  // Parked (stop_reason "waiting"): the requests waiting for a person.
  std::vector<ApprovalRequested> waiting;

  static constexpr auto fields() {
    using O = SessionOutcome;
    return std::tuple{Field{1, "session_id", &O::session_id},
                      Field{2, "status", &O::status},
                      Field{3, "final_answer", &O::final_answer},
                      Field{4, "stop_reason", &O::stop_reason},
                      Field{5, "error", &O::error},
                      Field{6, "turns", &O::turns},
                      Field{7, "tokens", &O::tokens},
                      Field{8, "cost_usd", &O::cost_usd},
                      Field{9, "last_seq", &O::last_seq},
                      Field{10, "continues", &O::continues},
                      Field{11, "waiting", &O::waiting}};
  }
  friend bool operator==(const SessionOutcome&, const SessionOutcome&) = default;
};

// A person's (or a program's, or the clock's) answer to an approval request
// (docs/approvals.md).
struct ApprovalAnswer {
  enum class Kind : uint8_t { kApprove = 1, kDeny = 2, kAnswer = 3 };
  std::string call_id;
  Kind kind = Kind::kApprove;
  std::string reason;
  std::string text;  // kAnswer: the answer to the question
  // The digest (hex) of the arguments the answerer saw (approval.requested's
  // args_digest): refused if the request is bound to other ones. "": the
  // request's, as it stands when the answer is recorded.
  std::string args_digest;
  std::string by = "api";  // cli, api, web, expiry, or a program's own label
  std::string who;         // who answered, as the caller knows it
  // Set by the runtime only: the request's expiry decides it.
  bool expiry = false;

  static constexpr auto fields() {
    using A = ApprovalAnswer;
    return std::tuple{Field{1, "call_id", &A::call_id}, Field{2, "kind", &A::kind},
                      Field{3, "reason", &A::reason},   Field{4, "text", &A::text},
                      Field{5, "args_digest", &A::args_digest}, Field{6, "by", &A::by},
                      Field{7, "who", &A::who},         Field{8, "expiry", &A::expiry}};
  }
  friend bool operator==(const ApprovalAnswer&, const ApprovalAnswer&) = default;
};

// A session's reply to an ApprovalAnswer: recorded (durably), or why not.
struct ApprovalReply {
  bool ok = false;
  // not_found (no such request), already_decided (the first answer named in
  // `error`), mismatch (other arguments), expired (its on_expiry decided it
  // now), invalid (an answer of the wrong kind), storage (not durable).
  std::string code;
  std::string error;
  ApprovalDecided decided;  // ok: what was recorded; already_decided/expired: the decision that stands

  static constexpr auto fields() {
    using R = ApprovalReply;
    return std::tuple{Field{1, "ok", &R::ok}, Field{2, "code", &R::code}, Field{3, "error", &R::error},
                      Field{4, "decided", &R::decided}};
  }
  friend bool operator==(const ApprovalReply&, const ApprovalReply&) = default;
};

struct UserInput {
  std::string text;

  static constexpr auto fields() { return std::tuple{Field{1, "text", &UserInput::text}}; }
  friend bool operator==(const UserInput&, const UserInput&) = default;
};

// The answer to a UserInput: sent once the message is durable, or why it
// could not be taken.
struct InputAck {
  bool ok = false;
  std::string error;

  static constexpr auto fields() {
    return std::tuple{Field{1, "ok", &InputAck::ok}, Field{2, "error", &InputAck::error}};
  }
  friend bool operator==(const InputAck&, const InputAck&) = default;
};

}  // namespace carapace
