// SessionOptions: what Runtime::start_session is given (runtime/runtime.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/messages.h"
#include "base/status.h"
#include "events/events.h"

namespace carapace {

// An approval request that waits (Runtime::list_approvals, Options::on_approval).
struct Approval {
  std::string session_id;
  uint64_t seq = 0;  // of its approval.requested
  ApprovalRequested request;
};

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
  // Called once, when the session's loop stops (what wait() would answer:
  // completed, failed, out of turns, or stopped by Runtime::stop), on an
  // actor thread or the one that called stop(): keep it quick, do not wait
  // for the runtime in it. Not called for a session still running when the
  // runtime closes (it is stopped there; resume it).
  std::function<void(const SessionOutcome&)> on_complete;
  // 0: none. Else the run is stopped (Runtime::stop, reason "its deadline
  // of N ms passed") if its loop has not stopped that long after the start;
  // a resume has its own (ResumeOptions::deadline). A limit on this run,
  // recorded only by the stop it causes.
  std::chrono::milliseconds deadline{0};
};

// What Runtime::list_sessions keeps.
struct SessionFilter {
  std::string status;    // "": any; else new, running, waiting, completed, failed, stopped or crashed
  int64_t since_us = 0;  // updated (or started) then or later
  size_t limit = 0;      // 0: all; else the newest N
};

// A session of the home, as `carapace sessions` shows it.
struct SessionSummary {
  std::string id;
  // completed, failed; for one that did not finish: running (its actor is
  // alive in this runtime), stopped (its last event is session.stopped:
  // Runtime::stop, a closed runtime, a stopped command), crashed (its
  // writer died: this runtime holds the home, so no other process writes
  // it); new when it has no event after its opening.
  std::string status;
  std::string stop_reason;  // stopped: the session.stopped reason ("max_turns": it used its turn budget)
  uint64_t turns = 0;     // committed
  uint64_t last_seq = 0;
  std::string provider;
  std::string model;
  std::string parent_session;  // set for a fork
  int64_t created_us = 0;
  int64_t updated_us = 0;  // the last checkpoint
};

// What Runtime::resume_unfinished did with one session.
struct ResumedSession {
  std::string id;
  std::string was;  // crashed or stopped
  Status status;    // of its resume_session
};

}  // namespace carapace
