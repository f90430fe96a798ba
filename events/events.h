// The event vocabulary: one plain struct per event type of SPEC §2.
//
// Everything non-deterministic that a session observes (model output, tool
// output, hook decisions of external commands, chosen retry delays, the seed of
// the jitter generator) is a field of some event, so that folding the log
// never consults the outside world. Each struct lists its fields with stable
// tags for the codec (events/codec.h); a tag is never reused.
//
// Event = seq + timestamp + body, where body is a variant over these structs
// and UnknownEvent (a type from a newer writer, kept as raw bytes).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "base/digest.h"
#include "events/codec.h"
#include "events/event_type.h"

namespace carapace {

using codec::Field;

struct TokenUsage {
  uint64_t input = 0;
  uint64_t output = 0;
  uint64_t cache_read = 0;
  uint64_t cache_write = 0;

  static constexpr auto fields() {
    return std::tuple{Field{1, "input", &TokenUsage::input}, Field{2, "output", &TokenUsage::output},
                      Field{3, "cache_read", &TokenUsage::cache_read},
                      Field{4, "cache_write", &TokenUsage::cache_write}};
  }
  friend bool operator==(const TokenUsage&, const TokenUsage&) = default;
};

// A tool call the model asked for.
struct ToolCall {
  std::string id;
  std::string name;
  JsonText args;

  static constexpr auto fields() {
    return std::tuple{Field{1, "id", &ToolCall::id}, Field{2, "name", &ToolCall::name},
                      Field{3, "args", &ToolCall::args}};
  }
  friend bool operator==(const ToolCall&, const ToolCall&) = default;
};

// One layer of the assembled system prompt (its text is not stored).
struct PromptSegment {
  std::string layer;        // identity, tools, workflows, session, custom
  std::string contributor;  // who produced it: a file, the tool registry, ...
  uint64_t chars = 0;

  static constexpr auto fields() {
    return std::tuple{Field{1, "layer", &PromptSegment::layer},
                      Field{2, "contributor", &PromptSegment::contributor},
                      Field{3, "chars", &PromptSegment::chars}};
  }
  friend bool operator==(const PromptSegment&, const PromptSegment&) = default;
};

struct SessionStarted {
  static constexpr EventType kType = EventType::kSessionStarted;
  std::string agent_id;
  std::string provider;
  std::string model;
  std::string config_digest;
  std::string parent_session;  // set when forked
  uint64_t parent_turn = 0;
  uint64_t parent_seq = 0;
  uint64_t rng_seed = 0;  // seeds retry jitter; recorded so replay is exact
  std::string workspace;
  // The session's own options, kept for its resumes and forks: its turn
  // budget (0: the configuration's) and the instructions it added to the
  // configuration's.
  uint64_t max_turns = 0;
  std::string instructions;

  static constexpr auto fields() {
    return std::tuple{Field{1, "agent_id", &SessionStarted::agent_id},
                      Field{2, "provider", &SessionStarted::provider},
                      Field{3, "model", &SessionStarted::model},
                      Field{4, "config_digest", &SessionStarted::config_digest},
                      Field{5, "parent_session", &SessionStarted::parent_session},
                      Field{6, "parent_turn", &SessionStarted::parent_turn},
                      Field{7, "parent_seq", &SessionStarted::parent_seq},
                      Field{8, "rng_seed", &SessionStarted::rng_seed},
                      Field{9, "workspace", &SessionStarted::workspace},
                      Field{10, "max_turns", &SessionStarted::max_turns},
                      Field{11, "instructions", &SessionStarted::instructions}};
  }
  friend bool operator==(const SessionStarted&, const SessionStarted&) = default;
};

struct UserMessage {
  static constexpr EventType kType = EventType::kUserMessage;
  std::string text;
  // Sent while the session's loop was running: it joins the conversation when
  // the next turn starts, not in the middle of the running one.
  bool queued = false;
  // A follow-up (`run --then`): recorded with the task (or by a resume), it
  // waits in the state until the session has nothing left to do, then is
  // sent as the next message; so a crash at any point loses none.
  bool follow_up = false;
  // This is the first waiting follow-up, sent now: it leaves the wait and
  // starts a run as any message does.
  bool from_follow_ups = false;

