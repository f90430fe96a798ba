// Retention: which provider bodies and which sessions' spans `carapace gc`
// removes. Pure: the caller gathers what the home holds and applies the plan.
//
// The policy has two limits. Age: a body whose latest reference (the newest
// event that names it) is older than max_age goes, and so do the spans of a
// session not updated within max_age. Size: while the bodies kept add up to
// more than max_body_bytes, the one referenced longest ago goes next (oldest
// first). A body no event references goes too: gc runs with the home's log
// held, so no writer can be about to reference it. Events are never pruned:
// the log is the record, and spans are rebuilt from it on demand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace carapace {

struct RetentionPolicy {
  int64_t max_age_us = 0;         // 0: no age limit
  uint64_t max_body_bytes = 0;    // 0: no size limit
};

struct StoredBody {
  std::string ref;
  uint64_t bytes = 0;
};

struct RetentionInputs {
  std::vector<StoredBody> bodies;
  std::map<std::string, int64_t> last_referenced_us;  // body ref -> time of the newest event naming it
  std::map<std::string, int64_t> session_updated_us;  // sessions with spans -> their last update
  int64_t now_us = 0;
};

struct RetentionPlan {
  std::vector<StoredBody> bodies;          // to remove: past the age limit or unreferenced, then oldest first
  uint64_t body_bytes_removed = 0;
  uint64_t body_bytes_kept = 0;
  uint64_t unreferenced = 0;               // of the bodies removed, those no event names
  std::vector<std::string> span_sessions;  // sessions whose spans go
};

RetentionPlan plan_retention(const RetentionPolicy& policy, const RetentionInputs& in);

}  // namespace carapace
