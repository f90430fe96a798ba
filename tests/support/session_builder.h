// SessionBuilder: writes well-formed event sequences for tests, numbering
// seqs and computing checkpoint hashes the way the journal does.
#pragma once

#include <string>
#include <vector>

#include "events/events.h"
#include "events/fold.h"

namespace carapace::testing {

class SessionBuilder {
 public:
  SessionBuilder& add(EventBody body) {
    Event e{next_seq_++, 1'700'000'000'000'000 + static_cast<int64_t>(next_seq_) * 1000, std::move(body)};
    Status s = apply(state_, e);
    if (!s.ok()) throw std::runtime_error("SessionBuilder: " + s.to_string());
    events_.push_back(std::move(e));
    return *this;
  }

  // Appends a turn.committed with the current state's hash.
  SessionBuilder& commit() {
    return add(TurnCommitted{.turn = state_.turn,
                             .last_seq = next_seq_ - 1,
                             .state_hash = state_hash(state_),
                             .hash_version = kStateHashVersion});
  }

  SessionBuilder& start(std::string task = "fix the bug") {
    add(SessionStarted{.agent_id = "test", .provider = "scripted", .model = "m1", .rng_seed = 7});
    add(UserMessage{std::move(task)});
    return commit();
  }

  // A turn with one model call asking for `tools` (each completes), ending in a checkpoint.
  SessionBuilder& turn(std::vector<std::string> tools = {"shell"}) {
    uint64_t t = state_.turn + 1;
    add(TurnStarted{t});
    add(LlmRequested{.turn = t, .attempt = 1, .model = "m1"});
    LlmResponded r{
        .turn = t, .attempt = 1, .text = "working on it", .usage = {100, 20, 50, 0}, .cost_usd = 0.01};
    for (size_t i = 0; i < tools.size(); ++i) {
      r.tool_calls.push_back({"c" + std::to_string(t) + "_" + std::to_string(i), tools[i], JsonText{"{}"}});
    }
    std::vector<ToolCall> calls = r.tool_calls;
    add(std::move(r));
    for (const auto& c : calls) {
      add(ToolRequested{c.id, c.name, c.args});
      add(ToolCompleted{.call_id = c.id, .tool = c.name, .output = "output of " + c.id});
    }
    return commit();
  }

  const std::vector<Event>& events() const { return events_; }
  const SessionState& state() const { return state_; }
  uint64_t next_seq() const { return next_seq_; }

 private:
  std::vector<Event> events_;
  SessionState state_;
  uint64_t next_seq_ = 1;
};

}  // namespace carapace::testing
