#include "actors/collector/log_follower.h"

#include <chrono>

#include "storage/db_lock.h"
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
  for (const auto& [id, p] : progress) {
    f->sessions_[id] = Session{.stored_seq = p.last_seq, .crashed_after = p.crashed_after_seq};
  }
  *out = std::move(f);
  return Status();
}

Status LogFollower::poll(FollowReport* report) {
  CARAPACE_RETURN_IF_ERROR(log_->refresh());
  const pid_t holder = lock_holder(home_ + "/log");
  std::vector<SessionMeta> metas;
  std::vector<std::string> unreadable;
  CARAPACE_RETURN_IF_ERROR(log_->list_sessions(&metas, &unreadable));
  std::vector<StoredSpan> spans;
  std::vector<std::pair<std::string, TraceProgress>> progress;
  for (const auto& meta : metas) {
    uint64_t last = 0;
    if (!log_->last_seq(meta.id, &last).ok() || last == 0) continue;
    Session& s = sessions_[meta.id];
    bool changed = false;
    if (last > s.stored_seq) {
      // Grown: fold the new events (all of them, for a builder this process has not got).
      if (!s.builder) s.builder = std::make_unique<SpanBuilder>(meta.id);
      std::vector<Event> events;
      Status read = log_->read(meta.id, s.builder->last_seq() + 1, last, &events);
      for (const auto& e : events) s.builder->add(e);
      report->events += events.size();
      if (!read.ok() && events.empty()) continue;  // a damaged record: try again next poll
      s.writer = holder;
      s.crashed_after = 0;
      changed = true;
    }
    // Open (never completed or failed), and the process that wrote it holds the log no more.
    bool open = s.builder ? !s.builder->spans().empty() && s.builder->spans()[0].open()
                          : meta.status != SessionStatus::kCompleted && meta.status != SessionStatus::kFailed;
    if (open && s.crashed_after == 0 && (holder == 0 || holder != s.writer)) {
      s.crashed_after = s.builder ? s.builder->last_seq() : last;
      report->crashed.emplace_back(meta.id, s.crashed_after);
      changed = true;
    }
    if (!changed) continue;
    if (s.builder) {
      for (auto& sp : s.builder->take_changed()) {
        StoredSpan stored{.session = meta.id, .span_id = sp.span_id, .open_seq = sp.open_seq, .start_us = sp.start_us};
        if (sp.kind == kSpanLlm) stored.model = sp.attrs.value("model", std::string());
        if (sp.kind == kSpanTool) stored.tool = sp.attrs.value("tool", std::string());
        stored.value = span_to_json(sp).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        spans.push_back(std::move(stored));
        if (report_finished_ && !sp.open()) report->finished[meta.id].push_back(std::move(sp));
      }
      if (report_finished_ && report->finished.count(meta.id) && !s.builder->spans().empty()) {
        report->roots[meta.id] = s.builder->spans()[0];
      }
      s.stored_seq = s.builder->last_seq();
    }
    TraceProgress p{.last_seq = s.stored_seq, .crashed_after_seq = s.crashed_after, .updated_us = now_us()};
    TraceProgress before;
    if (store_->progress(meta.id, &before).ok()) p.dropped = before.dropped;
    progress.emplace_back(meta.id, p);
    // A finished session's builder goes; it is read again if the session grows.
    if (s.builder && !open) s.builder.reset();
  }
  if (spans.empty() && progress.empty()) return Status();
  report->spans += spans.size();
  return store_->write(spans, progress);
}

}  // namespace carapace
