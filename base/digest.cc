#include "base/digest.h"

// The implementation inlined into this file (xxHash's own XXH_INLINE_ALL):
// the digests of the fold's short inputs (a 32-byte chain link, a message)
// skip the shared library's call and dispatch.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

namespace carapace {
namespace {

void put_be64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

uint64_t get_be64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Digest128::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(hi >> (4 * i)) & 0xf];
    out[31 - i] = kDigits[(lo >> (4 * i)) & 0xf];
  }
  return out;
}

bool Digest128::from_hex(std::string_view text, Digest128* out) {
  if (text.size() != 32) return false;
  uint64_t halves[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    int v = hex_value(text[i]);
    if (v < 0) return false;
    halves[i / 16] = (halves[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  *out = Digest128{halves[0], halves[1]};
  return true;
}

std::string Digest128::bytes() const {
  std::string out;
  out.reserve(16);
  put_be64(out, hi);
  put_be64(out, lo);
  return out;
}

bool Digest128::from_bytes(std::string_view raw, Digest128* out) {
  if (raw.size() != 16) return false;
  auto p = reinterpret_cast<const unsigned char*>(raw.data());
  *out = Digest128{get_be64(p), get_be64(p + 8)};
  return true;
}

Digest128 digest128(std::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return Digest128{h.high64, h.low64};
}

Digest128Builder::Digest128Builder() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Digest128Builder::~Digest128Builder() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Digest128Builder::update(std::string_view data) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data.data(), data.size());
}

Digest128 Digest128Builder::finish() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<const XXH3_state_t*>(state_));
  return Digest128{h.high64, h.low64};
}

}  // namespace carapace
