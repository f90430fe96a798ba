// The fold: SessionState = fold(apply, initial, events).
//
// apply() is pure: it reads the state and one event, changes the state, and
// consults nothing else (no I/O, no clock, no randomness). Everything the
// session observed arrives inside events, which is what makes recovery and
// replay exact. apply() also enforces the log's rules (turns in order, a tool
// result only for a call the model made, no checkpoint with calls pending) and
// reports a broken rule as Status::inconsistent, leaving the state unchanged.
//
// Folder folds a stored event stream: it checks seq contiguity, holds the
// events after the last checkpoint until the next turn.committed (checking its
// state hash) or turn.rolled_back (which discards them), and skips unknown
// types. A checkpoint whose hash is of a version this build does not compute
// is refused (unsupported), never passed unchecked. Neither is thread-safe; each is cheap to create.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "events/events.h"
#include "events/session_state.h"

namespace carapace {

Status apply(SessionState& state, const Event& event);

// The same, for an event the caller gives up: its strings move into the state.
// On error the event may have been partly moved from.
Status apply(SessionState& state, Event&& event);

class Folder {
 public:
  struct Options {
    // Re-check every turn.committed's state hash (verify and recovery do).
    bool verify_hashes = true;
  };

  Folder();
  explicit Folder(Options options);
  // Continues from a snapshot: `start` is the state at one of its checkpoints.
  Folder(SessionState start, Options options);

  // Folds the next event; its seq must follow the previous one. After an
  // error the folder's state is unspecified and it must not be fed further.
  Status add(Event&& event);
  Status add(const Event& event) {
    staging() = event;
    return add_staged();
  }

  // The same without moving the event: decode the next event into
  // staging(), then fold it with add_staged(). The slot is the folder's and
  // is reused; anything it held is overwritten by the decode.
  Event& staging();
  Status add_staged();

  // The state as of the last checkpoint.
  const SessionState& committed() const { return committed_; }
  // The same, moved out: the folder is spent.
  SessionState take_committed() && { return std::move(committed_); }

  // Events after the last checkpoint that no checkpoint or rollback covers yet
  // (an interrupted turn, when the log ends here).
  std::span<const Event> uncommitted() const { return {uncommitted_.data(), uncommitted_count_}; }

  // committed() with uncommitted() applied: where the session really stopped.
  Status state_with_uncommitted(SessionState* out) const;

  uint64_t last_seq() const { return last_seq_; }
  uint64_t events_folded() const { return events_folded_; }
  uint64_t checkpoints_verified() const { return checkpoints_verified_; }
  uint64_t unknown_skipped() const { return unknown_skipped_; }

 private:
  Status commit(const Event& event);
  Status roll_back(const Event& event);

  Options options_;
  SessionState committed_;
  // [0, uncommitted_count_) are the events after the last checkpoint; the
  // slots past them are kept for reuse (no event is moved or freed per fold).
  std::vector<Event> uncommitted_;
  size_t uncommitted_count_ = 0;
  uint64_t last_seq_ = 0;
  uint64_t events_folded_ = 0;
  uint64_t checkpoints_verified_ = 0;
  uint64_t unknown_skipped_ = 0;
};

// The payload fields of an event type that the fold (apply() and Folder)
// never reads, as a tag mask for decode_record: recovery decodes without
// them. An event decoded so holds defaults there, so it is for folding only
// (recovery re-reads the events it hands on in full). A field of this mask
// that apply() started to read would make a fold from the log differ from one
// of the events as written: tests/events/fold_test.cc changes every such
// field in a session that holds every type with a mask and checks the state.
uint64_t fold_unread_tags(uint16_t type);

// Folds a complete in-memory event sequence from the empty state, with the
// Folder's rules (rollbacks honoured, checkpoint hashes checked); the result
// includes any events after the last checkpoint.
Status fold(const std::vector<Event>& events, SessionState* out);

}  // namespace carapace
