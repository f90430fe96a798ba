// Prompt-cache diagnosis for the `carapace trace` commands (docs/trace.md,
// "Why did my cache miss?"): the model requests of a session with their
// verbatim bodies and cache regions, for `trace analyze`; the regions of one
// request, for `trace span`; and two requests compared, for `trace diff
// --request`.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "actors/collector/cache_analyze.h"
#include "actors/collector/span.h"
#include "storage/body_store.h"
#include "tools/cli.h"

namespace carapace::cli {

// What `trace analyze` reads of one session's request bodies, at most (--cache-max-bytes).
inline constexpr uint64_t kCacheMaxBytes = 256ull << 20;

// The session's model requests in seq order (spans a fork copied from its
// parent left out), each with its body read from `bodies` (null: none) and
// the trims and rollbacks that came before it. Bodies are read in order
// until they add up to `max_bytes` (each holds the conversation so far, so a
// long session's add up fast); the later ones are left unread, with an
// error saying so, and *bodies_read counts those read.
std::vector<CacheRequest> cache_requests(const std::vector<Span>& spans, const BodyStore* bodies,
                                         uint64_t max_bytes = kCacheMaxBytes, size_t* bodies_read = nullptr);

// The model request whose llm.requested is at `seq`, with its body and
// regions; not_found when there is none (or no body), invalid_argument when
// its body is not a request.
Status cache_request_at(const std::vector<Span>& spans, const BodyStore& bodies, uint64_t seq, CacheRequest* out);

// Adds to each model span with a stored request body its cache prefix:
// cache_regions, cache_cacheable_regions and cache_prefix_fingerprint (what
// `trace export` and the collector's OTLP stream carry; a digest, not content).
void annotate_cache_prefixes(std::vector<Span>* spans, const BodyStore& bodies);

// The regions of a request body, as `trace span --json` shows them under "cache".
nlohmann::json regions_json(const RequestRegions& r);

// Lines for `trace span`: the format, what is cacheable, each region.
std::string regions_text(const RequestRegions& r);

struct DiffRequestArgs {
  std::string a, b;  // SESSION@SEQ (b may be SEQ alone: the same session)
};
int run_diff_request(Context& ctx, const DiffRequestArgs& args);

}  // namespace carapace::cli
