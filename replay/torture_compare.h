// What the torture runner compares between a run that crashed and resumed and
// the crash-free run of the same scenario (replay/torture.h): the events that
// make the conversation and its outcome, and the workspace left behind.
//
// A resumed run has events a crash-free one does not: session.resumed,
// turn.rolled_back and the events it discards, requests a crash lost,
// retries, follow-ups recorded again. The conversation leaves those out: the
// user messages sent, the model's answers, hook decisions, tool calls and
// results, context trims, checkpoints (their turn) and the session's end.
// The faults a plan injected are compared apart (injected_faults: a turn
// rolled back takes its fault.injected out of the conversation, not out of
// what happened). The first pair that differs is named by seq,
// type and field, with both values, as replay names a divergence
// (replay/event_diff.h), with a line on what such a difference usually means.
// Pure but for the workspace walk.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "events/events.h"

namespace carapace {

struct RunDifference {
  // "event": the conversations part at an event; "length": one ends before
  // the other; "workspace": the conversations agree, the files do not.
  std::string kind;
  uint64_t seq = 0;            // the event of this run (0: none)
  uint64_t reference_seq = 0;  // the crash-free run's (0: none)
  std::string type;            // the event type, or "type" when the types differ
  std::string field;           // the first differing field; for a workspace, the path
  std::string expected;        // the crash-free run's value (JSON, cut), or the file's summary
  std::string actual;          // this run's
  std::string tool;            // the tool of a differing tool.completed / tool.requested
  std::string meaning;         // what such a difference usually means, one sentence

  // "seq 14 tool.completed (crash-free run: seq 12): output is "2\n", not "1\n"".
  std::string describe() const;
};

// The events of `events` that make the conversation (above), in order; those
// a turn.rolled_back discarded are left out.
std::vector<const Event*> conversation_events(const std::vector<Event>& events);

// The faults a fault plan injected, in order: "point action detail".
std::vector<std::string> injected_faults(const std::vector<Event>& events);

// The first place where `run` (resumed in `mode`: step or turn) parts from
// `reference`; nullopt if their conversations are the same.
std::optional<RunDifference> first_difference(const std::vector<Event>& reference, const std::vector<Event>& run,
                                              const std::string& mode);

// The first path (sorted) at which two workspace trees differ: present in one
// only, of another kind, or with other bytes (the first differing line of a
// text file named). Symbolic links are compared by target, never followed.
std::optional<RunDifference> first_workspace_difference(const std::string& reference_dir, const std::string& run_dir,
                                                        const std::string& mode);

}  // namespace carapace
