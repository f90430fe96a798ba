#include "storage/retention.h"

#include <algorithm>

namespace carapace {

RetentionPlan plan_retention(const RetentionPolicy& policy, const RetentionInputs& in) {
  RetentionPlan plan;
  const int64_t cutoff = policy.max_age_us > 0 ? in.now_us - policy.max_age_us : INT64_MIN;
  struct Candidate {
    StoredBody body;
    int64_t last_us;
  };
  std::vector<Candidate> kept;
  for (const StoredBody& b : in.bodies) {
    auto it = in.last_referenced_us.find(b.ref);
    const bool referenced = it != in.last_referenced_us.end();
    const int64_t last = referenced ? it->second : INT64_MIN;
    if (!referenced || last < cutoff) {
      plan.unreferenced += referenced ? 0 : 1;
      plan.body_bytes_removed += b.bytes;
      plan.bodies.push_back(b);
    } else {
      kept.push_back(Candidate{b, last});
      plan.body_bytes_kept += b.bytes;
    }
  }
  // Oldest first: by the time of the newest reference, then by ref for a stable order.
  auto older = [](const Candidate& a, const Candidate& b) {
    return a.last_us != b.last_us ? a.last_us < b.last_us : a.body.ref < b.body.ref;
  };
  std::sort(kept.begin(), kept.end(), older);
  size_t next = 0;
  while (policy.max_body_bytes > 0 && plan.body_bytes_kept > policy.max_body_bytes && next < kept.size()) {
    const StoredBody& b = kept[next++].body;
    plan.body_bytes_kept -= b.bytes;
    plan.body_bytes_removed += b.bytes;
    plan.bodies.push_back(b);
  }
  if (policy.max_age_us > 0) {
    for (const auto& [session, updated] : in.session_updated_us) {
      if (updated < cutoff) plan.span_sessions.push_back(session);
    }
  }
  return plan;
}

}  // namespace carapace
