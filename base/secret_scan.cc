#include "base/secret_scan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace carapace {

struct SecretScan::Tables {
  // AVX2, [position][nibble], each 16-entry table twice (shuffles look up
  // within each 128-bit lane): the fingerprints in one set of 8 buckets, a
  // filter that passes a superset of the candidates (`first_lo`,
  // `first_hi`); then, for a block the filter passes, in the two sets of 8
  // that VBMI has ([group][position][nibble]).
  alignas(32) uint8_t first_lo[4][32] = {};
  alignas(32) uint8_t first_hi[4][32] = {};
  alignas(32) uint8_t lo[2][4][32] = {};
  alignas(32) uint8_t hi[2][4][32] = {};
  // bit 0: 0-9; bit 1: a-f, A-F; bit 2: '\\'; bit 3: '%' (each exact: one low
  // and one high nibble set per bit).
  alignas(32) uint8_t class_lo[32] = {};
  alignas(32) uint8_t class_hi[32] = {};
  // VBMI: [group][position][byte] for the 128 ASCII bytes.
  alignas(64) uint8_t bytes[2][4][128] = {};
  alignas(64) uint8_t classes[128] = {};  // bit 0: a hexadecimal digit; bit 1: '\\' or '%'
};

namespace {

// One fingerprint: the bytes each of its four positions may hold (an empty
// position holds any byte). Fingerprints share a bucket (a bit of a table
// set) when their sets combine without many false candidates. The AVX2
// filter's single set of 8 (`first_bucket`) was chosen by a search for the
// fewest candidates on this repository's sources and docs; the needles have
// a bucket of their own, since a needle may be any path.
struct Fingerprint {
  int group;  // which of the two 8-bucket table sets
  int bucket;
  int first_bucket;
  std::array<std::string_view, 4> at;
  bool caseless;
};

// What may follow a secret-looking name; a backslash too, for the escaped
// quote or tab that ends a name inside a JSON string.
constexpr std::string_view kNameEnd = "=:\"'. \t\\";
constexpr int kNeedleBucket = 7;       // group 0
constexpr int kNeedleFirstBucket = 7;  // alone

constexpr Fingerprint kFingerprints[] = {
    {0, 0, 0, {"s", "k", "-", ""}, false},                           // sk-...
    {0, 1, 4, {"A", "KSBCI", "ICz", ""}, false},                     // AKIA ASIA ABIA ACCA AIza
    {0, 2, 5, {"g", "h", "pousr", ""}, false},                       // ghp_ gho_ ghu_ ghs_ ghr_
    {0, 3, 4, {"b-", "_B", "pE", "aG"}, false},                      // github_pat_, -----BEGIN
    {0, 4, 1, {"xe", "oy", "xJ", ""}, false},                        // xox?- (Slack), eyJ (JWT)
    {0, 5, 3, {"\\%", "u\\0123456789abcdefABCDEF", "", ""}, false},  // \uXXXX, \\, %XX
    {0, 6, 6, {"a", "t", "a", ":"}, false},                          // data: (a stream)
    {1, 0, 2, {"k", "e", "y", kNameEnd}, true},  // api_key apikey api-key access_key private_key ...
    {1, 1, 2, {"r", "e", "t", kNameEnd}, true},  // secret client_secret
    {1, 2, 2, {"k", "e", "n", kNameEnd}, true},  // token
    {1, 3, 0, {"o", "r", "d", kNameEnd}, true},  // password
    {1, 4, 0, {"s", "w", "d", kNameEnd}, true},  // passwd
    {1, 5, 6, {"n", "t", "i", "a"}, true},       // credential credentials
    {1, 6, 1, {"u", "t", "h", kNameEnd}, true},  // auth
    {1, 7, 2, {"r", "e", "r", kNameEnd}, true},  // bearer
};

void set_nibble(uint8_t (&table)[32], int nibble, uint8_t bit) {
  table[nibble] |= bit;
  table[nibble + 16] |= bit;
}

// Position `position` of bucket `bucket` of `group`, and of the AVX2
// filter's bucket `first_bucket`, holds `bytes` (empty: any byte).
void add(SecretScan::Tables* t, int group, int bucket, int first_bucket, int position,
         std::string_view bytes) {
  const auto bit = static_cast<uint8_t>(1u << bucket);
  const auto first_bit = static_cast<uint8_t>(1u << first_bucket);
  if (bytes.empty()) {
    for (int nib = 0; nib < 16; ++nib) {
      set_nibble(t->first_lo[position], nib, first_bit);
      set_nibble(t->first_hi[position], nib, first_bit);
      set_nibble(t->lo[group][position], nib, bit);
      set_nibble(t->hi[group][position], nib, bit);
    }
    for (uint8_t& b : t->bytes[group][position]) b |= bit;
    return;
  }
  for (char c : bytes) {
    const auto u = static_cast<uint8_t>(c);
    set_nibble(t->first_lo[position], u & 0x0f, first_bit);
    set_nibble(t->first_hi[position], u >> 4, first_bit);
    set_nibble(t->lo[group][position], u & 0x0f, bit);
    set_nibble(t->hi[group][position], u >> 4, bit);
    // A needle's byte past ASCII is no candidate for either kernel; the
    // redactor then finds that needle by its own search.
    if (u < 128) t->bytes[group][position][u] |= bit;
  }
}

// The candidate bits of a block's hexadecimal digits `hex` (bit j: byte j):
// where a run reaches 32 digits, counting the `*run` digits that ended the
// block before; updates *run.
template <typename Mask>
Mask hex_run_candidates(Mask hex, size_t* run) {
  constexpr size_t kWidth = sizeof(Mask) * 8;
  if (hex == 0) {
    *run = 0;
    return 0;
  }
  Mask at = 0;
  const auto lead = static_cast<size_t>(std::countr_one(hex));
  if (*run < 32 && *run + lead >= 32) at |= Mask{1} << (32 - *run - 1);
  if constexpr (kWidth > 32) {
    // A run inside the block: bit j of r is set when bits j..j+31 are.
    Mask r = hex;
    r &= r >> 1;
    r &= r >> 2;
    r &= r >> 4;
    r &= r >> 8;
    r &= r >> 16;
    at |= r & (~r + 1);
  }
  *run = hex == static_cast<Mask>(~Mask{0}) ? *run + kWidth : static_cast<size_t>(std::countl_one(hex));
  return at;
}

template <typename Mask>
void take(size_t at, Mask cand, std::vector<size_t>* out) {
  while (cand != 0) [[unlikely]] {
    out->push_back(at + static_cast<size_t>(std::countr_zero(cand)));
    cand &= cand - 1;
  }
}

#if defined(__x86_64__)

// The AVX2 lookups of position k of a block: the byte's low nibble (the
// byte itself where no fingerprint has "any byte" at k: a shuffle gives 0
// for a byte past ASCII, its top bit set, so it is no candidate there) and
// its high nibble.
template <int k>
__attribute__((target("avx2"), always_inline)) inline void nibbles(__m256i v, __m256i* lo, __m256i* hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  *lo = k < 2 ? v : _mm256_and_si256(v, low4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
}

#define CARAPACE_TABLE(bytes) _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes))

// The bucket bits of the 32 positions of `p` in one set of tables
// ([position][nibble]); *lo0 and *hi0 get the nibbles of position 0.
__attribute__((target("avx2"), always_inline)) inline __m256i lookup(const uint8_t (&lo_tables)[4][32],
                                                                     const uint8_t (&hi_tables)[4][32],
                                                                     const uint8_t* p, __m256i* lo0,
                                                                     __m256i* hi0) {
  __m256i lo, hi;
  nibbles<0>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), lo0, hi0);
  __m256i m = _mm256_and_si256(_mm256_shuffle_epi8(CARAPACE_TABLE(lo_tables[0]), *lo0),
                               _mm256_shuffle_epi8(CARAPACE_TABLE(hi_tables[0]), *hi0));
  nibbles<1>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 1)), &lo, &hi);
  m = _mm256_and_si256(m, _mm256_and_si256(_mm256_shuffle_epi8(CARAPACE_TABLE(lo_tables[1]), lo),
                                           _mm256_shuffle_epi8(CARAPACE_TABLE(hi_tables[1]), hi)));
  nibbles<2>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)), &lo, &hi);
  m = _mm256_and_si256(m, _mm256_and_si256(_mm256_shuffle_epi8(CARAPACE_TABLE(lo_tables[2]), lo),
                                           _mm256_shuffle_epi8(CARAPACE_TABLE(hi_tables[2]), hi)));
  nibbles<3>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 3)), &lo, &hi);
  return _mm256_and_si256(m, _mm256_and_si256(_mm256_shuffle_epi8(CARAPACE_TABLE(lo_tables[3]), lo),
                                              _mm256_shuffle_epi8(CARAPACE_TABLE(hi_tables[3]), hi)));
}

