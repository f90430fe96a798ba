// SpanBuilder: a session's events in, its spans out (docs/trace.md).
//
// Pure and incremental: add() the events of one session in seq order, read
// spans() at any point (a running session's last spans are still open). Each
// event opens, updates or closes a span:
//   session.started                  opens the session (root) span
//   turn.started … turn.committed    a turn span, child of the session
//   llm.requested … responded/failed an LLM span per attempt, child of the turn
//   hook.decided / tool.requested …
//     tool.completed                 a tool span per call id, child of the
//                                    turn; a hook about a call is its child
//   session.resumed                  a resume span, child of the session,
//                                    linked to the span the crash cut short
//   context.trimmed, fault.injected,
//   turn.rolled_back, user.message   span events
// A fork's session span links to its parent's turn span at the fork point
// (the fork's log copies the parent's events up to it, seqs included).
//
// Not thread-safe; one builder per session.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/collector/span.h"
#include "events/events.h"

namespace carapace {

class SpanBuilder {
 public:
  // kTracked: take_changed() gives the spans changed since its last call
  // (the collector's batches). kUntracked: the spans are read once, at the
  // end (a trace built on demand), and no record of changes is kept.
  enum class Changes { kTracked, kUntracked };
  explicit SpanBuilder(std::string session, Changes changes = Changes::kTracked);

  // Folds the next event of the session (seqs must increase).
  void add(const Event& event);

  // Room for this many spans (a session of n events opens fewer than n).
  void reserve(size_t spans) { spans_.reserve(spans); }

  const std::vector<Span>& spans() const { return spans_; }
  // The spans, moved out (the builder is done with).
  std::vector<Span> release() && { return std::move(spans_); }
  const std::string& session() const { return session_; }
  // The seq of the last event added, 0 before any.
  uint64_t last_seq() const { return last_seq_; }

  // The spans changed since the last call (for writing them in batches).
  std::vector<Span> take_changed();

 private:
  size_t open_span(std::string_view kind, std::string name, const Event& e, size_t parent);
  void close_span(size_t index, const Event& e, std::string status);
  size_t current_parent() const;  // the open turn, else the root
  size_t innermost_open() const;  // the deepest open span of the open turn, else it, else the root
  size_t tool_span(const std::string& call_id, const Event& e);
  void touch(size_t index) {
    if (track_changes_) changed_.insert(index);
  }
  void add_to_root(const char* key, const nlohmann::json& value);
  void span_event(size_t index, const Event& e, std::string name, SpanAttrs attrs);

  std::string session_;
  std::string trace_id_;
  std::vector<Span> spans_;
  bool track_changes_ = true;
  std::set<size_t> changed_;
  uint64_t last_seq_ = 0;
  int64_t last_ts_ = 0;
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t root_ = kNone;
  size_t turn_ = kNone;                             // the open turn span
  std::map<std::pair<uint64_t, uint32_t>, size_t> llm_;  // open LLM spans by (turn, attempt)
  // Keyed by call id, and never iterated where order shows: hashed, as a long
  // session holds one entry per call it made.
  std::unordered_map<std::string, size_t> tools_;            // tool spans by call id
  std::unordered_map<std::string, size_t> approvals_;        // approval spans by call id (this turn's)
  std::unordered_map<std::string, std::string> call_names_;  // call id -> tool name, from the model's answers
  std::map<uint64_t, size_t> turn_by_number_;       // the latest turn span of each turn number
  // Fork: the parent and the seq of its checkpoint this session starts from.
  std::string parent_;
  uint64_t parent_seq_ = 0;
  // The last turn.rolled_back, and where the log stood before it.
  uint64_t rollback_seq_ = 0;
  uint64_t before_rollback_seq_ = 0;
  int64_t before_rollback_us_ = 0;
  size_t rollback_cut_ = kNone;
  // Tool calls a stop or a crash cut short, by span: when (the stop, or the
  // last event before the crash) and by what. The resume settles them as
  // interrupted; their span ends there, not when the session came back.
  struct Cut {
    int64_t at_us = 0;
    std::string stop_reason;  // "" for a crash
  };
  std::map<size_t, Cut> cut_;
};

// Every span of `events` (one session's, in seq order).
std::vector<Span> build_spans(const std::string& session, const std::vector<Event>& events);

// Puts one session's spans in the order the builder opens them: by the seq
// that opened them, and among those one event opened, the enclosing first
// (the session, a turn, a model call, a tool call, then what is about the
// call). Spans read back from the trace store come in id order; ordered so,
// they read as spans built from the log do, handles (`#341` against
// `#341:tool`) included.
void order_as_built(std::vector<Span>* spans);

}  // namespace carapace
