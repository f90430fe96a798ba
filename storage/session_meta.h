// SessionMeta: a session's entry in the session index (the `sessions` column
// family), and CheckpointEntry, an entry of the checkpoint index.
//
// Both are derived from the events and written in the same atomic batch as the
// checkpoint they describe, so they are never ahead of or behind the log's
// durable state; `carapace verify` re-derives and compares them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <tuple>

#include "base/digest.h"
#include "base/status.h"
#include "events/codec.h"
#include "events/events.h"
#include "events/session_state.h"

namespace carapace {

struct SessionMeta {
  std::string id;  // the key; not part of the stored value
  int64_t created_us = 0;
  int64_t updated_us = 0;  // time of the last checkpoint
  std::string agent_id;
  std::string provider;
  std::string model;
  std::string parent_session;
  uint64_t parent_turn = 0;
  SessionStatus status = SessionStatus::kNew;
  uint64_t committed_turn = 0;
  uint64_t committed_seq = 0;  // seq of the last turn.committed
  // Records 1..verified_seq had their checksums and seq contiguity checked
  // (by a resume); the next resume checks only what came after.
  uint64_t verified_seq = 0;
  // seq of the session's latest session.configured: how it runs now, so
  // that a resume, fork or replay reads one event instead of the history.
  // Written with that event; 0 in sessions older than this field (their
  // opening has the only one, if any).
  uint64_t configured_seq = 0;
  // Events 1..imported_seq came from a bundle (`carapace bundle import`):
  // their session.configured is a record of how the session ran elsewhere,
  // not a configuration this home runs (runtime/session_setup.h,
  // bundle_configuration). 0: written here. Kept by every later write.
  uint64_t imported_seq = 0;

  static constexpr auto fields() {
    using M = SessionMeta;
    return std::tuple{codec::Field{1, "created_us", &M::created_us},
                      codec::Field{2, "updated_us", &M::updated_us},
                      codec::Field{3, "agent_id", &M::agent_id},
                      codec::Field{4, "provider", &M::provider},
                      codec::Field{5, "model", &M::model},
                      codec::Field{6, "parent_session", &M::parent_session},
                      codec::Field{7, "parent_turn", &M::parent_turn},
                      codec::Field{8, "status", &M::status},
                      codec::Field{9, "committed_turn", &M::committed_turn},
                      codec::Field{10, "committed_seq", &M::committed_seq},
                      codec::Field{11, "verified_seq", &M::verified_seq},
                      codec::Field{12, "configured_seq", &M::configured_seq},
                      codec::Field{13, "imported_seq", &M::imported_seq}};
  }
  friend bool operator==(const SessionMeta&, const SessionMeta&) = default;
};

// The index entry of one turn.committed.
struct CheckpointEntry {
  uint64_t seq = 0;  // the key's seq; not part of the stored value
  uint64_t turn = 0;
  Digest128 state_hash;

  static constexpr auto fields() {
    using C = CheckpointEntry;
    return std::tuple{codec::Field{1, "turn", &C::turn}, codec::Field{2, "state_hash", &C::state_hash}};
  }
  friend bool operator==(const CheckpointEntry&, const CheckpointEntry&) = default;
};

// The index entry a checkpoint gives a session: identity from the state,
// progress from the checkpoint. `created_us`, `verified_seq`,
// `configured_seq` and `imported_seq` are kept from `previous` when set.
SessionMeta meta_from_state(std::string_view id, const SessionState& state, int64_t now_us,
                            const SessionMeta* previous);

// The seq of the last session.configured among `events` (0: none): the
// configured_seq of a session written whole (a fork, an import, a salvage).
uint64_t last_configured_seq(std::span<const Event> events);

}  // namespace carapace
