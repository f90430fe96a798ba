// RedactionView: a text as a secret hides in it from a plain scan, rebuilt
// so that the redactor can find it, with every byte mapped back to the
// source bytes it came from.
//
// A key a tool printed reaches a request body JSON-escaped (`a.txt\nsk-...`
// reads as one word, `nsk-...`, to a scan of the raw bytes), or `\u0073k-`,
// or percent-encoded in a URL, or split over the events of a streamed answer
// (`"content":"sk-pr"` ... `"content":"oj-..."`). Two views undo that:
// decoded() decodes JSON string escapes and %XX; streamed() joins the text
// an SSE stream's events carry (their content, text, arguments and
// partial_json strings, decoded). The redactor scans each view and masks the
// source ranges a secret came from.
//
// Thread-safety: plain values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace carapace {

class RedactionView {
 public:
  // Whether `source` holds anything decoded() would change: a backslash or a
  // percent sign (the fast path of the redactor skips the view without).
  static bool may_hide(std::string_view source);

  // `source` with its JSON string escapes (\n \t \r \b \f \" \\ \/ \uXXXX,
  // surrogate pairs joined) and %XX escapes decoded; anything else as it is.
  static RedactionView decoded(std::string_view source);

  // The text the events of the SSE stream `source` carry, in order, each
  // string decoded; false when `source` has no "data:" line with such a
  // string.
  static bool streamed(std::string_view source, RedactionView* out);

  const std::string& text() const { return text_; }

  // The source ranges the view's bytes [begin, end) came from, in order,
  // adjacent ones joined: one range for a run of the source, several when
  // the view joined pieces from apart (a stream's events).
  std::vector<std::pair<size_t, size_t>> source_ranges(size_t begin, size_t end) const;

 private:
  // View bytes [view, view + view_size) came from source [source, source + source_size):
  // byte for byte when `literal`, else as a whole (an escape).
  struct Segment {
    size_t view = 0;
    size_t view_size = 0;
    size_t source = 0;
    size_t source_size = 0;
    bool literal = true;
  };

  // Appends `piece` (at `offset` in the source) decoded.
  void decode_into(std::string_view piece, size_t offset);
  void literal(size_t source, size_t size, std::string_view bytes);
  void escape(size_t source, size_t source_size, std::string_view bytes);

  std::string text_;
  std::vector<Segment> segments_;
};

}  // namespace carapace