// The candidates of a block that the filter passed: the two sets of buckets.
__attribute__((target("avx2"), noinline)) uint32_t exact_avx2(const SecretScan::Tables& t, const uint8_t* p) {
  __m256i lo0, hi0;
  const __m256i any =
      _mm256_or_si256(lookup(t.lo[0], t.hi[0], p, &lo0, &hi0), lookup(t.lo[1], t.hi[1], p, &lo0, &hi0));
  return ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(any, _mm256_setzero_si256())));
}

// AVX2, per 32 positions of `p` (which must have 35 readable bytes): the
// candidates, which bytes are hexadecimal digits, and the class bits of
// every byte (OR-ed into *classes, for the escapes). The filter's one set
// of buckets passes most text with half the shuffles of two; a block it
// passes is looked at again with the two sets, which give fewer candidates.
__attribute__((target("avx2"), always_inline)) inline void block_avx2(const SecretScan::Tables& t,
                                                                      const uint8_t* p, uint32_t* candidates,
                                                                      uint32_t* hex, __m256i* classes) {
  __m256i lo0, hi0;
  const __m256i m = lookup(t.first_lo, t.first_hi, p, &lo0, &hi0);
  const __m256i zero = _mm256_setzero_si256();
  *candidates = ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(m, zero)));
  if (*candidates != 0) [[unlikely]] {
    *candidates &= exact_avx2(t, p);
  }
  const __m256i c = _mm256_and_si256(_mm256_shuffle_epi8(CARAPACE_TABLE(t.class_lo), lo0),
                                     _mm256_shuffle_epi8(CARAPACE_TABLE(t.class_hi), hi0));
  *classes = _mm256_or_si256(*classes, c);
  *hex = ~static_cast<uint32_t>(
      _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(c, _mm256_set1_epi8(3)), zero)));
}

