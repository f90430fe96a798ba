// The torture runner: proves that sessions survive crashes at any point.
//
// Each iteration runs a scenario in a child `carapace` process with a crash
// planned at a random fault point and occurrence (drawn from a crash-free
// reference run's counts), resumes it in step or turn mode (the resumed
// process crashing again with some probability) until it completes, and then
// checks the invariants:
//   - no committed event lost: the records up to every checkpoint seen after a
//     crash are still there, byte for byte;
//   - verify passes: checksums, seqs contiguous, every checkpoint's hash equal
//     to a fresh fold's, indexes and snapshots agreeing;
//   - recovery from snapshots equals a fold from seq 1;
//   - every tool call in the folded state has its result;
//   - step mode: no completed call of a non-idempotent tool ran twice
//     (counted by a wrapper that records every real execution);
//   - the final conversation and outcome equal the crash-free run's, in turn
//     mode always, in step mode unless a call was interrupted (whose outcome
//     is then unknown by design).
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
  uint64_t iterations = 20;
  uint64_t seed = 1;
  std::string mode = "both";  // step, turn, or both (alternating)
  double resume_crash_probability = 0.3;
  uint32_t max_resumes = 30;
  bool keep_passing_homes = false;
};

struct TortureViolation {
  uint64_t iteration = 0;
  std::string mode;
  std::string home;
  std::string kind;
  std::string detail;
};

struct TortureIteration {
  uint64_t iteration = 0;
  std::string mode;
  uint32_t crashes = 0;
  uint32_t resumes = 0;
  bool interrupted_calls = false;  // step mode told the model a call's outcome was unknown
  std::vector<std::string> crash_points;
  std::vector<TortureViolation> violations;
};

struct TortureReport {
  uint64_t iterations = 0;
  uint64_t step_iterations = 0;
  uint64_t turn_iterations = 0;
  uint64_t crashes = 0;
  uint64_t resumes = 0;
  uint64_t completed = 0;
  uint64_t compared_with_reference = 0;
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
