// SseParser: turns a server-sent-events byte stream into events, as the HTML
// standard's "event stream interpretation" describes (both OpenAI and
// Anthropic stream their answers this way).
//
// Lines end with LF, CRLF or CR; a leading UTF-8 BOM is skipped; `data:`
// lines of one event are joined with "\n"; `event:` names the event
// (default "message"); lines starting with ':' are comments (servers send
// them as keep-alives); a blank line dispatches the event. Input may be cut
// anywhere (mid-line, between CR and LF, inside a multi-byte character):
// bytes are kept until their line is complete, and never decoded. An event
// the stream ends inside is not dispatched (pending() tells).
//
// Bounded: a line longer than `max_bytes`, or an event whose data lines add
// up to more, stops the parser (overflowed(): the rest of the stream is
// ignored), so a server that never ends a line cannot make it hold more
// than that. An event keeps at most kRawKept bytes of its raw lines.
//
// Not thread-safe: one parser per stream.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace carapace {

struct SseEvent {
  // The type of an event that names none.
  static constexpr std::string_view kDefaultType = "message";

  std::string type{kDefaultType};
  std::string data;
  std::string id;
  // The raw lines of the event (without their line ends), to keep with a
  // failure when its data cannot be parsed: the first SseParser::kRawKept bytes.
  std::string raw;
};

class SseParser {
 public:
  using Sink = std::function<void(const SseEvent&)>;

  static constexpr size_t kRawKept = 4096;

  // `max_bytes`: the longest line, and the most data one event may gather.
  explicit SseParser(uint64_t max_bytes = UINT64_MAX) : max_bytes_(max_bytes) {}

  // Feeds the next bytes; `sink` runs for each event they complete. Does
  // nothing once overflowed().
  void feed(std::string_view bytes, const Sink& sink);

  // Whether a line or an event's data went past max_bytes.
  bool overflowed() const { return overflowed_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // Whether the stream so far ends inside a line or an event.
  bool pending() const { return !line_.empty() || has_fields_; }
  uint64_t comments() const { return comments_; }
  uint64_t events() const { return events_; }

 private:
  void line(std::string_view text, const Sink& sink);
  // Marks the parser overflowed if `size` is past the bound; true if so.
  bool over(uint64_t size);

  uint64_t max_bytes_;
  bool overflowed_ = false;
  std::string line_;  // the incomplete line so far
  bool started_ = false;  // past the (optional) BOM
  bool after_cr_ = false; // the last byte was a CR: an LF next is part of its line end
  bool has_fields_ = false;
  SseEvent event_;
  std::string data_;
  bool has_data_ = false;
  uint64_t comments_ = 0;
  uint64_t events_ = 0;
};

}  // namespace carapace