#undef CARAPACE_TABLE

__attribute__((target("avx2"))) void scan_avx2(const SecretScan::Tables& t, std::string_view text,
                                               SecretScan::Found* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t run = 0;
  __m256i classes = _mm256_setzero_si256();
  alignas(32) uint8_t pad[64];
  for (size_t i = 0; i < n; i += 32) {
    uint32_t cand, hex;
    if (i + 35 <= n) [[likely]] {
      block_avx2(t, p + i, &cand, &hex, &classes);
    } else {
      // The tail, from a zero-padded copy (a zero byte is no fingerprint's
      // first three bytes, no hexadecimal digit and no escape).
      std::memset(pad, 0, sizeof pad);
      std::memcpy(pad, p + i, std::min<size_t>(n - i, 35));
      block_avx2(t, pad, &cand, &hex, &classes);
      if (n - i < 32) {
        const uint32_t keep = (1u << (n - i)) - 1;
        cand &= keep;
        hex &= keep;
      }
    }
    take(i, cand | hex_run_candidates(hex, &run), &out->candidates);
  }
  // Bits 2 and 3: a backslash or a percent sign.
  const __m256i escape_bits = _mm256_and_si256(classes, _mm256_set1_epi8(0x0c));
  out->escapes = _mm256_movemask_epi8(_mm256_cmpeq_epi8(escape_bits, _mm256_setzero_si256())) != -1;
}

// VBMI: 64 positions at a time; a byte past ASCII is no candidate.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void scan_vbmi(const SecretScan::Tables& t,
                                                                     std::string_view text,
                                                                     SecretScan::Found* out) {
  __m512i low[2][4], high[2][4];
  for (int g = 0; g < 2; ++g) {
    for (int k = 0; k < 4; ++k) {
      low[g][k] = _mm512_load_si512(t.bytes[g][k]);
      high[g][k] = _mm512_load_si512(t.bytes[g][k] + 64);
    }
  }
  const __m512i class_low = _mm512_load_si512(t.classes);
  const __m512i class_high = _mm512_load_si512(t.classes + 64);
  const __m512i hex_bit = _mm512_set1_epi8(1);
  const __m512i escape_bit = _mm512_set1_epi8(2);
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t run = 0;
  uint64_t escapes = 0;
  alignas(64) uint8_t pad[128];
  for (size_t i = 0; i < n; i += 64) {
    const uint8_t* q = p + i;
    uint64_t keep = ~uint64_t{0};
    if (i + 67 > n) {
      std::memset(pad, 0, sizeof pad);
      std::memcpy(pad, p + i, std::min<size_t>(n - i, 67));
      q = pad;
      if (n - i < 64) keep = (uint64_t{1} << (n - i)) - 1;
    }
    const __m512i v0 = _mm512_loadu_si512(q);
    const __m512i v1 = _mm512_loadu_si512(q + 1);
    const __m512i v2 = _mm512_loadu_si512(q + 2);
    const __m512i v3 = _mm512_loadu_si512(q + 3);
    __m512i m[2];
    for (int g = 0; g < 2; ++g) {
      m[g] = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(low[g][0], v0, high[g][0]),
                                       _mm512_permutex2var_epi8(low[g][1], v1, high[g][1]),
                                       _mm512_permutex2var_epi8(low[g][2], v2, high[g][2]), 0x80);  // a & b & c
      m[g] = _mm512_and_si512(m[g], _mm512_permutex2var_epi8(low[g][3], v3, high[g][3]));
    }
    const __m512i any = _mm512_or_si512(m[0], m[1]);
    // ASCII only: a byte past it would alias one below 128 (0xb0 reads as
    // "0"), and a hex run counted from it could put its candidate off the word.
    keep &= ~_mm512_movepi8_mask(v0);
    const __m512i cls = _mm512_permutex2var_epi8(class_low, v0, class_high);
    escapes |= _mm512_test_epi8_mask(cls, escape_bit) & keep;
    const uint64_t hex = _mm512_test_epi8_mask(cls, hex_bit) & keep;
    const uint64_t cand = _mm512_test_epi8_mask(any, any) & keep;
    take(i, cand | hex_run_candidates(hex, &run), &out->candidates);
  }
  out->escapes = escapes != 0;
}

