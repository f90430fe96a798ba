// StoredSpanReader: a span as the trace store holds it (span_to_json's
// text) read back into a Span with simdjson, without first building a JSON
// tree of the whole span as span_from_json(parse_stored_json(text)) does.
// `carapace trace` reads every span of a session this way when the
// collector has stored them: 61,000 spans, 16 MB of text, for 10,000 turns.
//
// For a text the collector wrote it gives the Span span_from_json gives,
// attributes included: their numbers keep nlohmann_json's kinds (an
// integer that is not negative is unsigned), so they print as before. It
// refuses, with a corruption status that names what is wrong, a text that
// is not JSON, lacks a field or holds it with another type than
// span_to_json writes (a negative seq too, which span_from_json wrapped);
// `carapace trace` then builds the spans from the log instead.
//
// Depth is bounded by simdjson at limits::kJsonDepth + 1 levels as it counts
// them, a container that holds a scalar being one level more than its
// brackets: what parse_stored_json admits, and at most one level more (an
// empty array innermost). The bound is checked as the text is parsed, so a
// text nested far deeper costs no more than its length.
//
// One reader per thread: it keeps its parser's buffers from span to span.
#pragma once

#include <memory>
#include <string_view>

#include "actors/collector/span.h"
#include "base/status.h"

namespace carapace {

class StoredSpanReader {
 public:
  StoredSpanReader();
  ~StoredSpanReader();
  StoredSpanReader(const StoredSpanReader&) = delete;
  StoredSpanReader& operator=(const StoredSpanReader&) = delete;

  // On an error, *out is left partly filled.
  Status read(std::string_view text, Span* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace
