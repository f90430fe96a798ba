#include "runtime/deadlines.h"

#include <algorithm>
#include <vector>

namespace carapace {

Deadlines::Deadlines(Expire expire) : expire_(std::move(expire)), thread_([this] { run(); }) {}

Deadlines::~Deadlines() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Deadlines::arm(const std::string& session, std::chrono::milliseconds after) {
  {
    std::lock_guard lock(mu_);
    due_[session] = Due{.at = std::chrono::steady_clock::now() + after, .after = after};
  }
  changed_.notify_all();
}

void Deadlines::disarm(const std::string& session) {
  std::lock_guard lock(mu_);
  due_.erase(session);
}

void Deadlines::run() {
  std::unique_lock lock(mu_);
  while (!quit_) {
    if (due_.empty()) {
      changed_.wait(lock);
      continue;
    }
    auto first = std::min_element(due_.begin(), due_.end(),
                                  [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
    if (std::chrono::steady_clock::now() < first->second.at) {
      changed_.wait_until(lock, first->second.at);
      continue;
    }
    const std::string session = first->first;
    const std::string reason = "its deadline of " + std::to_string(first->second.after.count()) + " ms passed";
    due_.erase(first);
    lock.unlock();
    expire_(session, reason);
    lock.lock();
  }
}

}  // namespace carapace
