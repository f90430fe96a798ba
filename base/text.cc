#include "base/text.h"

#include <cstring>

namespace carapace {

std::string errno_text(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof buf);  // the GNU variant: returns the text
}

size_t incomplete_utf8_suffix(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: the lead is further back
    size_t length = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

size_t leading_utf8_continuations(std::string_view s) {
  size_t n = 0;
  while (n < 3 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) ++n;
  return n;
}

namespace {

bool is_c1_lead(const std::string_view text, size_t i) {
  return static_cast<unsigned char>(text[i]) == 0xC2 && i + 1 < text.size() &&
         static_cast<unsigned char>(text[i + 1]) >= 0x80 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
}

bool needs_escape(unsigned char c) { return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7F; }

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

bool escape_terminal_controls(std::string_view text, std::string* out) {
  size_t i = 0;
  for (; i < text.size(); ++i) {
    if (needs_escape(static_cast<unsigned char>(text[i])) || is_c1_lead(text, i)) break;
  }
  if (i == text.size()) return false;
  std::string result;
  result.reserve(text.size() + 16);
  result.append(text.substr(0, i));
  for (; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (needs_escape(c)) {
      result += "\\x";
      result += kHex[c >> 4];
      result += kHex[c & 0xF];
    } else if (is_c1_lead(text, i)) {
      auto code = static_cast<unsigned char>(text[++i]);
      result += "\\u00";
      result += kHex[code >> 4];
      result += kHex[code & 0xF];
    } else {
      result += static_cast<char>(c);
    }
  }
  *out = std::move(result);
  return true;
}

std::string terminal_safe(std::string_view text) {
  std::string out;
  return escape_terminal_controls(text, &out) ? out : std::string(text);
}

std::string json_terminal_safe(std::string json_text) {
  std::string_view text = json_text;
  size_t i = 0;
  while (i < text.size() && text[i] != 0x7F && !is_c1_lead(text, i)) ++i;
  if (i == text.size()) return json_text;
  std::string out(text.substr(0, i));
  for (; i < text.size(); ++i) {
    if (text[i] == 0x7F) {
      out += "\\u007f";
    } else if (is_c1_lead(text, i)) {
      auto code = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += kHex[code >> 4];
      out += kHex[code & 0xF];
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace carapace
