#include "actors/provider/sse_parser.h"

#include <algorithm>
#include <cstring>

namespace carapace {

bool SseParser::over(uint64_t size) {
  if (size > max_bytes_) {
    overflowed_ = true;
    line_.clear();
    line_.shrink_to_fit();
    data_.clear();
    data_.shrink_to_fit();
  }
  return overflowed_;
}

void SseParser::feed(std::string_view bytes, const Sink& sink) {
  if (overflowed_) return;
  if (!started_) {
    // The BOM may itself arrive cut: hold back a prefix of it.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    line_.append(bytes);
    if (line_.size() < kBom.size() && kBom.substr(0, line_.size()) == line_) return;
    started_ = true;
    std::string held = std::move(line_);
    line_.clear();
    std::string_view rest = held;
    if (rest.substr(0, kBom.size()) == kBom) rest.remove_prefix(kBom.size());
    feed(rest, sink);
    return;
  }
  size_t pos = 0;
  if (after_cr_ && !bytes.empty()) {
    after_cr_ = false;
    if (bytes[0] == '\n') pos = 1;
  }
  while (pos < bytes.size()) {
    const char* start = bytes.data() + pos;
    size_t left = bytes.size() - pos;
    const char* lf = static_cast<const char*>(std::memchr(start, '\n', left));
    const char* cr = static_cast<const char*>(std::memchr(start, '\r', lf ? static_cast<size_t>(lf - start) : left));
    const char* end = cr ? cr : lf;
    if (end == nullptr) {
      if (over(line_.size() + left)) return;
      line_.append(start, left);
      return;
    }
    std::string_view text(start, static_cast<size_t>(end - start));
    if (over(line_.size() + text.size())) return;
    if (!line_.empty()) {
      line_.append(text);
      line(line_, sink);
      line_.clear();
    } else {
      line(text, sink);
    }
    if (overflowed_) return;
    pos = static_cast<size_t>(end - bytes.data()) + 1;
    if (end == cr) {
      if (pos == bytes.size()) {
        after_cr_ = true;
      } else if (bytes[pos] == '\n') {
        ++pos;
      }
    }
  }
}

void SseParser::line(std::string_view text, const Sink& sink) {
  if (text.empty()) {
    if (has_data_) {
      event_.data.swap(data_);
      if (!event_.data.empty() && event_.data.back() == '\n') event_.data.pop_back();
      ++events_;
      sink(event_);
    }
    // The next event starts empty (its data is data_, swapped in when it is
    // dispatched); the strings keep their capacity, so an event of the usual
    // size allocates nothing.
    event_.type.assign(SseEvent::kDefaultType);
    event_.id.clear();
    event_.raw.clear();
    data_.clear();
    has_data_ = false;
    has_fields_ = false;
    return;
  }
  if (text[0] == ':') {
    ++comments_;
    return;
  }
  has_fields_ = true;
  if (event_.raw.size() < kRawKept) {
    if (!event_.raw.empty()) event_.raw += '\n';
    event_.raw.append(text.substr(0, kRawKept - std::min(kRawKept, event_.raw.size())));
  }
  size_t colon = text.find(':');
  std::string_view field = text.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = text.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (over(data_.size() + value.size() + 1)) return;
    data_.append(value);
    data_ += '\n';
    has_data_ = true;
  } else if (field == "event") {
    event_.type.assign(value.empty() ? SseEvent::kDefaultType : value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) event_.id.assign(value);
  }
  // "retry" and unknown fields are ignored: the retry policy decides reconnection.
}

}  // namespace carapace
