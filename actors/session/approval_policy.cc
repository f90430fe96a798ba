#include "actors/session/approval_policy.h"

#include <cctype>

#include "base/duration.h"

namespace carapace {

std::string policy_reason(const ApprovalPolicy& policy, const std::string& tool, bool idempotent) {
  if (!policy.tools.empty() && policy.tools.search(tool)) {
    return "the approvals policy asks before " + tool + " runs (tools matches \"" + policy.tools.text() + "\")";
  }
  if (policy.non_idempotent && !idempotent) {
    return "the approvals policy asks before a call with side effects runs (" + tool + " is not idempotent)";
  }
  return "";
}

bool parse_expiry(const std::string& text, uint64_t* ms) {
  uint64_t parsed = 0;
  if (!parse_duration_ms(text, &parsed) || parsed == 0) return false;
  *ms = parsed;
  return true;
}

}  // namespace carapace
