// TraceStore: the spans the collector builds from the event log, and their
// indexes, in a RocksDB database of their own (home/traces).
//
// Column families:
//   spans     session 0x00 be64(open_seq) span_id  -> the span (JSON text)
//   progress  session                              -> TraceProgress (JSON text)
//   by_start  be64(start_us) session 0x00 span_id  -> ""
//   by_model  model 0x00 be64(start_us) session 0x00 span_id -> ""
//   by_tool   tool 0x00 be64(start_us) session 0x00 span_id  -> ""
// Spans and progress are written together in one atomic batch (the
// collector's), so a session's progress never claims spans that are not
// there. The store does not interpret span values: the collector encodes
// them (actors/collector/span.h). A span rewritten keeps its key; index
// entries only ever point at spans (a span's start, model and tool do not
// change once known), and a reader checks what it finds against the span.
//
// Derived data: it can be deleted and rebuilt from the event log, which is
// why it lives apart from the log's database and its single writer (see
// docs/trace.md). One writer process at a time (RocksDB's lock); readers
// open it read-only and see what was written when they opened it.
//
// Thread-safe: all methods may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace carapace {

struct StoredSpan {
  std::string session;
  std::string span_id;
  uint64_t open_seq = 0;
  int64_t start_us = 0;
  std::string model;  // "" if none: not indexed by model
  std::string tool;   // "" if none: not indexed by tool
  std::string value;  // the encoded span
};

// How far the collector got with a session.
struct TraceProgress {
  uint64_t last_seq = 0;           // events folded into the stored spans: 1..last_seq
  uint64_t dropped = 0;            // events the collector's queue had no room for
  uint64_t crashed_after_seq = 0;  // the writer died with the session open after this seq (0: not known to)
  int64_t updated_us = 0;
};

// A reference to a stored span, from an index.
struct SpanRef {
  std::string session;
  std::string span_id;
  int64_t start_us = 0;
};

class TraceStore {
 public:
  enum class Mode { kWriter, kReader };

  // Opens (a writer creates it, owner-only) the store at `path`. A reader on
  // a path with no store gets not_found; a second writer gets busy.
  static Status open(const std::string& path, Mode mode, std::unique_ptr<TraceStore>* out);
  ~TraceStore();

  TraceStore(const TraceStore&) = delete;
  TraceStore& operator=(const TraceStore&) = delete;

  // Writes `spans` (replacing earlier versions) and each session's progress
  // in one atomic batch (not synced: the log is the durable record).
  Status write(std::span<const StoredSpan> spans,
               const std::vector<std::pair<std::string, TraceProgress>>& progress);

  // A session's span values in (open_seq, span_id) order; empty if none.
  Status spans_of(const std::string& session, std::vector<std::string>* values) const;
  // The same values, each handed to `visit` (valid during the call) until it
  // returns false.
  Status scan_spans(const std::string& session, const std::function<bool(std::string_view)>& visit) const;
  // not_found if the collector has not seen the session.
  Status progress(const std::string& session, TraceProgress* out) const;
  // Every session with progress, and its progress.
  Status all_progress(std::vector<std::pair<std::string, TraceProgress>>* out) const;

  // Index scans, in start order: spans started at or after `since_us`.
  Status by_start(int64_t since_us, std::vector<SpanRef>* out) const;
  Status by_model(const std::string& model, int64_t since_us, std::vector<SpanRef>* out) const;
  Status by_tool(const std::string& tool, int64_t since_us, std::vector<SpanRef>* out) const;

  // Removes the spans of `sessions` and their index entries (their
  // progress stays, so that the collector does not build them again unless
  // the session grows; `carapace trace` builds them from the log), then
  // compacts. Sets *removed to the number of spans removed. The writer only.
  Status remove_spans(const std::vector<std::string>& sessions, uint64_t* removed);

  const std::string& path() const;

 private:
  struct Impl;
  explicit TraceStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace
