// Wire primitives: varints, zigzag, fixed-width little- and big-endian integers.
//
// The building blocks of the payload encoding (events/codec.h) and of storage
// keys. Readers consume from a std::string_view and return false, leaving the
// output untouched, when the input is too short or malformed. Header-only and
// pure; every function is thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace carapace::wire {

// Writes v as a varint at p (room for 10 bytes); returns the bytes written.
[[gnu::always_inline]] inline size_t store_varint(char* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<char>(v);
  return n;
}

// Built on the stack and appended once: byte by byte, every push_back would
// reload the string's pointer and size (a char store may alias them).
inline void put_varint(std::string& out, uint64_t v) {
  char buf[10];
  out.append(buf, store_varint(buf, v));
}

inline size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline bool get_varint(std::string_view& in, uint64_t* v) {
  uint64_t result = 0;
  for (size_t i = 0; i < in.size() && i < 10; ++i) {
    auto byte = static_cast<uint8_t>(in[i]);
    if (i == 9 && byte > 1) return false;  // more than 64 bits
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      in.remove_prefix(i + 1);
      *v = result;
      return true;
    }
  }
  return false;
}

inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

inline void put_fixed32_le(std::string& out, uint32_t v) {
  char buf[4];
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>(v >> (8 * i));
  out.append(buf, 4);
}
inline void put_fixed64_le(std::string& out, uint64_t v) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(v >> (8 * i));
  out.append(buf, 8);
}
inline uint32_t load_fixed32_le(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint64_t load_fixed64_le(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline void store_fixed32_le(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

// Big-endian, so that keys sort numerically as bytes.
inline void put_fixed64_be(std::string& out, uint64_t v) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(v >> (56 - 8 * i));
  out.append(buf, 8);
}
inline uint64_t load_fixed64_be(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

inline bool get_bytes(std::string_view& in, std::string_view* out) {
  uint64_t len;
  std::string_view rest = in;
  if (!get_varint(rest, &len) || len > rest.size()) return false;
  *out = rest.substr(0, len);
  in = rest.substr(len);
  return true;
}

}  // namespace carapace::wire
