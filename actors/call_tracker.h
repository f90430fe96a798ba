// CallTracker: the C++ tool calls and hooks a runtime has running on its
// threads — to ask a call to stop (its ToolContext's stop token) and to know,
// when the runtime closes, whether anything still runs.
//
// A call is registered when it is dispatched (add) and its token can be
// tripped from then on, also before it starts; the running count covers only
// the time a function is actually inside user code (a Running scope).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <utility>

namespace carapace {

class CallTracker {
 public:
  // Registers call `call` of `session`, whose time-out passes at
  // `deadline`; its token is stopped at once if stop_all() came before.
  void add(const std::string& session, const std::string& call,
           std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  void remove(const std::string& session, const std::string& call);
  // The call's token; a token that never stops for a call not added.
  std::stop_token token(const std::string& session, const std::string& call) const;
  // The call's deadline as added; max() for a call not added.
  std::chrono::steady_clock::time_point deadline(const std::string& session, const std::string& call) const;

  void stop(const std::string& session, const std::string& call);
  void stop_session(const std::string& session);
  // Every call's, and every call added later.
  void stop_all();

  // Counts user code running while it lives.
  class Running {
   public:
    explicit Running(CallTracker* tracker);
    ~Running();
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;

   private:
    CallTracker* tracker_;
  };

  size_t running() const;
  // Waits until no user code runs or `bound` passes; true if none runs.
  bool wait_idle(std::chrono::milliseconds bound);

 private:
  mutable std::mutex mu_;
  std::condition_variable idle_;
  struct Call {
    std::stop_source stop;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<std::pair<std::string, std::string>, Call> calls_;
  bool stopping_ = false;
  size_t running_ = 0;
};

}  // namespace carapace
