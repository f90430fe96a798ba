// Digest128: a 128-bit content digest (XXH3-128) and its hex form.
//
// Used for the folded state's hash stored in every checkpoint, and for content
// digests (prompts, request bodies). Not a cryptographic hash: it detects
// divergence and corruption, it does not resist an adversary. Values compare
// and order like integers; all functions are pure and thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace carapace {

struct Digest128 {
  uint64_t hi = 0;
  uint64_t lo = 0;

  bool is_zero() const { return hi == 0 && lo == 0; }
  friend auto operator<=>(const Digest128&, const Digest128&) = default;

  // 32 lowercase hex digits, high half first.
  std::string hex() const;
  // Parses hex(); returns false on anything else.
  static bool from_hex(std::string_view text, Digest128* out);

  // 16 bytes, big-endian, high half first (the stored form).
  std::string bytes() const;
  static bool from_bytes(std::string_view raw, Digest128* out);
};

Digest128 digest128(std::string_view data);

// Incremental XXH3-128 over a sequence of byte strings; the result equals
// digest128() of their concatenation. Not thread-safe; cheap to construct.
class Digest128Builder {
 public:
  Digest128Builder();
  ~Digest128Builder();
  Digest128Builder(const Digest128Builder&) = delete;
  Digest128Builder& operator=(const Digest128Builder&) = delete;

  void update(std::string_view data);
  Digest128 finish() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

}  // namespace carapace