  static constexpr auto fields() {
    return std::tuple{Field{1, "text", &UserMessage::text}, Field{2, "queued", &UserMessage::queued},
                      Field{3, "follow_up", &UserMessage::follow_up},
                      Field{4, "from_follow_ups", &UserMessage::from_follow_ups}};
  }
  friend bool operator==(const UserMessage&, const UserMessage&) = default;
};

struct TurnStarted {
  static constexpr EventType kType = EventType::kTurnStarted;
  uint64_t turn = 0;

  static constexpr auto fields() { return std::tuple{Field{1, "turn", &TurnStarted::turn}}; }
  friend bool operator==(const TurnStarted&, const TurnStarted&) = default;
};

struct PromptAssembled {
  static constexpr EventType kType = EventType::kPromptAssembled;
  uint64_t turn = 0;
  std::vector<PromptSegment> segments;
  Digest128 digest;  // of the assembled system prompt text
  uint64_t total_chars = 0;

  static constexpr auto fields() {
    return std::tuple{
        Field{1, "turn", &PromptAssembled::turn}, Field{2, "segments", &PromptAssembled::segments},
        Field{3, "digest", &PromptAssembled::digest}, Field{4, "total_chars", &PromptAssembled::total_chars}};
  }
  friend bool operator==(const PromptAssembled&, const PromptAssembled&) = default;
};

struct LlmRequested {
  static constexpr EventType kType = EventType::kLlmRequested;
  uint64_t turn = 0;
  uint32_t attempt = 0;  // 1-based
  std::string model;
  Digest128 request_digest;
  std::string body_ref;  // key of the verbatim body in the trace store
  uint64_t message_count = 0;

  static constexpr auto fields() {
    return std::tuple{Field{1, "turn", &LlmRequested::turn},
                      Field{2, "attempt", &LlmRequested::attempt},
                      Field{3, "model", &LlmRequested::model},
                      Field{4, "request_digest", &LlmRequested::request_digest},
                      Field{5, "body_ref", &LlmRequested::body_ref},
                      Field{6, "message_count", &LlmRequested::message_count}};
  }
  friend bool operator==(const LlmRequested&, const LlmRequested&) = default;
};

enum class ErrorCategory : uint8_t { kNone = 0, kTransient = 1, kPermanent = 2 };

struct LlmFailed {
  static constexpr EventType kType = EventType::kLlmFailed;
  uint64_t turn = 0;
  uint32_t attempt = 0;
  uint32_t http_status = 0;  // 0 for a transport error
  std::string error;
  ErrorCategory category = ErrorCategory::kNone;
  bool will_retry = false;
  uint64_t retry_delay_ms = 0;  // the delay chosen (jitter included), if retrying
  uint64_t retry_after_ms = 0;  // the server's Retry-After, if it sent one
  uint64_t latency_ms = 0;
  std::string body_ref;
  // The provider produced this failure (an HTTP error, a scenario's error
  // entry); false when it never answered (a timeout, a dead actor, a fault
  // injected before the request).
  bool provider_answered = false;

  static constexpr auto fields() {
    return std::tuple{Field{1, "turn", &LlmFailed::turn},
                      Field{2, "attempt", &LlmFailed::attempt},
                      Field{3, "http_status", &LlmFailed::http_status},
                      Field{4, "error", &LlmFailed::error},
                      Field{5, "category", &LlmFailed::category},
                      Field{6, "will_retry", &LlmFailed::will_retry},
                      Field{7, "retry_delay_ms", &LlmFailed::retry_delay_ms},
                      Field{8, "retry_after_ms", &LlmFailed::retry_after_ms},
                      Field{9, "latency_ms", &LlmFailed::latency_ms},
                      Field{10, "body_ref", &LlmFailed::body_ref},
                      Field{11, "provider_answered", &LlmFailed::provider_answered}};
  }
  friend bool operator==(const LlmFailed&, const LlmFailed&) = default;
};

struct LlmResponded {
  static constexpr EventType kType = EventType::kLlmResponded;
  uint64_t turn = 0;
  uint32_t attempt = 0;
  std::string text;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;
  TokenUsage usage;
  double cost_usd = 0;
  uint64_t latency_ms = 0;
  std::string body_ref;

