// LogFollower: the collector out of process (`carapace collector`). It
// follows a home's event log from another process (a RocksDB secondary that
// catches up with the writer on each poll), builds the same spans the
// in-process Collector does, and writes them to the trace store.
//
// Crash attribution (LogWatch): a session whose writer died before it
// completed or failed is marked `crashed after seq N`
// (TraceProgress::crashed_after_seq), N being its last event. New events (a
// resume) clear the mark.
//
// Restart: what it wrote says how far it got (each session's progress); a
// restarted follower folds only sessions whose log has grown past that.
//
// Not thread-safe: one thread polls.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/collector/log_watch.h"
#include "actors/collector/span_builder.h"
#include "base/status.h"

namespace carapace {

class EventLog;
class TraceStore;

struct FollowReport {
  uint64_t events = 0;  // events folded by this poll
  uint64_t spans = 0;   // spans written
  // Sessions found crashed by this poll: (id, the seq after which their writer died).
  std::vector<std::pair<std::string, uint64_t>> crashed;
  // With report_finished(): per session, the spans this poll closed (or
  // changed after they closed), and the session's root span as it stands.
  std::map<std::string, std::vector<Span>> finished;
  std::map<std::string, Span> roots;
};

class LogFollower {
 public:
  // Opens home/log as a reader and home/traces as the trace store's writer
  // (busy if another collector has it).
  static Status open(const std::string& home, std::unique_ptr<LogFollower>* out);
  ~LogFollower();

  // Catches up with the log, folds what is new, attributes crashes, writes.
  Status poll(FollowReport* report);

  // Makes poll() report the spans it closed (for `collector --otlp-endpoint`).
  void report_finished(bool on) { report_finished_ = on; }

 private:
  LogFollower() = default;
  std::string home_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<TraceStore> store_;
  std::unique_ptr<LogWatch> watch_;
  bool report_finished_ = false;
};

}  // namespace carapace
