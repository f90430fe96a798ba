#include "actors/collector/log_follower.h"

#include <chrono>

#include "base/clock.h"
#include "storage/event_log.h"
#include "storage/trace_store.h"

namespace carapace {

LogFollower::~LogFollower() = default;

Status LogFollower::open(const std::string& home, std::unique_ptr<LogFollower>* out, bool share_store) {
  std::unique_ptr<LogFollower> f(new LogFollower());
  f->home_ = home;
  f->share_store_ = share_store;
  CARAPACE_RETURN_IF_ERROR(
      EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, &f->log_));
  Status opened = TraceStore::open(home + "/traces", TraceStore::Mode::kWriter, &f->store_);
  std::unique_ptr<TraceStore> reader;
  const TraceStore* progress_of = f->store_.get();
  if (opened.is_busy() && share_store) {
    // Held by another process: where it stands, read beside it.
    CARAPACE_RETURN_IF_ERROR(TraceStore::open(home + "/traces", TraceStore::Mode::kReader, &reader));
    progress_of = reader.get();
  } else {
    CARAPACE_RETURN_IF_ERROR(opened);
  }
  std::vector<std::pair<std::string, TraceProgress>> progress;
  CARAPACE_RETURN_IF_ERROR(progress_of->all_progress(&progress));
  f->watch_ = std::make_unique<LogWatch>(f->log_.get(), home + "/log");
  for (const auto& [id, p] : progress) f->watch_->seed(id, p.last_seq, p.crashed_after_seq);
  *out = std::move(f);
  return Status();
}

Status LogFollower::poll(FollowReport* report) {
  if (!store_ && share_store_) {
    // Free now? Then this process writes it from here on.
    Status opened = TraceStore::open(home_ + "/traces", TraceStore::Mode::kWriter, &store_);
    if (!opened.ok() && !opened.is_busy()) return opened;
  }
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
      stored.value = span_json_text(sp);
      spans.push_back(std::move(stored));
      if (report_finished_ && !sp.open()) report->finished[id].push_back(std::move(sp));
    }
    if (report_finished_ && report->finished.count(id) && change.root) report->roots[id] = *change.root;
    TraceProgress p{.last_seq = change.folded_seq, .crashed_after_seq = change.crashed_after, .updated_us = now_us()};
    TraceProgress before;
    if (store_ && store_->progress(id, &before).ok()) p.dropped = before.dropped;
    progress.emplace_back(id, p);
  }
  if (spans.empty() && progress.empty()) return Status();
  if (!store_) return Status();  // its holder writes them
  report->spans += spans.size();
  return store_->write(spans, progress);
}

}  // namespace carapace
