// SessionOptions: what Runtime::start_session is given (runtime/runtime.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/messages.h"
#include "events/events.h"

namespace carapace {

struct SessionOptions {
  std::string id;            // empty: generated
  std::string task;          // the first user message
  std::string model;         // empty: the configured model
  uint64_t max_turns = 0;    // 0: the configured value
  std::string workspace;     // empty: the configured one, else HOME/workspaces/ID (made owner-only)
  std::string instructions;  // appended to the configured session instructions
  // Messages sent one after the other, each once the session has nothing
  // left to do (`run --then`). They are recorded with the task, durably,
  // before the first turn: a crash at any point loses none.
  std::vector<std::string> follow_ups;
  // The model, turn budget, workspace and instructions are recorded in
  // session.started: resumes and forks of the session keep them.
  // Called for every event the session appends, and for every streamed
  // delta, from the start (subscribed before the session runs). Called on an
  // actor thread: keep them quick.
  std::function<void(const Event&)> on_event;
  std::function<void(const StreamDelta&)> on_delta;
};

}  // namespace carapace
