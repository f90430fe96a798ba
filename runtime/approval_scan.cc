#include "runtime/approval_scan.h"

#include <algorithm>

#include "base/lib_log.h"
#include "storage/keys.h"

namespace carapace {

Status open_approvals(const EventLog& log, const std::string& id, std::vector<PendingApproval>* out) {
  out->clear();
  SessionMeta meta;
  CARAPACE_RETURN_IF_ERROR(log.get_meta(id, &meta));
  if (meta.status != SessionStatus::kRunning) return Status();
  std::vector<Event> events;
  CARAPACE_RETURN_IF_ERROR(log.read(id, meta.committed_seq + 1, UINT64_MAX, &events));
  for (const Event& e : events) note_approval(*out, e);
  return Status();
}

Status waiting_approvals(const EventLog& log, const std::string& id, std::vector<Approval>* out) {
  out->clear();
  std::vector<std::string> ids;
  if (!id.empty()) {
    CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
    uint64_t last = 0;
    CARAPACE_RETURN_IF_ERROR(log.last_seq(id, &last));
    if (last == 0) return Status::not_found("no session '" + id + "'");
    ids.push_back(id);
  } else {
    std::vector<SessionMeta> metas;
    std::vector<std::string> unreadable;
    CARAPACE_RETURN_IF_ERROR(log.list_sessions(&metas, &unreadable));
    for (const auto& m : metas) {
      if (m.status == SessionStatus::kRunning) ids.push_back(m.id);
    }
  }
  for (const auto& sid : ids) {
    std::vector<PendingApproval> approvals;
    if (Status s = open_approvals(log, sid, &approvals); !s.ok()) {
      lib_log().warn("session {}: its approval requests cannot be read: {}", sid, s.to_string());
      continue;
    }
    for (auto& a : approvals) {
      if (!a.decided) out->push_back(Approval{.session_id = sid, .seq = a.seq, .request = std::move(a.request)});
    }
  }
  std::stable_sort(out->begin(), out->end(), [](const Approval& a, const Approval& b) {
    return a.request.requested_at_us < b.request.requested_at_us;
  });
  return Status();
}

}  // namespace carapace
