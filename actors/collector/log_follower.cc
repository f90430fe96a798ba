#include "actors/collector/log_follower.h"

#include <chrono>

#include "storage/event_log.h"
#include "storage/trace_store.h"

namespace carapace {
namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

LogFollower::~LogFollower() = default;

Status LogFollower::open(const std::string& home, std::unique_ptr<LogFollower>* out) {
  std::unique_ptr<LogFollower> f(new LogFollower());
  f->home_ = home;
  CARAPACE_RETURN_IF_ERROR(
      EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, &f->log_));
  CARAPACE_RETURN_IF_ERROR(TraceStore::open(home + "/traces", TraceStore::Mode::kWriter, &f->store_));
  std::vector<std::pair<std::string, TraceProgress>> progress;
  CARAPACE_RETURN_IF_ERROR(f->store_->all_progress(&progress));
  f->watch_ = std::make_unique<LogWatch>(f->log_.get(), home + "/log");
  for (const auto& [id, p] : progress) f->watch_->seed(id, p.last_seq, p.crashed_after_seq);
  *out = std::move(f);
  return Status();
}

Status LogFollower::poll(FollowReport* report) {
  std::vector<WatchChange> changes;
  CARAPACE_RETURN_IF_ERROR(watch_->poll(&changes));
  std::vector<StoredSpan> spans;
  std::vector<std::pair<std::string, TraceProgress>> progress;
  for (auto& change : changes) {
    const std::string& id = change.session;
    report->events += change.events.size();
    if (change.newly_crashed) report->crashed.emplace_back(id, change.crashed_after);
    for (auto& sp : change.changed) {
      StoredSpan stored{.session = id, .span_id = sp.span_id, .open_seq = sp.open_seq, .start_us = sp.start_us};
      if (sp.kind == kSpanLlm) stored.model = sp.attrs.value("model", std::string());
      if (sp.kind == kSpanTool) stored.tool = sp.attrs.value("tool", std::string());
      stored.value = span_to_json(sp).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      spans.push_back(std::move(stored));
      if (report_finished_ && !sp.open()) report->finished[id].push_back(std::move(sp));
    }
    if (report_finished_ && report->finished.count(id) && change.root) report->roots[id] = *change.root;
    TraceProgress p{.last_seq = change.folded_seq, .crashed_after_seq = change.crashed_after, .updated_us = now_us()};
    TraceProgress before;
    if (store_->progress(id, &before).ok()) p.dropped = before.dropped;
    progress.emplace_back(id, p);
  }
  if (spans.empty() && progress.empty()) return Status();
  report->spans += spans.size();
  return store_->write(spans, progress);
}

}  // namespace carapace