  static constexpr auto fields() {
    return std::tuple{Field{1, "turn", &LlmResponded::turn},
                      Field{2, "attempt", &LlmResponded::attempt},
                      Field{3, "text", &LlmResponded::text},
                      Field{4, "tool_calls", &LlmResponded::tool_calls},
                      Field{5, "finish_reason", &LlmResponded::finish_reason},
                      Field{6, "usage", &LlmResponded::usage},
                      Field{7, "cost_usd", &LlmResponded::cost_usd},
                      Field{8, "latency_ms", &LlmResponded::latency_ms},
                      Field{9, "body_ref", &LlmResponded::body_ref}};
  }
  friend bool operator==(const LlmResponded&, const LlmResponded&) = default;
};

struct HookDecided {
  static constexpr EventType kType = EventType::kHookDecided;
  std::string hook_event;  // PreToolUse, TurnEnd, ...
  std::string hook_name;
  // allow, deny, modify_args, continue, append_context, system_message, stop;
  // or failed: the hook threw, failed, timed out or answered nonsense
  // (reason says how) and was skipped.
  std::string decision;
  std::string reason;
  JsonText modified_args;
  std::string tool_call_id;
  std::string message;  // text of system_message / append_context

  static constexpr auto fields() {
    return std::tuple{Field{1, "hook_event", &HookDecided::hook_event},
                      Field{2, "hook_name", &HookDecided::hook_name},
                      Field{3, "decision", &HookDecided::decision},
                      Field{4, "reason", &HookDecided::reason},
                      Field{5, "modified_args", &HookDecided::modified_args},
                      Field{6, "tool_call_id", &HookDecided::tool_call_id},
                      Field{7, "message", &HookDecided::message}};
  }
  friend bool operator==(const HookDecided&, const HookDecided&) = default;
};

struct ToolRequested {
  static constexpr EventType kType = EventType::kToolRequested;
  std::string call_id;
  std::string tool;
  JsonText args;  // after hooks (modify_args)
  // Where the call was sent (docs/scale-out.md): a tools node's name; "":
  // this process. A call a lost node had in flight that is safe to run again
  // is requested again on another node: attempt 2, 3, ... (0 means 1), with
  // why the earlier attempt was given up.
  std::string node;
  uint32_t attempt = 0;
  std::string retry_reason;

  static constexpr auto fields() {
    return std::tuple{Field{1, "call_id", &ToolRequested::call_id}, Field{2, "tool", &ToolRequested::tool},
                      Field{3, "args", &ToolRequested::args},       Field{4, "node", &ToolRequested::node},
                      Field{5, "attempt", &ToolRequested::attempt}, Field{6, "retry_reason", &ToolRequested::retry_reason}};
  }
  friend bool operator==(const ToolRequested&, const ToolRequested&) = default;
};

struct ToolCompleted {
  static constexpr EventType kType = EventType::kToolCompleted;
  std::string call_id;
  std::string tool;
  std::string output;
  bool is_error = false;
  uint64_t duration_ms = 0;
  bool timed_out = false;
  bool truncated = false;
  uint64_t original_bytes = 0;  // output size before truncation
  uint64_t kept_bytes = 0;
  bool interrupted = false;  // the call's outcome was lost: the run ended while it ran
  std::string stop_reason;   // interrupted by a stop (session.stopped): its reason; "": by a crash
  std::string node;          // the tools node that ran it (or was lost with it); "": this process

