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

}  // namespace carapace
