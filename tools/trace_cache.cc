#include "tools/trace_cache.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "actors/collector/trace_view.h"
#include "tools/trace_load.h"

namespace carapace::cli {
namespace {

uint64_t number(const SpanAttrs& attrs, const char* key) {
  const nlohmann::json* it = attrs.get(key);
  return it != nullptr && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

std::string text(const SpanAttrs& attrs, const char* key) {
  const nlohmann::json* it = attrs.get(key);
  return it != nullptr && it->is_string() ? it->get<std::string>() : "";
}

// The seq of the first event in (after, upto), or 0.
uint64_t first_between(const std::set<uint64_t>& seqs, uint64_t after, uint64_t upto) {
  auto it = seqs.upper_bound(after);
  return it != seqs.end() && *it < upto ? *it : 0;
}

// A model span as a request, without its body.
CacheRequest request_of(const Span& s) {
  return CacheRequest{.seq = s.open_seq,
                      .turn = number(s.attrs, "turn"),
                      .attempt = static_cast<uint32_t>(number(s.attrs, "attempt")),
                      .start_us = s.start_us,
                      .model = text(s.attrs, "model"),
                      .ok = s.status == "ok",
                      .input = number(s.attrs, "tokens_in"),
                      .cache_read = number(s.attrs, "cache_read"),
                      .cache_write = number(s.attrs, "cache_write")};
}

// The request body model span `s` references, read into *body; false, with
// why in *error, when there is none to read.
bool read_request_body(const Span& s, const BodyStore* bodies, std::string* body, std::string* error) {
  const std::string ref = text(s.attrs, "request_body");
  if (ref.empty()) {
    *error = "no request body was kept";
    return false;
  }
  if (bodies == nullptr || !bodies->get(ref, body).ok()) {
    *error = "the request body " + ref + " is not in the store";
    return false;
  }
  return true;
}

}  // namespace

std::vector<CacheRequest> cache_requests(const std::vector<Span>& spans, const BodyStore* bodies, uint64_t max_bytes,
                                         size_t* bodies_read) {
  std::vector<CacheRequest> out;
  if (bodies_read != nullptr) *bodies_read = 0;
  if (spans.empty()) return out;
  const std::string provider = text(spans[0].attrs, "provider");
  std::set<uint64_t> trims, rollbacks;
  for (const auto& s : spans) {
    for (const auto& e : s.events) {
      if (e.name == "context_trimmed") trims.insert(e.seq);
    }
    if (s.kind == kSpanTurn && s.status == "rolled_back" && !s.open()) rollbacks.insert(s.close_seq);
  }
  std::vector<const Span*> llm;
  for (const auto& s : spans) {
    if (s.kind == kSpanLlm && !s.attrs.value("copied_from_parent", false)) llm.push_back(&s);
  }
  std::sort(llm.begin(), llm.end(), [](const Span* a, const Span* b) { return a->open_seq < b->open_seq; });
  uint64_t total = 0;
  for (const Span* sp : llm) {
    CacheRequest r = request_of(*sp);
    if (total >= max_bytes) {
      r.regions.error = "not read: the session's request bodies before it reach " + std::to_string(max_bytes) +
                        " bytes (--cache-max-bytes)";
    } else if (!read_request_body(*sp, bodies, &r.body, &r.regions.error)) {
      // Nothing to compare: the error says why.
    } else if (total + r.body.size() > max_bytes) {
      total = max_bytes;
      r.body.clear();
      r.regions.error = "not read: the session's request bodies up to it pass " + std::to_string(max_bytes) +
                        " bytes (--cache-max-bytes)";
    } else {
      total += r.body.size();
      r.regions = cache_regions(r.body, provider);
      if (bodies_read != nullptr) ++*bodies_read;
    }
    out.push_back(std::move(r));
  }
  for (size_t i = 1; i < out.size(); ++i) {
    out[i].trimmed_seq = first_between(trims, out[i - 1].seq, out[i].seq);
    out[i].rolled_back_seq = first_between(rollbacks, out[i - 1].seq, out[i].seq);
  }
  return out;
}

Status cache_request_at(const std::vector<Span>& spans, const BodyStore& bodies, uint64_t seq, CacheRequest* out) {
  for (const auto& s : spans) {
    if (s.kind != kSpanLlm || s.open_seq != seq) continue;
    *out = request_of(s);
    std::string error;
    if (!read_request_body(s, &bodies, &out->body, &error)) return Status::not_found(error);
    out->regions = cache_regions(out->body, text(spans[0].attrs, "provider"));
    if (!out->regions.error.empty()) return Status::invalid_argument(out->regions.error);
    return Status();
  }
  return Status::not_found("no model request at seq " + std::to_string(seq));
}

void annotate_cache_prefixes(std::vector<Span>* spans, const BodyStore& bodies) {
  if (spans->empty()) return;
  const std::string provider = text((*spans)[0].attrs, "provider");
  for (auto& sp : *spans) {
    std::string body, error;
    if (sp.kind != kSpanLlm || !read_request_body(sp, &bodies, &body, &error)) continue;
    RequestRegions r = cache_regions(body, provider);
    if (!r.error.empty()) continue;
    sp.attrs["cache_regions"] = r.regions.size();
    sp.attrs["cache_cacheable_regions"] = r.cacheable;
    sp.attrs["cache_prefix_fingerprint"] = fingerprint_hex(prefix_fingerprint(r.regions, r.cacheable));
  }
}

nlohmann::json regions_json(const RequestRegions& r) {
  if (!r.error.empty()) return {{"error", r.error}};
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < r.regions.size(); ++i) {
    const CacheRegion& x = r.regions[i];
    list.push_back({{"name", x.name},
                    {"offset", x.offset},
                    {"bytes", x.size},
                    {"fingerprint", fingerprint_hex(x.fingerprint)},
                    {"breakpoint", x.breakpoint},
                    {"cacheable", i < r.cacheable}});
  }
  nlohmann::json j{{"format", r.format},
                   {"regions", list},
                   {"cacheable_regions", r.cacheable},
                   {"prefix_fingerprint", fingerprint_hex(prefix_fingerprint(r.regions, r.cacheable))}};
  if (!r.ttl.empty()) j["ttl"] = r.ttl;
  if (!r.prompt_cache_key.empty()) j["prompt_cache_key"] = r.prompt_cache_key;
  return j;
}

std::string regions_text(const RequestRegions& r) {
  if (!r.error.empty()) return "  cache regions: " + r.error + "\n";
  std::string out = "  cache regions (" + r.format + "): ";
  if (r.cacheable == 0) {
    out += "nothing cacheable (no cache_control breakpoint)\n";
  } else {
    out += "cacheable through " + r.regions[r.cacheable - 1].name +
           (r.ttl.empty() ? std::string() : " (ttl " + r.ttl + ")") + ", prefix " +
           fingerprint_hex(prefix_fingerprint(r.regions, r.cacheable)) + "\n";
  }
  if (!r.prompt_cache_key.empty()) out += "    prompt_cache_key " + r.prompt_cache_key + "\n";
  for (size_t i = 0; i < r.regions.size(); ++i) {
    const CacheRegion& x = r.regions[i];
    char line[160];
    std::snprintf(line, sizeof line, "    %-14s %10s at %-8zu %s%s%s\n", x.name.c_str(), format_bytes(x.size).c_str(),
                  x.offset, fingerprint_hex(x.fingerprint).c_str(), x.breakpoint ? "  breakpoint" : "",
                  i < r.cacheable ? "" : "  (not cached)");
    out += line;
  }
  return out;
}

namespace {

struct Ref {
  std::string session;
  uint64_t seq = 0;
};

bool parse_ref(const std::string& text, const std::string& default_session, Ref* out) {
  size_t at = text.rfind('@');
  std::string seq = at == std::string::npos ? text : text.substr(at + 1);
  out->session = at == std::string::npos ? default_session : text.substr(0, at);
  if (out->session.empty() || seq.empty() || seq.size() > 19 ||
      seq.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  out->seq = std::stoull(seq);
  return true;
}

nlohmann::json side_json(const Ref& ref, const CacheRequest& r) {
  nlohmann::json j = regions_json(r.regions);
  j["session"] = ref.session;
  j["seq"] = r.seq;
  j["turn"] = r.turn;
  j["attempt"] = r.attempt;
  j["model"] = r.model;
  j["body_bytes"] = r.body.size();
  j["cache_read"] = r.cache_read;
  j["cache_write"] = r.cache_write;
  return j;
}

}  // namespace

int run_diff_request(Context& ctx, const DiffRequestArgs& args) {
  Ref a, b;
  if (!parse_ref(args.a, "", &a) || !parse_ref(args.b, a.session, &b)) {
    return ctx.usage(Status::invalid_argument("--request compares two model requests named SESSION@SEQ, got '" +
                                              args.a + "' and '" + args.b + "'"),
                     "the seq is the one `carapace trace show SESSION` prints before an llm attempt, or a "
                     "cache_bust finding of `carapace trace analyze` names; the second may be a seq alone");
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  auto store = open_store(ctx);
  std::unique_ptr<BodyStore> bodies;
  Status opened = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kReader, &bodies);
  if (!opened.ok()) {
    return ctx.fail(opened.with_context("the home's body store"), "only model calls to HTTP providers keep bodies");
  }
  CacheRequest req[2];
  Ref refs[2] = {a, b};
  for (int k = 0; k < 2; ++k) {
    std::vector<Span> spans;
    TraceInfo info;
    Status s = load_trace(ctx, *log, store.get(), refs[k].session, &spans, &info);
    if (!s.ok()) return no_such_session(ctx, s);
    s = cache_request_at(spans, *bodies, refs[k].seq, &req[k]);
    if (!s.ok()) {
      return ctx.fail(s.with_context(refs[k].session + "@" + std::to_string(refs[k].seq)),
                      "`carapace trace show " + refs[k].session + "` prints the seq before each llm attempt");
    }
  }
  const CacheRequest &x = req[0], &y = req[1];
  // Region by region, by name in order.
  nlohmann::json rows = nlohmann::json::array();
  std::string table;
  size_t n = std::max(x.regions.regions.size(), y.regions.regions.size());
  long first = -1;
  for (size_t i = 0; i < n; ++i) {
    const CacheRegion* p = i < x.regions.regions.size() ? &x.regions.regions[i] : nullptr;
    const CacheRegion* q = i < y.regions.regions.size() ? &y.regions.regions[i] : nullptr;
    std::string state = !p ? "only in B" : !q ? "only in A" : p->name != q->name ? "another region"
                                                  : p->fingerprint == q->fingerprint ? "same" : "changed";
    if (state != "same" && first < 0) first = static_cast<long>(i);
    rows.push_back({{"region", p ? p->name : q->name},
                    {"a", p ? nlohmann::json(fingerprint_hex(p->fingerprint)) : nlohmann::json(nullptr)},
                    {"b", q ? nlohmann::json(fingerprint_hex(q->fingerprint)) : nlohmann::json(nullptr)},
                    {"state", state}});
    char line[200];
    std::snprintf(line, sizeof line, "  %-14s %-16s  %-16s  %s\n", (p ? p->name : q->name).c_str(),
                  p ? fingerprint_hex(p->fingerprint).c_str() : "-", q ? fingerprint_hex(q->fingerprint).c_str() : "-",
                  state.c_str());
    table += line;
  }
  nlohmann::json data{{"a", side_json(a, x)}, {"b", side_json(b, y)}, {"regions", rows}};
  std::string detail;
  std::string summary;
  if (first < 0) {
    summary = "the two requests have the same " + std::to_string(n) + " regions";
    data["first_difference"] = nullptr;
  } else {
    size_t i = static_cast<size_t>(first);
    const CacheRegion* p = i < x.regions.regions.size() ? &x.regions.regions[i] : nullptr;
    const CacheRegion* q = i < y.regions.regions.size() ? &y.regions.regions[i] : nullptr;
    std::string name = p ? p->name : q->name;
    if (p && q && p->name == q->name) {
      std::string_view va = std::string_view(x.body).substr(p->offset, p->size);
      std::string_view vb = std::string_view(y.body).substr(q->offset, q->size);
      auto [da, db] = first_difference(va, vb);
      std::string common(va.substr(0, da));
      std::string rest_a(va.substr(da)), rest_b(vb.substr(db));
      summary = "the requests part in region " + name + ": byte " + std::to_string(p->offset + da) + " of A's body, " +
                std::to_string(q->offset + db) + " of B's";
      data["first_difference"] = {{"region", name},
                                  {"offset_a", p->offset + da},
                                  {"offset_b", q->offset + db},
                                  {"region_offset_a", da},
                                  {"region_offset_b", db},
                                  {"a_from_there", rest_a},
                                  {"b_from_there", rest_b}};
      detail = "\nregion " + name + " (cache_control markers left out of the comparison)\n  the same for " +
               std::to_string(da) + " bytes" +
               (da > 0 ? ", ending: " + excerpt(common, common.size(), 60, 0) : std::string()) + "\n- A from there: " +
               rest_a + "\n+ B from there: " + rest_b + "\n";
    } else {
      summary = "the requests part at region " + name + ": " + (p ? "A" : "B") + " has it, " + (p ? "B" : "A") +
                (p && q ? " has " + q->name : " does not");
      data["first_difference"] = {{"region", name}, {"offset_a", p ? p->offset : x.body.size()},
                                  {"offset_b", q ? q->offset : y.body.size()}};
    }
  }
  if (ctx.json) {
    ctx.print_success(data, summary);
    return kExitOk;
  }
  std::string out = "A " + a.session + "@" + std::to_string(x.seq) + ": turn " + std::to_string(x.turn) + ", " +
                    x.model + ", " + format_bytes(x.body.size()) + ", cache " + std::to_string(x.cache_read) +
                    " read / " + std::to_string(x.cache_write) + " written\n";
  out += "B " + b.session + "@" + std::to_string(y.seq) + ": turn " + std::to_string(y.turn) + ", " + y.model + ", " +
         format_bytes(y.body.size()) + ", cache " + std::to_string(y.cache_read) + " read / " +
         std::to_string(y.cache_write) + " written\n";
  char head[200];
  std::snprintf(head, sizeof head, "  %-14s %-16s  %-16s  %s\n", "region", "A", "B", "");
  out += head + table + detail + summary + "\n";
  out = ctx.shown(out);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace carapace::cli
