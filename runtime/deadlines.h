// Deadlines: the runs that must end when their time is up
// (SessionOptions::deadline). One thread waits for the earliest and calls
// `expire` (Runtime::stop) for each run whose time passed.
//
// Thread safety: every method may be called from any thread, expire's
// included; the destructor returns once no expire call runs or will.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace carapace {

class Deadlines {
 public:
  using Expire = std::function<void(const std::string& session, const std::string& reason)>;

  explicit Deadlines(Expire expire);
  ~Deadlines();
  Deadlines(const Deadlines&) = delete;
  Deadlines& operator=(const Deadlines&) = delete;

  // Session `session`'s run ends `after` from now (replacing a deadline it had).
  void arm(const std::string& session, std::chrono::milliseconds after);
  // It ended by itself: no expiry.
  void disarm(const std::string& session);

 private:
  struct Due {
    std::chrono::steady_clock::time_point at;
    std::chrono::milliseconds after;
  };
  void run();

  Expire expire_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Due> due_;
  bool quit_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace carapace
