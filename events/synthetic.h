// SyntheticSession: a realistic, seeded agent session made up for tests and
// benchmarks (`carapace log synth`). Not a runtime: no model, no tools.
//
// It yields the session step by step, as the runtime would write it: a task,
// then turns of prompt assembly, model calls (with an occasional rate-limit
// failure and a recorded retry delay), tool calls with hook decisions and
// results of realistic sizes, context trimming once the conversation passes
// its budget, and a final answer. The same options give the same events.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "events/events.h"

namespace carapace {

struct SyntheticOptions {
  uint64_t turns = 10;
  uint32_t tool_calls_per_turn = 2;
  uint64_t seed = 1;
  // Oldest turns leave the context once it passes this many characters, as a
  // model's context window forces (0: never trim).
  uint64_t context_budget_chars = 400'000;
  // Share of turns whose first model call fails with a 429 and is retried.
  double failure_rate = 0.1;
  // Typical size of a tool's output.
  uint32_t tool_output_bytes = 600;
};

// The events of one atomic write. `checkpoint` means the step ends a turn (or
// opens the session) and is written with a turn.committed, durably.
struct SyntheticStep {
  std::vector<EventBody> events;
  bool checkpoint = false;
};

class SyntheticSession {
 public:
  explicit SyntheticSession(SyntheticOptions options);

  // Fills *step with the next step; false once the session has completed.
  bool next(SyntheticStep* step);

  const SyntheticOptions& options() const { return options_; }

 private:
  enum class Phase { kStart, kOpenTurn, kCallModel, kRunTools, kCommit, kFinish, kDone };

  // The messages one turn added to the context (the first group is the task).
  struct ContextGroup {
    uint64_t messages = 0;
    uint64_t chars = 0;
  };

  uint64_t rand(uint64_t bound);
  std::string words(size_t approx_chars);
  ToolCall make_call();
  ToolCompleted run_call(const ToolCall& call);
  void add_message(uint64_t chars);
  uint64_t context_messages() const;
  void step_start(SyntheticStep* step);
  void step_open_turn(SyntheticStep* step);
  void step_call_model(SyntheticStep* step);
  void step_run_tool(SyntheticStep* step);
  void step_commit(SyntheticStep* step);

  SyntheticOptions options_;
  std::mt19937_64 rng_;
  Phase phase_ = Phase::kStart;
  uint64_t turn_ = 0;
  uint32_t attempt_ = 0;
  std::vector<ToolCall> calls_;
  size_t call_index_ = 0;
  bool call_requested_ = false;
  uint64_t call_counter_ = 0;
  std::deque<ContextGroup> context_;
  uint64_t context_chars_ = 0;
};

}  // namespace carapace
