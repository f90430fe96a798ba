// Fuzz target: a model request body read into its prompt-cache regions
// (cache_regions, actors/collector/cache_regions.h), and two requests
// compared (compare_requests, cache_analyze.h). The bodies come from the
// body store, which a bundle from a stranger fills. The first byte of an
// input chooses the format (anthropic, openai, guessed); the rest is the
// body, compared with itself and with itself cut in half.
//
// Checked: every region lies inside the body, in order of its value's
// bytes within its own kind, no more cacheable regions than regions; a
// region's fingerprinted bytes are no longer than it; a request matches
// itself; the offsets where two bodies part are inside them.
#include <cstdint>
#include <string>

#include "actors/collector/cache_analyze.h"
#include "actors/collector/cache_regions.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

CacheRequest request(std::string body, std::string_view format) {
  CacheRequest r{.seq = 1, .model = "m", .ok = true, .body = std::move(body)};
  r.regions = cache_regions(r.body, format);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* kFormats[] = {"anthropic", "openai", ""};
  std::string_view format = kFormats[data[0] % 3];
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  CacheRequest a = request(body, format);
  const RequestRegions& r = a.regions;
  fuzz::check(r.error.empty() || r.regions.empty(), "regions beside an error");
  fuzz::check(r.cacheable <= r.regions.size(), "more cacheable regions than regions");
  for (const auto& x : r.regions) {
    fuzz::check(x.offset <= body.size() && x.size <= body.size() - x.offset, "a region outside the body");
    std::string_view value = std::string_view(body).substr(x.offset, x.size);
    fuzz::check(fingerprinted_bytes(value).size() <= value.size(), "fingerprinted bytes longer than the region");
    auto [p, q] = first_difference(value, value);
    fuzz::check(p == value.size() && q == value.size(), "a region differs from itself");
  }
  CacheComparison self = compare_requests(a, request(body, format));
  fuzz::check(!self.comparable || self.matched, "a request does not match itself");
  CacheRequest half = request(body.substr(0, body.size() / 2), format);
  CacheComparison c = compare_requests(a, half);
  if (c.comparable && !c.matched) {
    fuzz::check(c.offset_a <= body.size() && c.offset_b <= half.body.size(), "a parting offset outside a body");
  }
  (void)analyze_cache({a, half, a});
  return 0;
}
