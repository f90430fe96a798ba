#include "actors/collector/cache_analyze.h"

#include <cstdio>

namespace carapace {
namespace {

int64_t lifetime_ms(const CacheRequest& a, const CacheAnalyzeOptions& options) {
  if (options.ttl_ms > 0) return options.ttl_ms;
  return a.regions.ttl == "1h" ? 3'600'000 : 300'000;
}

std::string duration(int64_t ms) {
  char buf[48];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  } else if (ms < 120'000) {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  } else if (ms < 7'200'000) {
    std::snprintf(buf, sizeof buf, "%lld min %lld s", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f h", static_cast<double>(ms) / 3'600'000.0);
  }
  return buf;
}

std::string where(const CacheRequest& r) {
  return "turn " + std::to_string(r.turn) + " (seq " + std::to_string(r.seq) + ")";
}

}  // namespace

std::string excerpt(std::string_view body, size_t offset, size_t before, size_t after) {
  offset = std::min(offset, body.size());
  size_t from = offset > before ? offset - before : 0;
  size_t to = std::min(body.size(), offset + after);
  std::string out;
  if (from > 0) out += "…";
  for (size_t i = from; i < to; ++i) {
    if (i == offset) out += "⟦";
    unsigned char c = static_cast<unsigned char>(body[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (offset == to) out += "⟦";
  if (to < body.size()) out += "…";
  return out;
}

CacheComparison compare_requests(const CacheRequest& a, const CacheRequest& b) {
  CacheComparison c;
  const RequestRegions& ra = a.regions;
  const RequestRegions& rb = b.regions;
  if (!ra.error.empty() || !rb.error.empty() || ra.format != rb.format || a.model != b.model || ra.cacheable == 0) {
    return c;
  }
  c.comparable = true;
  for (size_t i = 0; i < ra.cacheable; ++i) {
    const CacheRegion& x = ra.regions[i];
    if (i >= rb.regions.size() || rb.regions[i].name != x.name) {
      c.region = i;
      c.region_name = x.name;
      c.missing = true;
      c.offset_a = x.offset;
      c.offset_b = i < rb.regions.size() ? rb.regions[i].offset : b.body.size();
      return c;
    }
    const CacheRegion& y = rb.regions[i];
    if (x.fingerprint != y.fingerprint) {
      c.region = i;
      c.region_name = x.name;
      auto [da, db] = first_difference(std::string_view(a.body).substr(x.offset, x.size),
                                       std::string_view(b.body).substr(y.offset, y.size));
      c.offset_a = x.offset + da;
      c.offset_b = y.offset + db;
      return c;
    }
    c.matched_bytes += x.size;
  }
  c.matched = true;
  return c;
}

std::vector<Finding> analyze_cache(const std::vector<CacheRequest>& requests, const CacheAnalyzeOptions& options) {
  std::vector<Finding> out;
  const CacheRequest* prev = nullptr;
  size_t uncacheable = 0, answered = 0;
  std::vector<uint64_t> uncacheable_seqs;
  for (const CacheRequest& b : requests) {
    if (!b.ok || !b.regions.error.empty()) continue;
    ++answered;
    if (b.regions.format == "anthropic" && b.regions.cacheable == 0 && b.body.size() / 4 >= options.min_tokens) {
      ++uncacheable;
      uncacheable_seqs.push_back(b.seq);
    }
    const CacheRequest* a = prev;
    prev = &b;
    if (a == nullptr) continue;
    CacheComparison c = compare_requests(*a, b);
    if (!c.comparable) continue;
    const int64_t gap_ms = (b.start_us - a->start_us) / 1000;
    if (!c.matched) {
      std::string cause;
      if (b.trimmed_seq) cause = "; the context was trimmed at seq " + std::to_string(b.trimmed_seq);
      if (b.rolled_back_seq) cause += "; a turn was rolled back at seq " + std::to_string(b.rolled_back_seq);
      std::string message =
          where(b) + " no longer starts with what " + where(*a) + " cached: region " + c.region_name +
          (c.missing ? " is gone" : " changed at byte " + std::to_string(c.offset_b) + " of the body (byte " +
                                        std::to_string(c.offset_a) + " before)") +
          cause;
      Finding f{"cache_bust", message, {a->seq, b.seq}};
      f.detail = {{"region", c.region_name},
                  {"missing", c.missing},
                  {"offset_before", c.offset_a},
                  {"offset_after", c.offset_b},
                  {"before", excerpt(a->body, c.offset_a)},
                  {"after", excerpt(b.body, c.offset_b)},
                  {"cache_read", b.cache_read}};
      if (b.trimmed_seq) f.detail["trimmed_seq"] = b.trimmed_seq;
      if (b.rolled_back_seq) f.detail["rolled_back_seq"] = b.rolled_back_seq;
      out.push_back(std::move(f));
      continue;
    }
    if (b.cache_read > 0) continue;
    const int64_t ttl = lifetime_ms(*a, options);
    if (gap_ms > ttl) {
      Finding f{"ttl_lapse",
                where(b) + " matched the cached prefix of " + where(*a) + " but came " + duration(gap_ms) +
                    " after it, past the cache's lifetime of " + duration(ttl) + "; nothing was read from the cache",
                {a->seq, b.seq}};
      f.detail = {{"gap_ms", gap_ms}, {"ttl_ms", ttl}, {"matched_bytes", c.matched_bytes}};
      out.push_back(std::move(f));
      continue;
    }
    const bool worth_caching = a->cache_write > 0 || a->cache_read > 0 || c.matched_bytes / 4 >= options.min_tokens;
    if (!worth_caching) continue;
    Finding f{"provider_miss",
              where(b) + " matched the cached prefix of " + where(*a) + " (" + std::to_string(c.matched_bytes) +
                  " bytes, regions " + b.regions.regions[0].name + ".." + a->regions.regions[a->regions.cacheable - 1].name +
                  ") " + duration(gap_ms) + " later, within the cache's lifetime, and the provider reported no cache read",
              {a->seq, b.seq}};
    f.detail = {{"gap_ms", gap_ms},
                {"ttl_ms", ttl},
                {"matched_bytes", c.matched_bytes},
                {"previous_cache_write", a->cache_write},
                {"previous_cache_read", a->cache_read}};
    out.push_back(std::move(f));
  }
  if (uncacheable >= 2 && uncacheable == answered) {
    out.push_back({"cache_off",
                   std::to_string(uncacheable) +
                       " anthropic requests carry no cache_control breakpoint, so nothing of them was cached; "
                       "provider.cache in the config sets breakpoints (docs/config.md)",
                   uncacheable_seqs});
  }
  return out;
}

}  // namespace carapace
