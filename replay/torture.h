// The torture runner: proves that sessions survive crashes at any point.
//
// Each iteration runs a scenario in a child `carapace` process (its task,
// then each of the scenario's user_messages once the session stops), kills
// it — at a random fault point and occurrence (drawn from a crash-free
// reference run's counts), or with a SIGKILL from the parent after a random
// delay — and resumes it in step or turn mode (the resumed process crashing
// again with some probability) until every message has been answered. With
// `power_loss`, the children write the log over a file system that records
// what was synced, and after each kill everything unsynced is taken away
// (sometimes tearing the last write), as a machine losing power would.
//
// The invariants are checked against what the children reported before they
// died, not against the log alone:
//   - every checkpoint a child was told is durable is in the log, at its seq,
//     for its turn; the records up to it never change afterwards;
//   - every user message a child was told is durable is in the log;
//   - verify passes: checksums, seqs contiguous, every checkpoint's hash
//     equal to a fresh fold's, indexes and snapshots agreeing;
//   - recovery from a snapshot equals a fold from seq 1 (the torture config
//     snapshots every 2 turns, so snapshots are exercised);
//   - step mode: no call of a tool whose spec is not idempotent ran twice
//     (counted by a wrapper that records every real execution);
//   - approvals: one approval.decided per request; step mode: a denied call
//     never ran;
//   - every call requested in a turn that committed has exactly one
//     tool.completed (a call lost with its tools node too);
//   - the final conversation and outcome, and the workspace left behind,
//     equal the crash-free run's, in turn mode always, in step mode unless a
//     call was interrupted (whose outcome is then unknown by design), and
//     when the user's fault plan fired the same faults (its occurrences are
//     counted per process). A difference is named by its first differing
//     event or file (replay/torture_compare.h); every iteration counts as
//     compared, skipped (with why) or stopped short by another violation.
//
// The agent is the user's when they say so: their configuration file, a
// copy of their workspace per iteration, their fault plan merged with the
// runner's crash (its own rules fire in every child, run and resume). Else
// the runner's own: a config with two command hooks and snapshots every two
// turns, a workspace holding input.txt.
// Thread-compatible: one runner per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace carapace {

struct TortureOptions {
  std::string carapace;  // the carapace binary the children run
  std::string scenario;
  std::string work_dir;  // a home per iteration goes under it
  std::string task = "Work through the scenario.";
  // The user's agent: a configuration file (empty: the runner's own), a
  // workspace directory copied fresh into every iteration (empty: input.txt
  // alone), a fault plan whose rules apply in every child besides the crash
  // (empty: none; a crash rule in it is refused: the runner crashes).
  std::string config;
  std::string workspace;
  std::string faults;
  uint64_t iterations = 20;
  uint64_t seed = 1;
  std::string mode = "both";  // step, turn, or both (alternating)
  double resume_crash_probability = 0.3;
  // Share of crashes made by a SIGKILL after a random delay instead of at a fault point.
  double random_moment_probability = 0.5;
  // Fault points to crash at (names); empty: all of them.
  std::vector<std::string> points;
  bool power_loss = false;
  // A deliberate defect passed to the children (--test-mutation), to prove
  // that the invariants catch it.
  std::string mutation;
  uint32_t max_resumes = 30;
  // Approvals (docs/approvals.md): the runner's own config asks before
  // every call that is not idempotent. With any config, a child that parks
  // (exit 3) is answered by the runner after a random delay — every third
  // call asked about is denied, the same calls in every run, so that the
  // crash-free run decides alike — in a child of its own, which it may
  // crash too.
  // Checked: one approval.decided per request, a denied call never ran
  // (step mode), the approved ones at most once.
  bool approvals = false;
  // Tools nodes (docs/scale-out.md): with N > 0, every iteration (and the
  // crash-free run) starts N `carapace node` processes with mutual TLS and
  // a shared workspace root, and the runner's own config routes every
  // built-in tool to them; during an iteration one node at a time is
  // killed (and restarted), frozen or cut off (its proxy black-holes the
  // links) at random moments while the host is
  // crashed as always. Checked besides: no call of a tool that is not
  // idempotent ran twice on any node or the host (step mode), and every
  // call has exactly one outcome. Needs the runner's own config.
  uint32_t nodes = 0;
  // With nodes: false keeps them up (no kills, freezes or partitions), so that only the
  // host's crashes test them (the node mutation check).
  bool node_chaos = true;
  bool keep_passing_homes = false;
};

struct TortureViolation {
  uint64_t iteration = 0;
  std::string mode;
  std::string home;
  std::string kind;
  std::string detail;
  std::string meaning;            // what such a violation usually means ("" if nothing to add)
  std::vector<std::string> look;  // commands that show it
};

struct TortureIteration {
  uint64_t iteration = 0;
  std::string mode;
  uint32_t crashes = 0;
  uint32_t resumes = 0;
  bool interrupted_calls = false;  // step mode told the model a call's outcome was unknown
  std::vector<std::string> crash_points;  // fault point names, or "random moment"
  // The final state against the crash-free run's: "equal", "differs",
  // "skipped" (skip_reason says why), or "" when a violation ended the
  // iteration before it could be compared.
  std::string comparison;
  std::string skip_reason;
  std::vector<TortureViolation> violations;
};

struct TortureReport {
  uint64_t iterations = 0;
  uint64_t step_iterations = 0;
  uint64_t turn_iterations = 0;
  uint64_t crashes = 0;
  uint64_t resumes = 0;
  uint64_t power_losses = 0;
  uint64_t bytes_lost = 0;   // unsynced bytes the power losses took away
  uint64_t torn_writes = 0;
  uint64_t checkpoints_acknowledged = 0;  // checked to be intact after crashes
  uint64_t messages_acknowledged = 0;
  uint64_t snapshots_used = 0;  // recoveries that started from a snapshot
  uint64_t completed = 0;
  uint64_t approvals_requested = 0;  // approval.requested in the final logs
  uint64_t approvals_answered = 0;   // children the runner ran to answer one
  uint64_t node_kills = 0;           // --nodes: tools nodes killed (and restarted)
  uint64_t node_freezes = 0;         // and frozen for a while
  uint64_t node_partitions = 0;      // and cut off for a while (their links black-holed)
  uint64_t calls_on_nodes = 0;       // tool.completed from a node, in the final logs
  uint64_t calls_lost_with_a_node = 0;  // of them: interrupted, refused or run again because a node was lost
  uint64_t compared_with_reference = 0;
  uint64_t equal_to_reference = 0;
  std::map<std::string, uint64_t> skipped_by_reason;  // iterations not compared, and why
  uint64_t not_reached = 0;  // iterations a violation ended before the comparison
  std::string reference_home;  // the crash-free run's home (its workspace in ws/)
  std::map<std::string, uint64_t> crashes_by_point;
  std::map<std::string, uint64_t> violations_by_kind;
  std::vector<TortureViolation> violations;
  double seconds = 0;
};

// Runs the torture; `progress`, if set, hears each finished iteration. A
// Status error means the runner itself could not work (no binary, a bad
// scenario, the reference run failing); violations go into the report.
Status run_torture(const TortureOptions& options, TortureReport* report,
                   const std::function<void(const TortureIteration&, const TortureReport&)>& progress = {});

}  // namespace carapace
