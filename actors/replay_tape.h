// ReplayTape: a recorded session's events, read back as the answers its
// provider, tools and command hooks gave, for a replay (replay/replayer.h)
// that re-runs the session's loop with no model, no tool process and no
// side effect.
//
// A faithful replay writes the recorded events again, seq for seq. So the
// answer to what the replay asks next is found right after the last seq it
// has written (`written()`), before the next crash boundary (a recorded
// session.resumed or resume roll-back: what was asked before it was lost
// with the process):
//   a provider attempt (turn, attempt)  the first llm.responded or llm.failed
//                                       for it, with the provider faults
//                                       recorded before it;
//   a tool call (call id)               the first tool.completed for it,
//                                       with the tool faults before it;
//   a command hook (event, name, call)  its hook.decided in the batch of
//                                       decisions that follows.
// What is not found is answered so that the replay's next event differs
// from the recorded one and the divergence is reported there.
//
// Pure: no I/O, no actors. Thread-safe once built (written() must be).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/hook/hooks.h"
#include "actors/messages.h"

namespace carapace {

// The reason a replay's refused provider attempt or tool call gives: it
// names what the recording lacks.
inline constexpr const char* kReplayNoRecord = "replay: nothing recorded for ";

class ReplayTape {
 public:
  // `recorded[i]` holds seq i + 1. `written` returns the replay's last seq.
  ReplayTape(std::vector<Event> recorded, std::function<uint64_t()> written);

  const std::vector<Event>& recorded() const { return recorded_; }

  // The answer to provider attempt `request` (its turn and attempt).
  ProviderReply provider_reply(const ProviderRequest& request) const;

  // The outcome of attempt `attempt` of tool call `call`: a node lost with
  // it when a later attempt of the call was recorded, else its result.
  ToolOutcome tool_outcome(const ToolCall& call, uint32_t attempt = 1) const;

  // Where the call's next attempt was recorded to run (its next
  // tool.requested's node), or the refusal recorded instead.
  Status tool_node(const std::string& call_id, std::string* node) const;

  // The recorded decision of command hook `hook_name` at `event` (for tool
  // call `tool_call_id`, "" for other events), and the faults injected into
  // it; nullopt if none is recorded.
  struct HookRecord {
    std::optional<HookDecision> decision;  // else it failed:
    std::optional<HookFailure> failure;
    std::vector<FaultNote> faults;
  };
  std::optional<HookRecord> hook_record(HookEvent event, const std::string& hook_name,
                                        const std::string& tool_call_id) const;

  // Whether recorded event `e` is where a run ended and was resumed: the
  // session.stopped of a stopped run, a session.resumed, or the roll-back a
  // turn-mode resume writes before it.
  static bool is_resume_boundary(const Event& e);

 private:
  // The recorded events after the replay's last one, up to the next resume boundary.
  std::span<const Event> ahead() const;

  std::vector<Event> recorded_;
  std::function<uint64_t()> written_;
  std::vector<size_t> boundary_;  // per index: the first resume boundary at or after it (or the end)
};

}  // namespace carapace
