// Hooks: code that the agent loop consults at seven points of a session, and
// the rules that combine their decisions.
//
//   AgentStart, TurnStart, TurnEnd, PreToolUse, PostToolUse,
//   PostToolUseFailure, AgentStop
//
// A hook is a C++ callable or an external command (the HookInput as JSON on
// its stdin, a decision as JSON on its stdout, a timeout). Tool events match
// a hook by a regex on the tool name. Decisions combine by priority:
// PreToolUse  deny > ask > modify_args > allow (the first modify_args wins;
//             under ask, the call asked about carries its arguments);
// others      stop > system_message > append_context > continue, where every
//             system_message and append_context is kept unless stop wins.
// A hook that throws, fails, times out or answers nonsense is logged and
// skipped, never fatal (a fail_closed PreToolUse hook denies instead). The
// hooks matching one input run at once, each on a thread of its own, so a
// slow hook delays only the session that fired it. Every decision, and every such failure (decision
// "failed"), becomes a hook.decided event.
//
// Plain values and pure functions; the registry and the code that runs hooks
// are in actors/hook/hook_registry.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "actors/fault_note.h"
#include "base/fault_injection.h"
#include "base/status.h"
#include "events/codec.h"

namespace carapace {

enum class HookEvent : uint8_t {
  kAgentStart = 1,
  kTurnStart,
  kTurnEnd,
  kPreToolUse,
  kPostToolUse,
  kPostToolUseFailure,
  kAgentStop,
};
std::string_view hook_event_name(HookEvent event);
std::optional<HookEvent> hook_event_from_name(std::string_view name);
bool is_tool_event(HookEvent event);

enum class Decision : uint8_t {
  kContinue = 0,
  kAppendContext,
  kSystemMessage,
  kStop,
  kAllow,
  kModifyArgs,
  kDeny,
  // PreToolUse: a person decides (docs/approvals.md): the call waits,
  // recorded as approval.requested, until approved or denied.
  kAsk,
};
std::string_view decision_name(Decision d);
std::optional<Decision> decision_from_name(std::string_view name);
// Whether `d` is a decision hooks of `event` may make.
bool decision_fits(HookEvent event, Decision d);

// What a hook is told.
struct HookInput {
  HookEvent event = HookEvent::kAgentStart;
  std::string session_id;
  uint64_t turn = 0;
  std::string tool_name;     // tool events
  std::string tool_call_id;  // tool events
  JsonText args;             // tool events
  std::string result;        // PostToolUse(Failure): the tool's output
  bool is_error = false;
  std::string text;  // AgentStart: the task; TurnEnd: the assistant text; AgentStop: the final answer

  static constexpr auto fields() {
    using H = HookInput;
    return std::tuple{codec::Field{1, "event", &H::event},
                      codec::Field{2, "session_id", &H::session_id},
                      codec::Field{3, "turn", &H::turn},
                      codec::Field{4, "tool_name", &H::tool_name},
                      codec::Field{5, "tool_call_id", &H::tool_call_id},
                      codec::Field{6, "args", &H::args},
                      codec::Field{7, "result", &H::result},
                      codec::Field{8, "is_error", &H::is_error},
                      codec::Field{9, "text", &H::text}};
  }
  friend bool operator==(const HookInput&, const HookInput&) = default;
};

// What one hook decided.
struct HookDecision {
  std::string hook_name;
  Decision decision = Decision::kContinue;
  std::string reason;
  JsonText modified_args;  // modify_args
  std::string message;     // system_message, append_context

  static constexpr auto fields() {
    using D = HookDecision;
    return std::tuple{codec::Field{1, "hook_name", &D::hook_name}, codec::Field{2, "decision", &D::decision},
                      codec::Field{3, "reason", &D::reason},
                      codec::Field{4, "modified_args", &D::modified_args},
                      codec::Field{5, "message", &D::message}};
  }
  friend bool operator==(const HookDecision&, const HookDecision&) = default;
};

// A hook that threw, failed, timed out or answered nonsense: skipped.
struct HookFailure {
  std::string hook_name;
  std::string error;  // what went wrong, naming the hook

  static constexpr auto fields() {
    return std::tuple{codec::Field{1, "hook_name", &HookFailure::hook_name},
                      codec::Field{2, "error", &HookFailure::error}};
  }
  friend bool operator==(const HookFailure&, const HookFailure&) = default;
};

// Every matching hook's decision, and their combination.
struct HookVerdict {
  std::vector<HookDecision> decisions;  // in registration order; failed hooks left out
  std::vector<HookFailure> failures;    // already logged; recorded as hook.decided "failed"
  Decision resolved = Decision::kContinue;
  std::string reason;             // of the winning decision
  JsonText modified_args;         // modify_args; under ask, the first modify_args's (if any)
  std::vector<FaultNote> faults;  // injected faults that fired

  static constexpr auto fields() {
    using V = HookVerdict;
    return std::tuple{
        codec::Field{1, "decisions", &V::decisions},         codec::Field{2, "failures", &V::failures},
        codec::Field{3, "resolved", &V::resolved},           codec::Field{4, "reason", &V::reason},
        codec::Field{5, "modified_args", &V::modified_args}, codec::Field{6, "faults", &V::faults}};
  }
  friend bool operator==(const HookVerdict&, const HookVerdict&) = default;
};

// A command hook's stdout read as its decision for `event` (diagnostics may
// come before a final JSON line; nothing printed is allow, or continue):
// OK with *out filled, or invalid_argument naming hook `name` and what is
// wrong with what it printed.
Status parse_decision(const std::string& name, const std::string& stdout_text, HookEvent event,
                      HookDecision* out);

// Combines decisions by the priorities above. With no decisions: allow
// (PreToolUse) or continue.
HookVerdict resolve_decisions(HookEvent event, std::vector<HookDecision> decisions);

using HookFunction = std::function<HookDecision(const HookInput&)>;

struct HookDefinition {
  std::string name;
  HookEvent event = HookEvent::kPreToolUse;
  std::string matcher;               // ECMAScript regex on the tool name; empty matches every tool
  HookFunction function;             // a C++ hook, or
  std::vector<std::string> command;  // an external command (argv)
  // How long the hook may take: a command is killed then, a C++ function is
  // abandoned (its answer, should it come, is ignored). Either way the hook
  // failed.
  uint64_t timeout_ms = 10000;
  // A PreToolUse hook that throws, fails or times out denies the call
  // (reason naming the hook and the failure) instead of being skipped.
  bool fail_closed = false;
};

}  // namespace carapace
