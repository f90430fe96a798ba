// Durations as people write them in configs and on command lines: "250ms",
// "90s", "30m", "24h", "7d", or a plain number of milliseconds.
#pragma once

#include <cstdint>
#include <string_view>

namespace carapace {

// Parses `text` into milliseconds ("0" is 0); false for anything else,
// a unit it does not know, or a value past 2^64 ms.
bool parse_duration_ms(std::string_view text, uint64_t* ms);

}  // namespace carapace
