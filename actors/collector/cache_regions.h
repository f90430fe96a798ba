// The cacheable regions of a model request, read from the exact bytes that
// were sent (the verbatim body in the body store), for prompt-cache
// diagnosis (docs/trace.md, "Why did my cache miss?").
//
// A provider caches a prompt's prefix: it can serve a request from cache only
// as far as its bytes match a request it has seen. The regions, in the order
// the provider lays the prompt out:
//   anthropic  tools, system, messages[0], messages[1], ...
//   openai     tools, system (a leading system or developer message),
//              messages[i] for the others
// Each region's fingerprint is XXH3-64 of the bytes of its JSON value as
// sent, except `cache_control` members: they mark where a cache entry ends,
// are not part of what is cached, and move forward every turn when the last
// messages carry them (docs/config.md, provider.cache).
//
// What the provider may cache: anthropic up to the last region holding a
// breakpoint (none: nothing); openai every region (automatic caching).
//
// Pure and bounded: a body that is not a JSON object, or nests deeper than
// limits::kJsonDepth, gives no regions and an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace carapace {

struct CacheRegion {
  std::string name;    // tools, system, messages[3]
  size_t offset = 0;   // where the region's value starts in the body
  size_t size = 0;     // its length in bytes
  uint64_t fingerprint = 0;
  bool breakpoint = false;  // holds a cache_control marker
};

struct RequestRegions {
  std::string format;  // anthropic, openai
  std::string model;
  std::vector<CacheRegion> regions;  // in the provider's prompt order
  size_t cacheable = 0;              // how many leading regions the provider may cache
  std::string ttl;                   // the last breakpoint's ttl (anthropic: "5m" unless "1h" was sent)
  std::string prompt_cache_key;      // openai, when sent
  std::string error;                 // why there are no regions
};

// `format`: "anthropic" or "openai" (the session's provider); "" guesses
// from the body's shape (a tool's input_schema or a top-level system means
// anthropic).
RequestRegions cache_regions(std::string_view body, std::string_view format = "");

// The bytes a region's fingerprint covers: the value as sent, cache_control
// members left out.
std::string fingerprinted_bytes(std::string_view value);

// Where two region values first differ once their cache_control members are
// left out, as a byte offset into each; {a.size(), b.size()} when they do
// not differ.
std::pair<size_t, size_t> first_difference(std::string_view a, std::string_view b);

// 16 hex digits.
std::string fingerprint_hex(uint64_t fingerprint);

// XXH3-64 over the fingerprints of the first `count` regions: one value
// for "this prefix", as `trace span` shows it.
uint64_t prefix_fingerprint(const std::vector<CacheRegion>& regions, size_t count);

}  // namespace carapace
