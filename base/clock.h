// The two clocks the runtime reads outside the fold: wall-clock time for
// what is stamped or compared with stamps (events' ts_us, `--since`,
// schedules), and the steady clock for how long something took.
#pragma once

#include <chrono>
#include <cstdint>

namespace carapace {

// Microseconds since the Unix epoch, by the system clock.
inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whole milliseconds since `start`, by the steady clock.
inline uint64_t ms_since(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

}  // namespace carapace