// Asked on first use, not at static initialisation: a Redactor built while
// another file's statics are initialised must not read these before theirs.
bool has_avx2() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return yes;
}

bool has_vbmi() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
  }();
  return yes;
}

#endif

SecretScan::Kernel resolve(SecretScan::Kernel k) {
#if defined(__x86_64__)
  if (k == SecretScan::Kernel::best) return has_vbmi() ? SecretScan::Kernel::vbmi : SecretScan::Kernel::avx2;
#endif
  return k;
}

}  // namespace

SecretScan::SecretScan(const std::vector<std::string>& needles, Kernel kernel)
    : tables_(std::make_unique<Tables>()), kernel_(resolve(kernel)) {
  Tables& t = *tables_;
  for (const Fingerprint& f : kFingerprints) {
    for (int k = 0; k < 4; ++k) {
      std::string bytes(f.at[k]);
      if (f.caseless) {
        for (char c : f.at[k]) {
          if (c >= 'a' && c <= 'z') bytes += static_cast<char>(c - 'a' + 'A');
        }
      }
      add(&t, f.group, f.bucket, f.first_bucket, k, bytes);
    }
  }
  for (const std::string& needle : needles) {
    for (int k = 0; k < 4; ++k) {
      add(&t, 0, kNeedleBucket, kNeedleFirstBucket, k,
          k < static_cast<int>(needle.size()) ? std::string_view(needle).substr(k, 1) : "");
    }
  }
  // One bit each, so that crossing the nibble sets adds no byte.
  for (int nib = 0; nib <= 9; ++nib) set_nibble(t.class_lo, nib, 1);  // 0-9
  set_nibble(t.class_hi, 3, 1);
  for (int nib = 1; nib <= 6; ++nib) set_nibble(t.class_lo, nib, 2);  // a-f, A-F
  set_nibble(t.class_hi, 4, 2);
  set_nibble(t.class_hi, 6, 2);
  set_nibble(t.class_lo, '\\' & 0x0f, 4);
  set_nibble(t.class_hi, '\\' >> 4, 4);
  set_nibble(t.class_lo, '%' & 0x0f, 8);
  set_nibble(t.class_hi, '%' >> 4, 8);
  for (int c = 0; c < 128; ++c) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    t.classes[c] = static_cast<uint8_t>((hex ? 1 : 0) | (c == '\\' || c == '%' ? 2 : 0));
  }
}

SecretScan::~SecretScan() = default;
SecretScan::SecretScan(SecretScan&&) noexcept = default;
SecretScan& SecretScan::operator=(SecretScan&&) noexcept = default;

bool SecretScan::available(Kernel kernel) {
#if defined(__x86_64__)
  switch (kernel) {
    case Kernel::best: return has_avx2() || has_vbmi();
    case Kernel::avx2: return has_avx2();
    case Kernel::vbmi: return has_vbmi();
  }
#endif
  (void)kernel;
  return false;
}

void SecretScan::scan(std::string_view text, Found* out) const {
#if defined(__x86_64__)
  if (kernel_ == Kernel::vbmi && has_vbmi()) {
    scan_vbmi(*tables_, text, out);
  } else if (has_avx2()) {
    scan_avx2(*tables_, text, out);
  }
#else
  (void)text;
  (void)out;
#endif
}

}  // namespace carapace
