// CRC32C (Castagnoli), the checksum of every stored record.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it and a table otherwise;
// both give the same value (tests check it). Stored checksums are masked, as in
// LevelDB, so that a CRC computed over bytes that themselves contain a CRC does
// not degenerate. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace carapace::crc32c {

// Returns the CRC32C of data[0, n) continuing from `crc`, the CRC of earlier bytes.
uint32_t extend(uint32_t crc, const void* data, size_t n);

inline uint32_t value(std::string_view data) { return extend(0, data.data(), data.size()); }

// The table-driven path, exposed so tests can compare it with the hardware path.
uint32_t extend_portable(uint32_t crc, const void* data, size_t n);

// True when extend() uses the crc32 instruction.
bool hardware_accelerated();

constexpr uint32_t kMaskDelta = 0xa282ead8u;

// Masks a CRC for storage: rotate right by 15 bits and add a constant.
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

inline uint32_t unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace carapace::crc32c
