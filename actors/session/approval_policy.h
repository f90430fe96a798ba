// The approvals policy: which tool calls wait for a person without any hook
// saying so (the config's "approvals" section, docs/approvals.md).
#pragma once

#include <cstdint>
#include <string>

#include "base/pattern.h"
#include "base/status.h"

namespace carapace {

struct ApprovalPolicy {
  Pattern tools;                // tools whose name it matches ask (RE2); empty: none by name
  bool non_idempotent = false;  // every tool not marked idempotent asks
  uint64_t expires_after_ms = 0;  // 0: a request never expires
  std::string on_expiry = "deny";  // deny or approve
  // ask_user questions expire after this too (0: never).
  bool active() const { return !tools.empty() || non_idempotent; }
};

// Why the policy asks before `tool` runs ("" when it does not).
std::string policy_reason(const ApprovalPolicy& policy, const std::string& tool, bool idempotent);

// "24h", "30m", "90s", "7d", "500ms", or a whole number of milliseconds, as
// milliseconds; false if it is none of these (or zero).
bool parse_expiry(const std::string& text, uint64_t* ms);

}  // namespace carapace
