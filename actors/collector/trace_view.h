// The skeleton of a trace: one line per span, nested, for `carapace trace
// show` (docs/trace.md). A pure spans → text projection.
//
// Each line starts with the seq of the event that opened the span (the
// handle `carapace trace span` takes), then the span indented under its
// parent, its duration, tokens, cost and outcome. To fit a long session on a
// screen or two, unless `full`: a turn where nothing went wrong takes one
// line, a run of such turns that did the same steps is one line, and the
// turns a fork copied from its parent are one line. Turns with an error, a
// retry, a crash, a fault, a trim or a rollback are shown whole, up to a
// point: past 60 such pieces, the first 25 and the last 25 are shown, and
// one line says how many turns are between and how many of them are notable.
#pragma once

#include <string>
#include <vector>

#include "actors/collector/span.h"

namespace carapace {

struct SkeletonOptions {
  bool full = false;
  // Said in the header: events the collector dropped for this session.
  uint64_t dropped_events = 0;
  // Said of an open session: its writer is known to have died after this seq.
  uint64_t crashed_after_seq = 0;
};

// Lines ending in '\n'. `spans` as SpanBuilder gives them (root first).
std::string render_skeleton(const std::vector<Span>& spans, const SkeletonOptions& options);

// What the skeleton shows of the session span's children, as data, for a
// view that draws the spans itself (html/trace_view.js: the HTML export and
// `carapace serve`): by the same rule as render_skeleton (not `full`), one
// item per line it prints under the session's header.
struct SkeletonItem {
  enum class Show {
    kWhole,    // a span with what is under it (a notable turn, a resume)
    kCompact,  // a clean turn on one line; `text` is what it did ("llm → shell")
    kFold,     // one line (`text`) standing for the children `first` to `last`: a run of clean
               // turns, a fork's copied turns, or the middle of a long session (then `items` holds
               // what it stands for, item by item)
  };
  Show show = Show::kWhole;
  size_t first = 0, last = 0;  // indexes into the spans: the span; a fold's first and last child
  uint64_t count = 1;          // children of the session it stands for
  std::string text;            // without the command line's "--full" hint
  std::vector<SkeletonItem> items;
};
std::vector<SkeletonItem> skeleton_items(const std::vector<Span>& spans);

// skeleton_items as JSON, spans named by id: [{"show": "whole", "span"},
// {"show": "compact", "span", "steps"}, {"show": "fold", "first", "last",
// "count", "text", "items"?}].
nlohmann::json skeleton_json(const std::vector<Span>& spans);

// A span's handle in the skeleton: its opening seq, or its id. Returns the
// index into `spans`, or -1; *ambiguous is set when `handle` names several
// spans (a seq that opened a tool span and its hook).
long find_span(const std::vector<Span>& spans, const std::string& handle, bool* ambiguous);

// "1.2 s", "40 ms"; "1,204"; "$0.0042"; "0.4 ms", "12 ms", "1.3 s"; "912 B", "1.5 KiB".
std::string format_duration_us(int64_t us);
std::string format_count(uint64_t n);
std::string format_cost(double usd);
std::string format_ms(double ms);
std::string format_bytes(uint64_t n);

}  // namespace carapace
