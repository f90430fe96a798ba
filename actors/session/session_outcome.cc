#include "actors/session/session_outcome.h"

namespace carapace {

SessionOutcome outcome_of(const std::string& id, const SessionState& s, uint64_t budget) {
  SessionOutcome o{.session_id = id,
                   .status = s.status,
                   .final_answer = s.final_answer,
                   .stop_reason = s.stop_reason,
                   .error = s.status == SessionStatus::kFailed ? s.last_error : "",
                   .turns = s.committed_turn,
                   .tokens = s.tokens,
                   .cost_usd = s.cost_usd,
                   .last_seq = s.last_seq};
  if (budget != 0 && s.status == SessionStatus::kRunning && s.committed_turn >= budget) {
    o.final_answer.clear();
    o.stop_reason = "max_turns";
    o.error = "it used all " + std::to_string(budget) +
              " turns of its budget without a final answer; resume it with a larger max_turns to go on";
  }
  if (s.status == SessionStatus::kRunning && waiting_approval(s) != nullptr) {
    // Parked: it goes on once a person decides (docs/approvals.md).
    o.final_answer.clear();
    o.stop_reason = "waiting";
    o.error.clear();
    for (const auto& a : s.approvals) {
      if (!a.decided) o.waiting.push_back(a.request);
    }
  }
  return o;
}

}  // namespace carapace