  static constexpr auto fields() {
    return std::tuple{Field{1, "call_id", &ToolCompleted::call_id},
                      Field{2, "tool", &ToolCompleted::tool},
                      Field{3, "output", &ToolCompleted::output},
                      Field{4, "is_error", &ToolCompleted::is_error},
                      Field{5, "duration_ms", &ToolCompleted::duration_ms},
                      Field{6, "timed_out", &ToolCompleted::timed_out},
                      Field{7, "truncated", &ToolCompleted::truncated},
                      Field{8, "original_bytes", &ToolCompleted::original_bytes},
                      Field{9, "kept_bytes", &ToolCompleted::kept_bytes},
                      Field{10, "interrupted", &ToolCompleted::interrupted},
                      Field{11, "stop_reason", &ToolCompleted::stop_reason},
                      Field{12, "node", &ToolCompleted::node}};
  }
  friend bool operator==(const ToolCompleted&, const ToolCompleted&) = default;
};

// Messages [first_index, first_index + messages_removed) left the context.
struct ContextTrimmed {
  static constexpr EventType kType = EventType::kContextTrimmed;
  uint64_t first_index = 0;
  uint64_t messages_removed = 0;
  uint64_t chars_before = 0;
  uint64_t chars_after = 0;

  static constexpr auto fields() {
    return std::tuple{Field{1, "first_index", &ContextTrimmed::first_index},
                      Field{2, "messages_removed", &ContextTrimmed::messages_removed},
                      Field{3, "chars_before", &ContextTrimmed::chars_before},
                      Field{4, "chars_after", &ContextTrimmed::chars_after}};
  }
  friend bool operator==(const ContextTrimmed&, const ContextTrimmed&) = default;
};

// The checkpoint: the state folded from every event up to last_seq hashes to
// state_hash. Written with a synced WAL.
struct TurnCommitted {
  static constexpr EventType kType = EventType::kTurnCommitted;
  uint64_t turn = 0;  // turns completed so far
  uint64_t last_seq = 0;
  Digest128 state_hash;
  uint32_t hash_version = 0;  // which state_hash() produced it

  static constexpr auto fields() {
    return std::tuple{Field{1, "turn", &TurnCommitted::turn}, Field{2, "last_seq", &TurnCommitted::last_seq},
                      Field{3, "state_hash", &TurnCommitted::state_hash},
                      Field{4, "hash_version", &TurnCommitted::hash_version}};
  }
  friend bool operator==(const TurnCommitted&, const TurnCommitted&) = default;
};

// Events [from_seq, to_seq] (an incomplete turn) are discarded by the fold.
struct TurnRolledBack {
  static constexpr EventType kType = EventType::kTurnRolledBack;
  uint64_t from_seq = 0;
  uint64_t to_seq = 0;
  uint64_t turn = 0;  // the turn that was incomplete
  std::string reason;

  static constexpr auto fields() {
    return std::tuple{Field{1, "from_seq", &TurnRolledBack::from_seq},
                      Field{2, "to_seq", &TurnRolledBack::to_seq}, Field{3, "turn", &TurnRolledBack::turn},
                      Field{4, "reason", &TurnRolledBack::reason}};
  }
  friend bool operator==(const TurnRolledBack&, const TurnRolledBack&) = default;
};

struct SessionResumed {
  static constexpr EventType kType = EventType::kSessionResumed;
  uint64_t checkpoint_seq = 0;
  uint64_t checkpoint_turn = 0;
  std::string mode;  // step or turn
  int64_t pid = 0;
  std::string host;
  uint64_t max_turns = 0;  // the session's turn budget from here on (a resume that raised it); 0: unchanged

