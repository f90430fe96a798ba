#include "base/redaction_view.h"

#include <algorithm>
#include <cstdint>

namespace carapace {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The four hex digits at `at`, or -1.
int32_t hex4(std::string_view s, size_t at) {
  if (at + 4 > s.size()) return -1;
  int32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    int d = hex_value(s[at + k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// The keys whose string values are the text a stream carries: OpenAI's
// content and tool-call arguments, Anthropic's text, thinking and
// partial_json (a tool call's input, in pieces).
bool carried(std::string_view key) {
  return key == "content" || key == "text" || key == "arguments" || key == "partial_json" || key == "thinking";
}

// The end of the JSON string whose opening quote is at `open`: the index of
// its closing quote, or npos.
size_t string_end(std::string_view s, size_t open) {
  for (size_t i = open + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace

bool RedactionView::may_hide(std::string_view source) {
  return source.find('\\') != std::string_view::npos || source.find('%') != std::string_view::npos;
}

void RedactionView::literal(size_t source, size_t size, std::string_view bytes) {
  if (size == 0) return;
  if (!segments_.empty()) {
    Segment& last = segments_.back();
    if (last.literal && last.source + last.source_size == source && last.view + last.view_size == text_.size()) {
      last.view_size += size;
      last.source_size += size;
      text_.append(bytes);
      return;
    }
  }
  segments_.push_back(Segment{text_.size(), size, source, size, true});
  text_.append(bytes);
}

void RedactionView::escape(size_t source, size_t source_size, std::string_view bytes) {
  segments_.push_back(Segment{text_.size(), bytes.size(), source, source_size, false});
  text_.append(bytes);
}

void RedactionView::decode_into(std::string_view piece, size_t offset) {
  size_t run = 0;  // where the current literal run began
  auto flush = [&](size_t upto) {
    if (upto > run) literal(offset + run, upto - run, piece.substr(run, upto - run));
  };
  size_t i = 0;
  while (i < piece.size()) {
    const char c = piece[i];
    if (c == '\\' && i + 1 < piece.size()) {
      char simple = 0;
      switch (piece[i + 1]) {
        case 'n': simple = '\n'; break;
        case 't': simple = '\t'; break;
        case 'r': simple = '\r'; break;
        case 'b': simple = '\b'; break;
        case 'f': simple = '\f'; break;
        case '"': simple = '"'; break;
        case '\\': simple = '\\'; break;
        case '/': simple = '/'; break;
        default: break;
      }
      if (simple != 0) {
        flush(i);
        escape(offset + i, 2, std::string_view(&simple, 1));
        i += 2;
        run = i;
        continue;
      }
      if (piece[i + 1] == 'u') {
        int32_t cp = hex4(piece, i + 2);
        if (cp >= 0) {
          size_t length = 6;
          if (cp >= 0xD800 && cp <= 0xDBFF && i + 12 <= piece.size() && piece[i + 6] == '\\' && piece[i + 7] == 'u') {
            int32_t low = hex4(piece, i + 8);
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
              length = 12;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate
          flush(i);
          escape(offset + i, length, utf8(static_cast<uint32_t>(cp)));
          i += length;
          run = i;
          continue;
        }
      }
    } else if (c == '%' && i + 2 < piece.size() && hex_value(piece[i + 1]) >= 0 && hex_value(piece[i + 2]) >= 0) {
      const char byte = static_cast<char>(hex_value(piece[i + 1]) * 16 + hex_value(piece[i + 2]));
      flush(i);
      escape(offset + i, 3, std::string_view(&byte, 1));
      i += 3;
      run = i;
      continue;
    }
    ++i;
  }
  flush(piece.size());
}

RedactionView RedactionView::decoded(std::string_view source) {
  RedactionView v;
  v.text_.reserve(source.size());
  v.decode_into(source, 0);
  return v;
}

bool RedactionView::streamed(std::string_view source, RedactionView* out) {
  RedactionView v;
  size_t at = 0;
  while (at < source.size()) {
    size_t end = source.find('\n', at);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(at, end - at);
    const size_t line_at = at;
    at = end + 1;
    if (line.substr(0, 5) != "data:") continue;
    // The event's JSON: each string value of a carried key, in order.
    std::string_view key;
    for (size_t j = 5; j < line.size();) {
      const char c = line[j];
      if (c != '"') {
        if (c == '{' || c == '[' || c == ',' || c == '}' || c == ']') key = {};
        ++j;
        continue;
      }
      size_t close = string_end(line, j);
      if (close == std::string_view::npos) break;
      std::string_view content = line.substr(j + 1, close - j - 1);
      size_t next = close + 1;
      while (next < line.size() && (line[next] == ' ' || line[next] == '\t')) ++next;
      if (next < line.size() && line[next] == ':') {
        key = content;
        j = next + 1;
        continue;
      }
      if (carried(key)) v.decode_into(content, line_at + j + 1);
      key = {};
      j = close + 1;
    }
  }
  if (v.text_.empty()) return false;
  *out = std::move(v);
  return true;
}

std::vector<std::pair<size_t, size_t>> RedactionView::source_ranges(size_t begin, size_t end) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (begin >= end) return out;
  // The first segment that ends after `begin`.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), begin,
                             [](size_t b, const Segment& s) { return b < s.view + s.view_size; });
  for (; it != segments_.end() && it->view < end; ++it) {
    size_t from = it->source, to = it->source + it->source_size;
    if (it->literal) {
      from = it->source + (std::max(begin, it->view) - it->view);
      to = it->source + (std::min(end, it->view + it->view_size) - it->view);
    }
    if (!out.empty() && out.back().second == from) {
      out.back().second = to;
    } else {
      out.emplace_back(from, to);
    }
  }
  return out;
}

}  // namespace carapace
