// What the benchmarks read about their own process from /proc.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace carapace::bench {

// Bytes this process has had written to storage so far (/proc/self/io's
// write_bytes): a database's write-ahead log, flushes and compactions.
inline uint64_t process_write_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "write_bytes:") return value;
  }
  return 0;
}

}  // namespace carapace::bench