  static constexpr auto fields() {
    return std::tuple{Field{1, "checkpoint_seq", &SessionResumed::checkpoint_seq},
                      Field{2, "checkpoint_turn", &SessionResumed::checkpoint_turn},
                      Field{3, "mode", &SessionResumed::mode}, Field{4, "pid", &SessionResumed::pid},
                      Field{5, "host", &SessionResumed::host}, Field{6, "max_turns", &SessionResumed::max_turns}};
  }
  friend bool operator==(const SessionResumed&, const SessionResumed&) = default;
};

struct SessionCompleted {
  static constexpr EventType kType = EventType::kSessionCompleted;
  std::string final_answer;
  std::string stop_reason;  // final_answer, hook_stop (max_turns in logs written before it became a stop)

  static constexpr auto fields() {
    return std::tuple{Field{1, "final_answer", &SessionCompleted::final_answer},
                      Field{2, "stop_reason", &SessionCompleted::stop_reason}};
  }
  friend bool operator==(const SessionCompleted&, const SessionCompleted&) = default;
};

struct SessionFailed {
  static constexpr EventType kType = EventType::kSessionFailed;
  std::string error;
  std::string stop_reason;

  static constexpr auto fields() {
    return std::tuple{Field{1, "error", &SessionFailed::error},
                      Field{2, "stop_reason", &SessionFailed::stop_reason}};
  }
  friend bool operator==(const SessionFailed&, const SessionFailed&) = default;
};

// A fault a fault plan injected (docs/fault-plans.md). A crash leaves no
// event: it is inferred on resume.
struct FaultInjected {
  static constexpr EventType kType = EventType::kFaultInjected;
  std::string point;   // provider.before_request, tool.after_exec, ...
  std::string action;  // error, delay, hang, malformed_stream
  std::string detail;  // what it did: "HTTP 503", "delayed 200 ms", the rule
  uint64_t turn = 0;

  static constexpr auto fields() {
    return std::tuple{Field{1, "point", &FaultInjected::point}, Field{2, "action", &FaultInjected::action},
                      Field{3, "detail", &FaultInjected::detail}, Field{4, "turn", &FaultInjected::turn}};
  }
  friend bool operator==(const FaultInjected&, const FaultInjected&) = default;
};

// How a session was run, so that resume, fork and replay need only its id:
// the effective configuration (secrets are never in it: only the names of
// the environment variables that hold them), and what the run depended on
// that is not code. Written in the opening; again when a resume or a fork
// runs the session otherwise (a flag, a config file or an embedding program's
// registrations changed it); the session index points at the latest.
struct SessionConfigured {
  static constexpr EventType kType = EventType::kSessionConfigured;
  JsonText config;       // the effective configuration (runtime/config.h's config_to_json)
  std::string scenario;  // the scripted provider's scenario file, verbatim; "" for other providers
  JsonText tools;        // the registered tools: [{name, description, schema, idempotent}]
  std::string origin;    // start, resume or fork: what wrote it

  static constexpr auto fields() {
    return std::tuple{Field{1, "config", &SessionConfigured::config},
                      Field{2, "scenario", &SessionConfigured::scenario},
                      Field{3, "tools", &SessionConfigured::tools},
                      Field{4, "origin", &SessionConfigured::origin}};
  }
  friend bool operator==(const SessionConfigured&, const SessionConfigured&) = default;
};

// The runtime stopped a running session on purpose: it was closed (an
// embedding program destroyed it), the command running it was told to stop
// (SIGINT, SIGTERM), or the session used its turn budget (reason "max_turns",
// written by the loop itself, pid 0). The last event the stopping process writes for the
// session; the session stays resumable, as after a crash, but nobody takes it
// for one. A crash or a power loss leaves no such event.
struct SessionStopped {
  static constexpr EventType kType = EventType::kSessionStopped;
  std::string reason;  // "SIGTERM", "SIGINT", "the runtime was closed", "max_turns", or an embedding program's own
  int64_t pid = 0;     // the process that stopped it

