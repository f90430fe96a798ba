#include "base/crc32c.h"

#include <array>
#include <cstring>

namespace carapace::crc32c {
namespace {

constexpr uint32_t kPolyReflected = 0x82f63b78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolyReflected : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const void* data, size_t n) {
  auto p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
    --n;
  }
  return ~c32;
}

const bool kHasSse42 = __builtin_cpu_supports("sse4.2");
#else
const bool kHasSse42 = false;
#endif

}  // namespace

uint32_t extend_portable(uint32_t crc, const void* data, size_t n) {
  auto p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t extend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (kHasSse42) return extend_sse42(crc, data, n);
#endif
  return extend_portable(crc, data, n);
}

bool hardware_accelerated() { return kHasSse42; }

}  // namespace carapace::crc32c
