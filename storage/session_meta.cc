#include "storage/session_meta.h"

namespace carapace {

SessionMeta meta_from_state(std::string_view id, const SessionState& state, int64_t now_us,
                            const SessionMeta* previous) {
  SessionMeta m;
  m.id = std::string(id);
  m.created_us = previous != nullptr && previous->created_us != 0 ? previous->created_us : now_us;
  m.updated_us = now_us;
  m.agent_id = state.agent_id;
  m.provider = state.provider;
  m.model = state.model;
  m.parent_session = state.parent_session;
  m.parent_turn = state.parent_turn;
  m.status = state.status;
  m.committed_turn = state.committed_turn;
  m.committed_seq = state.committed_seq;
  if (previous != nullptr) {
    m.verified_seq = previous->verified_seq;
    m.configured_seq = previous->configured_seq;
    m.imported_seq = previous->imported_seq;
  }
  return m;
}

uint64_t last_configured_seq(std::span<const Event> events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (std::holds_alternative<SessionConfigured>(it->body)) return it->seq;
  }
  return 0;
}

}  // namespace carapace