  static constexpr auto fields() {
    return std::tuple{Field{1, "reason", &SessionStopped::reason}, Field{2, "pid", &SessionStopped::pid}};
  }
  friend bool operator==(const SessionStopped&, const SessionStopped&) = default;
};

// A tool call waits for a person (docs/approvals.md): a PreToolUse hook
// answered ask, the configuration's approvals policy matched the call, or
// the model called ask_user (kind "question"). Written durably; the session
// then parks until an approval.decided for the call is recorded.
struct ApprovalRequested {
  static constexpr EventType kType = EventType::kApprovalRequested;
  std::string call_id;
  std::string tool;
  JsonText args;          // exactly what runs if approved (after modify_args hooks)
  Digest128 args_digest;  // XXH3-128 of args' bytes: an answer is bound to it
  std::string reason;     // why it asks (the hook's or the policy's reason)
  std::string asked_by;   // the hook's name, "approvals policy", or "ask_user"
  std::string kind;       // "approval", or "question" (ask_user: answered with text)
  std::string question;   // a question's text
  int64_t requested_at_us = 0;     // wall clock when asked
  uint64_t expires_after_ms = 0;   // 0: never expires
  int64_t expires_at_us = 0;       // requested_at_us + expires_after_ms; 0: never
  std::string on_expiry;           // deny or approve: the decision recorded when it expires

  static constexpr auto fields() {
    using A = ApprovalRequested;
    return std::tuple{Field{1, "call_id", &A::call_id},
                      Field{2, "tool", &A::tool},
                      Field{3, "args", &A::args},
                      Field{4, "args_digest", &A::args_digest},
                      Field{5, "reason", &A::reason},
                      Field{6, "asked_by", &A::asked_by},
                      Field{7, "kind", &A::kind},
                      Field{8, "question", &A::question},
                      Field{9, "requested_at_us", &A::requested_at_us},
                      Field{10, "expires_after_ms", &A::expires_after_ms},
                      Field{11, "expires_at_us", &A::expires_at_us},
                      Field{12, "on_expiry", &A::on_expiry}};
  }
  friend bool operator==(const ApprovalRequested&, const ApprovalRequested&) = default;
};

// The answer to an approval.requested, from outside the loop: the first one
// recorded for a call decides it (the fold ignores any later one, and one
// bound to other arguments than the request's).
struct ApprovalDecided {
  static constexpr EventType kType = EventType::kApprovalDecided;
  std::string call_id;
  std::string decision;   // approved, denied, answered (a question)
  Digest128 args_digest;  // of the arguments it decides: the request's
  std::string reason;
  std::string answer;     // a question's answer: the tool's result
  std::string by;         // what answered: cli, api, web, expiry, or a program's own label
  std::string who;        // who: user@host (pid N), or what the program said
  bool expired = false;   // decided by the request's on_expiry

  static constexpr auto fields() {
    using A = ApprovalDecided;
    return std::tuple{Field{1, "call_id", &A::call_id},   Field{2, "decision", &A::decision},
                      Field{3, "args_digest", &A::args_digest}, Field{4, "reason", &A::reason},
                      Field{5, "answer", &A::answer},     Field{6, "by", &A::by},
                      Field{7, "who", &A::who},           Field{8, "expired", &A::expired}};
  }
  friend bool operator==(const ApprovalDecided&, const ApprovalDecided&) = default;
};

// The events of a schedule's own stream, "schedule:NAME" (docs/schedules.md):
// its definition, pauses, and every fire, skip and run end, so that what a
// schedule did and will do next is a fold of its log (schedule/schedule_state.h).

// A schedule was created or changed: its whole definition (the latest counts).
struct ScheduleDefined {
  static constexpr EventType kType = EventType::kScheduleDefined;
  std::string name;
  std::string cron;                // five fields or a macro, as given
  std::string tz;                  // IANA zone name; "" is UTC
  std::string overlap;             // skip, buffer_one, allow
  uint64_t catchup_ms = 0;         // fires missed by up to this long still run
  uint64_t jitter_ms = 0;          // each fire waits a deterministic 0..jitter_ms
  uint64_t pause_after_failures = 0;  // pause after this many failed runs in a row; 0: never
  std::string task;                // the first user message of every run
  JsonText session;                // the run's options: model, max_turns, workspace, instructions
  std::string source;              // cli, api, config
  std::string who;                 // user@host (pid N), or the API's caller
  bool paused = false;             // created paused

