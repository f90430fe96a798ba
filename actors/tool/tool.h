// Tool: what the model can call, as declared to it (ToolSpec) and as run
// (ToolDefinition's function). Built-in tools (shell, read_file, write_file,
// list_dir) and tools an embedding program registers are the same kind.
//
// A tool function receives the call's arguments as JSON and a ToolContext;
// it returns a ToolResult. A failure is a result with is_error set, which the
// model sees and reasons about; the runtime never retries a tool. A function
// that throws is caught by the runtime and reported the same way.
//
// Thread safety: a tool function may be called from several threads at once
// (one call per session at a time, many sessions). Blocking tools run on
// threads of their own, never on the actor scheduler's workers.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <tuple>

#include "events/codec.h"

namespace carapace {

// A tool as the model sees it.
struct ToolSpec {
  std::string name;
  std::string description;
  JsonText schema;          // JSON Schema of the arguments object
  bool idempotent = false;  // safe to run again after a crash interrupted it

  static constexpr auto fields() {
    return std::tuple{
        codec::Field{1, "name", &ToolSpec::name}, codec::Field{2, "description", &ToolSpec::description},
        codec::Field{3, "schema", &ToolSpec::schema}, codec::Field{4, "idempotent", &ToolSpec::idempotent}};
  }
  friend bool operator==(const ToolSpec&, const ToolSpec&) = default;
};

struct ToolResult {
  std::string output;  // what the model reads
  bool is_error = false;
  bool timed_out = false;
  bool truncated = false;       // output was cut to the tool's cap (a marker says so)
  uint64_t original_bytes = 0;  // output size before truncation (0: same as output.size())

  // A failure the model reads: what went wrong and what to send instead.
  static ToolResult error(std::string message) {
    return ToolResult{.output = std::move(message), .is_error = true};
  }
};

struct ToolContext {
  std::string workspace;  // absolute, canonical path of the session's workspace root
  std::string session_id;
  std::string call_id;
  // Asks the call to end: tripped when its time-out passes, when its session
  // is stopped (Runtime::stop, a deadline) and when the runtime closes. A
  // tool that can take long polls stop.stop_requested() or registers a
  // std::stop_callback, and returns; a result it returns within the grace
  // after a time-out (docs/embedding.md) is recorded, marked timed out.
  std::stop_token stop;
  // When the call's time-out passes (steady clock).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// How long a call may go on after its time-out tripped its stop token
// before the session is told it was abandoned.
inline constexpr uint64_t kToolGraceMs = 2000;

using ToolFunction = std::function<ToolResult(const nlohmann::json& args, const ToolContext& context)>;

// What became of a call that a crash or a stop interrupted: its intent is in
// the log, its result is not. kRunAgain: running it again ends where running
// it once would have (it had no effect, or its effect makes a second run
// harmless); kDone: it took effect, and `result` is its outcome; kUnknown:
// there is no telling, and the model is told so.
struct ToolRecovery {
  enum class Verdict : uint8_t { kRunAgain, kDone, kUnknown };
  Verdict verdict = Verdict::kUnknown;
  ToolResult result;  // kDone
};
using RecoveryFunction = std::function<ToolRecovery(const nlohmann::json& args, const ToolContext& context)>;

struct ToolDefinition {
  ToolSpec spec;
  // May block (I/O, processes): each call runs on a thread of its own. A
  // non-blocking tool runs on its tool's worker actor, one call at a time:
  // quick, but one that overruns its time-out is abandoned with its worker
  // (later calls get a new one) and holds an actor thread until it returns.
  bool blocking = true;
  ToolFunction run;
  // How long a call may run before its stop token is tripped and, after the
  // grace, the session gets a timed-out result. 0: the config's
  // tools.timeout_ms.
  std::chrono::milliseconds timeout{0};
  // Asked by a resume about an interrupted call of a tool that is not
  // idempotent (spec.idempotent: always kRunAgain). Null: kUnknown. It must
  // only look (the workspace, what the call was to do), never act.
  RecoveryFunction recover;
};

}  // namespace carapace
