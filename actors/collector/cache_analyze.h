// Why a prompt cache missed, for `carapace trace analyze` and `carapace
// trace diff --request` (docs/trace.md, "Why did my cache miss?").
//
// Consecutive successful model requests of a session, with the same model,
// are compared region by region (actors/collector/cache_regions.h). What
// the earlier request let the provider cache (its cacheable regions) should
// come back unchanged at the start of the later one, since a conversation
// only grows. Then:
//   cache_bust     a cacheable region of the earlier request changed or is
//                  gone: the first such region, the byte in each body where
//                  they part, and a few bytes of each around it
//   ttl_lapse      the prefix matched, the later request read nothing from
//                  the cache, and more than the cache's lifetime had passed
//                  since the earlier one started (5 min, or the 1 h a
//                  breakpoint asked for; --cache-ttl overrides)
//   provider_miss  the prefix matched within the lifetime, the earlier
//                  request was worth caching (the provider wrote or read a
//                  cache for it, or its prefix is at least min_tokens long
//                  at 4 bytes a token), and the provider reported no cache
//                  read
// Requests the provider could cache nothing of (anthropic without a
// breakpoint) are not compared; cache_off says so once per session.
// Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/collector/cache_regions.h"
#include "actors/collector/trace_analyze.h"

namespace carapace {

struct CacheRequest {
  uint64_t seq = 0;  // its llm.requested
  uint64_t turn = 0;
  uint32_t attempt = 0;
  int64_t start_us = 0;
  std::string model;
  bool ok = false;  // the provider answered (the usage below is its report)
  uint64_t input = 0, cache_read = 0, cache_write = 0;
  std::string body;  // as sent
  RequestRegions regions;
  // A context.trimmed or turn.rolled_back between the previous request and
  // this one (its seq, 0: none): named with a bust it explains.
  uint64_t trimmed_seq = 0;
  uint64_t rolled_back_seq = 0;
};

struct CacheAnalyzeOptions {
  int64_t ttl_ms = 0;         // 0: from the breakpoint (anthropic "1h"), else 5 min
  uint64_t min_tokens = 1024;  // the smallest prefix providers cache
};

// How request `b` continues the cache of request `a`.
struct CacheComparison {
  bool comparable = false;  // same format and model, and `a` left something cacheable
  bool matched = false;     // every cacheable region of `a` is unchanged in `b`
  size_t region = 0;        // the first that is not (index into a's regions)
  std::string region_name;
  bool missing = false;                 // `b` has no such region
  size_t offset_a = 0, offset_b = 0;    // where they part, in each body
  size_t matched_bytes = 0;             // of `a`'s cacheable regions, in its body
};
CacheComparison compare_requests(const CacheRequest& a, const CacheRequest& b);

// A few bytes of `body` before and after `offset`, control bytes escaped.
std::string excerpt(std::string_view body, size_t offset, size_t before = 40, size_t after = 60);

std::vector<Finding> analyze_cache(const std::vector<CacheRequest>& requests, const CacheAnalyzeOptions& options = {});

}  // namespace carapace