  static constexpr auto fields() {
    using S = ScheduleDefined;
    return std::tuple{Field{1, "name", &S::name},
                      Field{2, "cron", &S::cron},
                      Field{3, "tz", &S::tz},
                      Field{4, "overlap", &S::overlap},
                      Field{5, "catchup_ms", &S::catchup_ms},
                      Field{6, "jitter_ms", &S::jitter_ms},
                      Field{7, "pause_after_failures", &S::pause_after_failures},
                      Field{8, "task", &S::task},
                      Field{9, "session", &S::session},
                      Field{10, "source", &S::source},
                      Field{11, "who", &S::who},
                      Field{12, "paused", &S::paused}};
  }
  friend bool operator==(const ScheduleDefined&, const ScheduleDefined&) = default;
};

// The schedule was removed: it fires no more (its runs stay in the home).
struct ScheduleRemoved {
  static constexpr EventType kType = EventType::kScheduleRemoved;
  std::string source;
  std::string who;

  static constexpr auto fields() {
    return std::tuple{Field{1, "source", &ScheduleRemoved::source}, Field{2, "who", &ScheduleRemoved::who}};
  }
  friend bool operator==(const ScheduleRemoved&, const ScheduleRemoved&) = default;
};

// Paused: due times pass without a run; resuming does not catch them up.
struct SchedulePaused {
  static constexpr EventType kType = EventType::kSchedulePaused;
  std::string reason;  // the person's, or "N runs in a row failed"
  std::string source;  // cli, api, config, or "schedule" (paused after failures)
  std::string who;

  static constexpr auto fields() {
    return std::tuple{Field{1, "reason", &SchedulePaused::reason}, Field{2, "source", &SchedulePaused::source},
                      Field{3, "who", &SchedulePaused::who}};
  }
  friend bool operator==(const SchedulePaused&, const SchedulePaused&) = default;
};

// Resumed: due times from now on run again; the failure count starts over.
struct ScheduleResumed {
  static constexpr EventType kType = EventType::kScheduleResumed;
  std::string reason;
  std::string source;
  std::string who;

  static constexpr auto fields() {
    return std::tuple{Field{1, "reason", &ScheduleResumed::reason}, Field{2, "source", &ScheduleResumed::source},
                      Field{3, "who", &ScheduleResumed::who}};
  }
  friend bool operator==(const ScheduleResumed&, const ScheduleResumed&) = default;
};

// A run was started for nominal time `nominal_us`, as session `session`,
// whose id derives from the schedule and the nominal time: written durably
// before the session is started, so a fire retried after a crash finds it.
struct ScheduleFired {
  static constexpr EventType kType = EventType::kScheduleFired;
  int64_t nominal_us = 0;  // the time the cron expression named (a trigger's: when asked)
  int64_t actual_us = 0;   // when it fired (nominal + jitter, later after a catch-up)
  std::string session;
  std::string trigger;     // schedule, catchup, buffered, trigger, backfill
  uint64_t jitter_ms = 0;
  std::string who;         // a trigger's or backfill's asker

  static constexpr auto fields() {
    using S = ScheduleFired;
    return std::tuple{Field{1, "nominal_us", &S::nominal_us}, Field{2, "actual_us", &S::actual_us},
                      Field{3, "session", &S::session},       Field{4, "trigger", &S::trigger},
                      Field{5, "jitter_ms", &S::jitter_ms},   Field{6, "who", &S::who}};
  }
  friend bool operator==(const ScheduleFired&, const ScheduleFired&) = default;
};

// Due times that passed without a run: `count` of them, from nominal_us to
// last_nominal_us, for `reason`: overlap (a run was still going),
// catchup_window (missed by more than the catch-up window), exists (a
// backfill's session ran already); or buffered: one due time deferred until
// the run going now ends (buffer_one), fired then as trigger "buffered".
struct ScheduleSkipped {
  static constexpr EventType kType = EventType::kScheduleSkipped;
  int64_t nominal_us = 0;
  int64_t last_nominal_us = 0;
  uint64_t count = 0;
  std::string reason;
  std::string detail;

