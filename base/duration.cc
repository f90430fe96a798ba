#include "base/duration.h"

#include <cctype>

namespace carapace {

bool parse_duration_ms(std::string_view text, uint64_t* ms) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (n > UINT64_MAX / 10 - 10) return false;
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0) return false;
  const std::string_view unit = text.substr(i);
  uint64_t scale = 0;
  if (unit.empty() || unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else if (unit == "d") {
    scale = 86'400'000;
  } else {
    return false;
  }
  if (n > UINT64_MAX / scale) return false;
  *ms = n * scale;
  return true;
}

}  // namespace carapace
