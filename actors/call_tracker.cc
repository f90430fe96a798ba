#include "actors/call_tracker.h"

namespace carapace {

void CallTracker::add(const std::string& session, const std::string& call,
                      std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = calls_.try_emplace({session, call});
  it->second.deadline = deadline;
  if (stopping_) it->second.stop.request_stop();
}

void CallTracker::remove(const std::string& session, const std::string& call) {
  std::lock_guard lock(mu_);
  calls_.erase({session, call});
}

std::stop_token CallTracker::token(const std::string& session, const std::string& call) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find({session, call});
  return it == calls_.end() ? std::stop_token() : it->second.stop.get_token();
}

std::chrono::steady_clock::time_point CallTracker::deadline(const std::string& session,
                                                            const std::string& call) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find({session, call});
  return it == calls_.end() ? std::chrono::steady_clock::time_point::max() : it->second.deadline;
}

void CallTracker::stop(const std::string& session, const std::string& call) {
  std::lock_guard lock(mu_);
  auto it = calls_.find({session, call});
  if (it != calls_.end()) it->second.stop.request_stop();
}

void CallTracker::stop_session(const std::string& session) {
  std::lock_guard lock(mu_);
  for (auto it = calls_.lower_bound({session, ""}); it != calls_.end() && it->first.first == session; ++it) {
    it->second.stop.request_stop();
  }
}

void CallTracker::stop_all() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  for (auto& [key, c] : calls_) c.stop.request_stop();
}

CallTracker::Running::Running(CallTracker* tracker) : tracker_(tracker) {
  if (tracker_ == nullptr) return;
  std::lock_guard lock(tracker_->mu_);
  ++tracker_->running_;
}

CallTracker::Running::~Running() {
  if (tracker_ == nullptr) return;
  std::lock_guard lock(tracker_->mu_);
  if (--tracker_->running_ == 0) tracker_->idle_.notify_all();
}

size_t CallTracker::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

bool CallTracker::wait_idle(std::chrono::milliseconds bound) {
  std::unique_lock lock(mu_);
  return idle_.wait_for(lock, bound, [this] { return running_ == 0; });
}

}  // namespace carapace
