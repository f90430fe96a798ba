#include "events/session_state.h"

namespace carapace {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
  }
  return "unknown";
}

std::string_view status_name(SessionStatus status) {
  switch (status) {
    case SessionStatus::kNew:
      return "new";
    case SessionStatus::kRunning:
      return "running";
    case SessionStatus::kCompleted:
      return "completed";
    case SessionStatus::kFailed:
      return "failed";
  }
  return "unknown";
}

Digest128 message_digest(const Message& message) {
  // A reused buffer: this runs once per message on the fold's hot path.
  thread_local codec::Buffer buffer;
  buffer.clear();
  codec::encode(buffer, message);
  return digest128(buffer.view());
}

Digest128 chain_digest(const Digest128& previous, const Digest128& message) {
  char bytes[32];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>(previous.hi >> (56 - 8 * i));
    bytes[8 + i] = static_cast<char>(previous.lo >> (56 - 8 * i));
    bytes[16 + i] = static_cast<char>(message.hi >> (56 - 8 * i));
    bytes[24 + i] = static_cast<char>(message.lo >> (56 - 8 * i));
  }
  return digest128(std::string_view(bytes, sizeof bytes));
}

void append_message(SessionState& state, Message message) {
  Digest128 m = message_digest(message);
  state.messages_digest = chain_digest(state.messages_digest, m);
  state.message_digests.push_back(m);
  state.messages.push_back(std::move(message));
}

void rechain_messages(SessionState& state) {
  Digest128 d;
  for (const auto& m : state.message_digests) d = chain_digest(d, m);
  state.messages_digest = d;
}

Digest128 digest_messages(const std::vector<Message>& messages) {
  Digest128 d;
  for (const auto& m : messages) d = chain_digest(d, message_digest(m));
  return d;
}

const PendingApproval* find_approval(const SessionState& state, const std::string& call_id) {
  for (const auto& a : state.approvals) {
    if (a.request.call_id == call_id) return &a;
  }
  return nullptr;
}

const PendingApproval* waiting_approval(const SessionState& state) {
  for (const auto& a : state.approvals) {
    if (!a.decided) return &a;
  }
  return nullptr;
}

Digest128 args_digest(const JsonText& args) { return digest128(args.text); }

bool note_approval(std::vector<PendingApproval>& approvals, const Event& e) {
  if (std::holds_alternative<TurnStarted>(e.body) || std::holds_alternative<TurnRolledBack>(e.body)) {
    approvals.clear();
    return true;
  }
  if (const auto* r = get_if<ApprovalRequested>(e)) {
    PendingApproval p{.request = *r, .seq = e.seq};
    for (auto& a : approvals) {
      if (a.request.call_id == r->call_id) {
        a = std::move(p);
        return true;
      }
    }
    approvals.push_back(std::move(p));
    return true;
  }
  if (const auto* d = get_if<ApprovalDecided>(e)) {
    for (auto& a : approvals) {
      if (a.request.call_id != d->call_id) continue;
      if (a.decided || d->args_digest != a.request.args_digest) return false;
      a.decided = true;
      a.decision = *d;
      a.decided_seq = e.seq;
      return true;
    }
    return false;
  }
  return true;
}

bool state_hash_version_known(uint32_t version) { return version >= 1 && version <= kStateHashVersion; }

Digest128 state_hash(const SessionState& state, uint32_t version) {
  thread_local codec::Buffer buffer;
  buffer.clear();
  // Version 1 knew the fields up to tag 41; version 2 added the progress of
  // the open turn, the stop reason, queued messages (tags 42 to 53).
  uint32_t max_tag = version == 1 ? 41 : UINT32_MAX;
  // messages_digest is itself a field, so the encoding already ends with it.
  codec::encode(buffer, state, SessionState::kMessagesTag, max_tag);
  return digest128(buffer.view());
}

std::string encode_state(const SessionState& state) {
  std::string out;
  codec::encode(out, state);
  return out;
}

Status decode_state(std::string_view bytes, SessionState* out) {
  SessionState state;
  if (!codec::decode(bytes, &state)) {
    return Status::corruption("snapshot of " + std::to_string(bytes.size()) + " bytes does not decode");
  }
  Digest128 stored = state.messages_digest;
  state.message_digests.reserve(state.messages.size());
  for (const auto& m : state.messages) state.message_digests.push_back(message_digest(m));
  rechain_messages(state);
  Digest128 recomputed = state.messages_digest;
  if (recomputed != stored) {
    return Status::corruption("snapshot messages digest " + stored.hex() + " does not match its " +
                              std::to_string(state.messages.size()) + " messages (" + recomputed.hex() + ")");
  }
  *out = std::move(state);
  return Status();
}

}  // namespace carapace