  static constexpr auto fields() {
    using S = ScheduleSkipped;
    return std::tuple{Field{1, "nominal_us", &S::nominal_us}, Field{2, "last_nominal_us", &S::last_nominal_us},
                      Field{3, "count", &S::count}, Field{4, "reason", &S::reason}, Field{5, "detail", &S::detail}};
  }
  friend bool operator==(const ScheduleSkipped&, const ScheduleSkipped&) = default;
};

// A fired run's session ended its run: completed, failed (or its session
// could not start), or stopped (over the API, at its turn budget). A run
// parked on a person is still going; one the host's own stop cut off is
// resumed at its next start, not ended.
struct ScheduleRunEnded {
  static constexpr EventType kType = EventType::kScheduleRunEnded;
  std::string session;
  int64_t nominal_us = 0;
  std::string outcome;  // completed, failed, stopped
  std::string error;
  uint64_t duration_ms = 0;  // from the fire to when the host saw the end

  static constexpr auto fields() {
    using S = ScheduleRunEnded;
    return std::tuple{Field{1, "session", &S::session}, Field{2, "nominal_us", &S::nominal_us},
                      Field{3, "outcome", &S::outcome}, Field{4, "error", &S::error},
                      Field{5, "duration_ms", &S::duration_ms}};
  }
  friend bool operator==(const ScheduleRunEnded&, const ScheduleRunEnded&) = default;
};

// A record whose type this build does not know: kept byte for byte so that
// rewriting or bundling a log loses nothing, skipped by the fold.
struct UnknownEvent {
  uint16_t type = 0;
  uint8_t format_version = 0;
  uint8_t flags = 0;
  std::string payload;
  friend bool operator==(const UnknownEvent&, const UnknownEvent&) = default;
};

using EventBody = std::variant<SessionStarted, UserMessage, TurnStarted, PromptAssembled, LlmRequested,
                               LlmFailed, LlmResponded, HookDecided, ToolRequested, ToolCompleted,
                               ContextTrimmed, TurnCommitted, TurnRolledBack, SessionResumed,
                               SessionCompleted, SessionFailed, FaultInjected, SessionConfigured, SessionStopped,
                               ApprovalRequested, ApprovalDecided, ScheduleDefined, ScheduleRemoved,
                               SchedulePaused, ScheduleResumed, ScheduleFired, ScheduleSkipped,
                               ScheduleRunEnded, UnknownEvent>;

// The stored type number of a body (UnknownEvent's own for unknown records).
uint16_t event_type_number(const EventBody& body);

struct Event {
  uint64_t seq = 0;   // 1-based, contiguous within a session
  int64_t ts_us = 0;  // wall clock at append, microseconds since the Unix epoch
  EventBody body;

  // The stored type number (UnknownEvent's own for unknown records).
  uint16_t type_number() const { return event_type_number(body); }
  std::string_view type_name() const { return wire_name(type_number()); }
  friend bool operator==(const Event&, const Event&) = default;
};

template <class T>
const T* get_if(const Event& e) {
  return std::get_if<T>(&e.body);
}

// The verbatim body an event references in the body store (llm.requested,
// llm.responded, llm.failed), or "".
inline const std::string& body_ref_of(const Event& e) {
  static const std::string kNone;
  if (const auto* r = get_if<LlmRequested>(e)) return r->body_ref;
  if (const auto* r = get_if<LlmResponded>(e)) return r->body_ref;
  if (const auto* f = get_if<LlmFailed>(e)) return f->body_ref;
  return kNone;
}

}  // namespace carapace
