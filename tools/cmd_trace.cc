// carapace trace show | span | stats | analyze (docs/trace.md)
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <ctime>
#include <iostream>

#include "actors/collector/span_builder.h"
#include "actors/collector/trace_analyze.h"
#include "actors/collector/trace_stats.h"
#include "actors/collector/trace_view.h"
#include "base/bounded_json.h"
#include "base/duration.h"
#include "base/text.h"
#include "events/event_json.h"
#include "events/event_summary.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "storage/trace_store.h"
#include "tools/cli.h"
#include "tools/stop_signals.h"
#include "tools/trace_cache.h"
#include "tools/trace_load.h"

#include <chrono>
#include <thread>

namespace carapace::cli {
namespace {

// ---- show ----

struct ShowArgs {
  std::string session;
  bool full = false;
};

int run_show(Context& ctx, const ShowArgs& args) {
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  auto store = open_store(ctx);
  std::vector<Span> spans;
  TraceInfo info;
  Status s = load_trace(ctx, *log, store.get(), args.session, &spans, &info);
  if (!s.ok()) return no_such_session(ctx, s);
  SkeletonOptions options{.full = args.full, .dropped_events = info.dropped,
                          .crashed_after_seq = spans[0].open() ? info.crashed_after_seq : 0};
  std::string text = render_skeleton(spans, options);
  std::string summary = text.substr(0, text.find('\n'));
  summary = summary.substr(summary.find_first_not_of(" #0123456789"));
  if (ctx.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& sp : spans) list.push_back(span_to_json(sp));
    nlohmann::json data{{"session", args.session},        {"trace_id", spans[0].trace_id},
                        {"status", options.crashed_after_seq ? std::string("crashed") : spans[0].status},
                        {"source", info.source},
                        {"last_seq", info.last_seq},      {"dropped_events", info.dropped},
                        {"spans", list}};
    if (options.crashed_after_seq) data["crashed_after_seq"] = options.crashed_after_seq;
    if (!info.warning.empty()) data["warning"] = info.warning;
    ctx.print_success(data, summary);
  } else {
    text = ctx.shown(text);
    std::fputs(text.c_str(), stdout);
    if (!info.warning.empty()) std::fprintf(stderr, "carapace: %s\n", ctx.shown(info.warning).c_str());
  }
  left_to_exit(std::move(spans));
  return kExitOk;
}

// ---- span ----

struct SpanArgs {
  std::string session;
  std::string handle;
  bool raw = false;
  std::string body;  // request, response, or "" for both
};

std::string pretty(const std::string& body) {
  auto j = parse_stored_json(body);
  if (!j.is_discarded()) return dump(j, 2);
  // Server-sent events: each data line that is JSON, pretty on one line each.
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(at, end - at);
    if (line.rfind("data: ", 0) == 0) {
      auto d = parse_stored_json(line.substr(6));
      if (!d.is_discarded()) line = "data: " + dump(d);
    }
    out += line + "\n";
    at = end + 1;
  }
  return out;
}

int run_span(Context& ctx, const SpanArgs& args) {
  if (!args.body.empty() && args.body != "request" && args.body != "response") {
    return ctx.usage(Status::invalid_argument("--body '" + args.body + "' is not request or response"));
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  auto store = open_store(ctx);
  std::vector<Span> spans;
  TraceInfo info;
  Status s = load_trace(ctx, *log, store.get(), args.session, &spans, &info);
  if (!s.ok()) return no_such_session(ctx, s);
  bool ambiguous = false;
  long index = find_span(spans, args.handle, &ambiguous);
  if (index < 0 || ambiguous) {
    return ctx.fail(Status::not_found((ambiguous ? "several spans of session " : "no span ") +
                                      (ambiguous ? args.session + " match '" + args.handle + "'"
                                                 : "'" + args.handle + "' in session " + args.session)),
                    "a span is named by the seq `carapace trace show " + args.session +
                        "` prints before it (e.g. 14, or 14:hook), or by its id");
  }
  const Span& sp = spans[static_cast<size_t>(index)];
  // The verbatim bodies the span references.
  std::unique_ptr<BodyStore> bodies;
  Status opened = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kReader, &bodies);
  struct Body {
    std::string which, ref, text, error;
  };
  std::vector<Body> found;
  for (const char* which : {"request", "response"}) {
    if (!args.body.empty() && args.body != which) continue;
    std::string ref = sp.attrs.value(std::string(which) + "_body", std::string());
    if (ref.empty()) continue;
    Body b{which, ref, "", ""};
    Status got = opened.ok() ? bodies->get(ref, &b.text) : opened;
    if (!got.ok()) b.error = got.message();
    found.push_back(std::move(b));
  }
  // The request's cache regions (docs/trace.md, "Why did my cache miss?").
  std::optional<RequestRegions> regions;
  for (const auto& b : found) {
    if (b.which == "request" && b.error.empty()) regions = cache_regions(b.text, spans[0].attrs.value("provider", ""));
  }
  if (!args.body.empty() && found.empty()) {
    return ctx.fail(Status::not_found("span " + args.handle + " (" + sp.name + ") has no " + args.body + " body"),
                    "only model calls to HTTP providers keep bodies");
  }
  if (ctx.json) {
    nlohmann::json data = span_to_json(sp);
    if (regions) data["cache"] = regions_json(*regions);
    for (const auto& b : found) {
      if (!b.error.empty()) {
        data[b.which + "_body_error"] = b.error;
      } else {
        auto parsed = parse_stored_json(b.text);
        data[b.which + "_body_text"] = b.text;
        if (!parsed.is_discarded() && !args.raw) data[b.which + "_body_json"] = parsed;
      }
    }
    ctx.print_success(data, sp.name + " of session " + args.session + ": " + sp.status);
    return kExitOk;
  }
  if (args.raw && !args.body.empty()) {  // the bytes alone, for a pipe: redacted, not reformatted
    if (!found[0].error.empty()) return ctx.fail(Status::not_found(found[0].error));
    std::string bytes = ctx.redactor()(found[0].text);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return kExitOk;
  }
  std::printf("%s  (%s, span %s, trace %s)\n", ctx.shown(sp.name).c_str(), sp.kind.c_str(),
              sp.span_id.c_str(), sp.trace_id.c_str());
  std::printf("  status    %s\n  seqs      %llu-%s\n  started   %s\n", ctx.shown(sp.status).c_str(),
              static_cast<unsigned long long>(sp.open_seq),
              sp.open() ? "(open)" : std::to_string(sp.close_seq).c_str(), local_time(sp.start_us).c_str());
  if (!sp.open()) std::printf("  duration  %s\n", format_duration_us(sp.end_us - sp.start_us).c_str());
  if (!sp.parent_id.empty()) std::printf("  parent    %s\n", sp.parent_id.c_str());
  for (const auto& [key, value] : sp.attrs) {
    std::string text = value.is_string() ? value.get<std::string>() : dump(value);
    if (!our_reference(key)) text = ctx.shown(text);
    std::printf("  %-18s %s\n", ctx.shown(key).c_str(), text.c_str());
  }
  if (regions) {
    std::string shown = ctx.shown(regions_text(*regions));
    std::fputs(shown.c_str(), stdout);
  }
  for (const auto& e : sp.events) {
    std::printf("  event #%llu %s %s\n", static_cast<unsigned long long>(e.seq), ctx.shown(e.name).c_str(),
                ctx.shown(dump(e.attrs)).c_str());
  }
  for (const auto& l : sp.links) {
    std::printf("  link (%s) session %s span %s (opened at seq %llu)\n", l.reason.c_str(), l.session.c_str(),
                l.span_id.c_str(), static_cast<unsigned long long>(l.seq));
  }
  for (const auto& b : found) {
    if (!b.error.empty()) {
      std::printf("\n%s body %s: %s\n", b.which.c_str(), b.ref.c_str(), b.error.c_str());
      continue;
    }
    std::printf("\n%s body %s, %zu bytes:\n", b.which.c_str(), b.ref.c_str(), b.text.size());
    std::string shown = ctx.shown(args.raw ? b.text : pretty(b.text));
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    if (shown.empty() || shown.back() != '\n') std::fputs("\n", stdout);
  }
  return kExitOk;
}

// ---- stats and analyze over one or many sessions ----

struct StatsArgs {
  std::string session;
  std::string since;
  std::string group_by;
};

int run_stats(Context& ctx, const StatsArgs& args) {
  TraceQuery query;
  if (int rc = open_trace_query(ctx, args.session, args.since, &query); rc != kExitOk) return rc;
  auto& log = query.log;
  auto& store = query.store;
  const int64_t since_us = query.since_us;
  const auto& sessions = query.sessions;
  Status s;
  std::vector<std::vector<Span>> traces;
  for (const auto& id : sessions) {
    std::vector<Span> spans;
    TraceInfo info;
    s = load_trace(ctx, *log, store.get(), id, &spans, &info);
    if (!s.ok()) {
      if (!args.session.empty()) return no_such_session(ctx, s);
      continue;
    }
    traces.push_back(std::move(spans));
  }
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  nlohmann::json stats =
      trace_stats(traces, StatsOptions{.group_by = args.group_by, .since_us = since_us, .utc_offset_s = local.tm_gmtoff});
  const auto& tot = stats["totals"];
  std::string summary = count(tot["sessions"].get<uint64_t>(), "session") + ", " +
                        count(tot["model_calls"].get<uint64_t>(), "model call") + ", " +
                        format_cost(tot["cost_usd"].get<double>());
  if (ctx.json) {
    stats["since_us"] = since_us;
    stats["group_by"] = args.group_by;
    ctx.print_success(stats, summary);
    return kExitOk;
  }
  auto print_tool = [&ctx](const std::string& name, const nlohmann::json& tool, const char* indent) {
    const std::string in = tool.contains("sessions") ? ", " + count(tool["sessions"].get<uint64_t>(), "session") : "";
    std::printf("%s%-16s %5llu calls  %4llu failed (%3.0f%%)  p50 %s  p95 %s  p99 %s  max %s  %s out%s\n", indent,
                ctx.shown(name).c_str(), tool["calls"].get<unsigned long long>(),
                tool["errors"].get<unsigned long long>(), 100.0 * tool["error_rate"].get<double>(),
                format_ms(tool["p50_ms"].get<double>()).c_str(), format_ms(tool["p95_ms"].get<double>()).c_str(),
                format_ms(tool["p99_ms"].get<double>()).c_str(), format_ms(tool["max_ms"].get<double>()).c_str(),
                format_bytes(tool["output_bytes"].get<uint64_t>()).c_str(), in.c_str());
  };
  auto print = [&ctx, &print_tool](const std::string& title, const nlohmann::json& a) {
    std::printf("%s\n", ctx.shown(title).c_str());
    std::printf("  sessions %llu, turns %llu, model calls %llu (%llu retried)\n",
                a["sessions"].get<unsigned long long>(), a["turns"].get<unsigned long long>(),
                a["model_calls"].get<unsigned long long>(), a["retries"].get<unsigned long long>());
    std::printf("  tokens   %s in, %s out, cache %s read / %s written (%.0f%% of input from cache);  cost %s\n",
                format_count(a["tokens_in"]).c_str(), format_count(a["tokens_out"]).c_str(),
                format_count(a["cache_read"]).c_str(), format_count(a["cache_write"]).c_str(),
                100.0 * a["cache_hit_ratio"].get<double>(), format_cost(a["cost_usd"]).c_str());
    const auto& l = a["latency_ms"];
    std::printf("  model latency  p50 %llu ms, p95 %llu ms, p99 %llu ms, max %llu ms\n",
                l["p50"].get<unsigned long long>(), l["p95"].get<unsigned long long>(),
                l["p99"].get<unsigned long long>(), l["max"].get<unsigned long long>());
    std::printf("  tool calls %llu, %llu failed (%.0f%%)\n", a["tool_calls"].get<unsigned long long>(),
                a["tool_errors"].get<unsigned long long>(), 100.0 * a["tool_error_rate"].get<double>());
    for (const auto& [name, tool] : a["tools"].items()) print_tool(name, tool, "    ");
  };
  print("all" + (args.since.empty() ? std::string() : " (last " + args.since + ")"), tot);
  if (args.group_by == "tool") {
    std::printf("by tool (latency from the request to the result in the log)\n");
    for (const auto& g : stats["groups"]) print_tool(g["key"].get<std::string>(), g, "  ");
    return kExitOk;
  }
  for (const auto& g : stats["groups"]) print(args.group_by + " " + g["key"].get<std::string>(), g);
  return kExitOk;
}

struct AnalyzeArgs {
  std::string session;
  std::string since;
  std::string cache_ttl;  // "": 5 min, or what a breakpoint asked for
  uint64_t cache_min_tokens = 1024;
  uint64_t cache_max_bytes = kCacheMaxBytes;
};

int run_analyze(Context& ctx, const AnalyzeArgs& args) {
  if (args.session.empty() == args.since.empty()) {
    return ctx.usage(Status::invalid_argument("give a session id or --since, not both or neither"),
                    "e.g. `carapace trace analyze <id>` or `carapace trace analyze --since 24h`");
  }
  CacheAnalyzeOptions cache_options{.min_tokens = args.cache_min_tokens};
  if (!args.cache_ttl.empty()) {
    uint64_t ms = 0;
    if (!parse_duration_ms(args.cache_ttl, &ms) || ms == 0) {
      return ctx.usage(Status::invalid_argument("--cache-ttl '" + args.cache_ttl + "' is not a duration"),
                       "e.g. --cache-ttl 5m, 1h, 90s");
    }
    cache_options.ttl_ms = static_cast<int64_t>(ms);
  }
  TraceQuery query;
  if (int rc = open_trace_query(ctx, args.session, args.since, &query); rc != kExitOk) return rc;
  auto& log = query.log;
  auto& store = query.store;
  const auto& sessions = query.sessions;
  Status s;
  // The request bodies, for the cache patterns (a home without any: none).
  std::unique_ptr<BodyStore> bodies;
  if (!BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kReader, &bodies).ok()) bodies.reset();
  nlohmann::json all = nlohmann::json::array();
  size_t total = 0;
  for (const auto& id : sessions) {
    std::vector<Span> spans;
    TraceInfo info;
    s = load_trace(ctx, *log, store.get(), id, &spans, &info);
    if (!s.ok()) {
      if (!args.session.empty()) return no_such_session(ctx, s);
      continue;
    }
    auto findings = analyze_trace(spans, AnalyzeOptions{.crashed_after_seq = info.crashed_after_seq, .session = id});
    // The cache patterns, over the bodies read (at most --cache-max-bytes of them).
    size_t bodies_read = 0, requests_seen = 0;
    bool cut = false;
    if (bodies) {
      std::vector<CacheRequest> requests = cache_requests(spans, bodies.get(), args.cache_max_bytes, &bodies_read);
      requests_seen = requests.size();
      cut = std::any_of(requests.begin(), requests.end(),
                        [](const CacheRequest& r) { return r.regions.error.rfind("not read", 0) == 0; });
      if (cut && !ctx.json) {
        std::fprintf(stderr, "carapace: %s: the cache patterns cover the first %zu of %zu model requests (their "
                             "bodies reach --cache-max-bytes %llu)\n",
                     id.c_str(), bodies_read, requests_seen, static_cast<unsigned long long>(args.cache_max_bytes));
      }
      for (auto& f : analyze_cache(requests, cache_options)) findings.push_back(std::move(f));
    }
    for (auto& f : findings) f.message = ctx.with_home(f.message);
    total += findings.size();
    nlohmann::json list = nlohmann::json::array();
    for (const auto& f : findings) {
      list.push_back({{"pattern", f.pattern}, {"message", f.message}, {"seqs", f.seqs}});
      if (!f.detail.is_null()) list.back()["detail"] = f.detail;
    }
    if (!ctx.json) {
      if (findings.empty() && !args.session.empty()) std::printf("%s: no failure patterns found\n", id.c_str());
      for (const auto& f : findings) {
        std::string seqs;
        for (size_t q = 0; q < f.seqs.size() && q < 12; ++q) seqs += (seqs.empty() ? "" : ",") + std::to_string(f.seqs[q]);
        if (f.seqs.size() > 12) seqs += ",… (--json lists all)";
        std::printf("%s  %-24s %s  (seq %s)\n", id.c_str(), f.pattern.c_str(), ctx.shown(f.message).c_str(),
                    seqs.c_str());
        if (f.pattern == "cache_bust" && f.detail.is_object() && f.seqs.size() == 2) {
          std::printf("    before: %s\n    after:  %s\n    `carapace trace diff --request %s@%llu %llu` shows it whole\n",
                      ctx.shown(f.detail.value("before", "")).c_str(), ctx.shown(f.detail.value("after", "")).c_str(),
                      id.c_str(), static_cast<unsigned long long>(f.seqs[0]),
                      static_cast<unsigned long long>(f.seqs[1]));
        }
      }
    }
    all.push_back({{"session", id}, {"findings", list}});
    if (cut) all.back()["cache_bodies_read"] = {{"read", bodies_read}, {"model_requests", requests_seen}};
  }
  std::string summary = count(total, "finding") + " in " + count(sessions.size(), "session");
  if (ctx.json) {
    ctx.print_success({{"sessions", all}}, summary);
  } else if (args.session.empty()) {
    std::printf("%s\n", summary.c_str());
  }
  return kExitOk;
}

// ---- diff ----

// What a turn did, for comparing two runs: the last span of each turn
// number (a rolled-back attempt at a turn is replaced by its re-run).
struct TurnDigest {
  uint64_t turn = 0;
  uint64_t seq = 0;
  std::string prompt;  // prompt digest
  std::string calls;   // "shell {...} ok; read_file {...} error"
  struct Output {
    std::string tool, args, digest;  // digest "" in spans stored before it was recorded
    uint64_t bytes = 0;
  };
  std::vector<Output> outputs;  // what each call returned, in order
  std::string answer;  // the last model call's outcome
  uint64_t tokens_in = 0, tokens_out = 0;
  nlohmann::json json() const {
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& o : outputs) outs.push_back({{"tool", o.tool}, {"output_digest", o.digest}, {"output_bytes", o.bytes}});
    return {{"turn", turn},     {"seq", seq},           {"prompt_digest", prompt},   {"tool_calls", calls},
            {"outputs", outs},  {"answer", answer},     {"tokens_in", tokens_in},    {"tokens_out", tokens_out}};
  }
};

std::map<uint64_t, TurnDigest> turn_digests(const std::vector<Span>& spans) {
  std::map<uint64_t, TurnDigest> out;
  std::map<std::string, uint64_t> turn_of;  // turn span id -> turn number
  for (const auto& sp : spans) {
    if (sp.kind != kSpanTurn || sp.status == "rolled_back") continue;
    uint64_t t = sp.attrs.value("turn", uint64_t{0});
    TurnDigest d{.turn = t, .seq = sp.open_seq, .prompt = sp.attrs.value("prompt_digest", std::string())};
    d.tokens_in = sp.attrs.value("tokens_in", uint64_t{0});
    d.tokens_out = sp.attrs.value("tokens_out", uint64_t{0});
    out[t] = d;
    turn_of[sp.span_id] = t;
  }
  for (const auto& sp : spans) {
    auto t = turn_of.find(sp.parent_id);
    if (t == turn_of.end()) continue;
    TurnDigest& d = out[t->second];
    if (sp.kind == kSpanTool) {
      if (!d.calls.empty()) d.calls += "; ";
      d.calls += sp.attrs.value("tool", std::string("?")) + " " + sp.attrs.value("args", std::string()) + " " + sp.status;
      d.outputs.push_back({sp.attrs.value("tool", std::string("?")), sp.attrs.value("args", std::string()),
                           sp.attrs.value("output_digest", std::string()), sp.attrs.value("output_bytes", uint64_t{0})});
    } else if (sp.kind == kSpanLlm) {
      d.answer = sp.status == "ok" ? (sp.attrs.value("tool_names", std::string()).empty()
                                          ? "answer of " + std::to_string(sp.attrs.value("text_chars", uint64_t{0})) + " chars"
                                          : "calls " + sp.attrs.value("tool_names", std::string()))
                                   : sp.status;
    }
  }
  return out;
}

struct DiffArgs {
  std::string a, b;
  bool request = false;
};

int run_diff(Context& ctx, const DiffArgs& args) {
  if (args.request) return run_diff_request(ctx, DiffRequestArgs{.a = args.a, .b = args.b});
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  auto store = open_store(ctx);
  std::vector<Span> sa, sb;
  TraceInfo ia, ib;
  Status s = load_trace(ctx, *log, store.get(), args.a, &sa, &ia);
  if (s.ok()) s = load_trace(ctx, *log, store.get(), args.b, &sb, &ib);
  if (!s.ok()) return no_such_session(ctx, s);
  auto da = turn_digests(sa), db = turn_digests(sb);
  std::set<uint64_t> turns;
  for (const auto& [t, d] : da) turns.insert(t);
  for (const auto& [t, d] : db) turns.insert(t);
  nlohmann::json rows = nlohmann::json::array();
  uint64_t first = 0;
  std::string text;
  for (uint64_t t : turns) {
    auto x = da.find(t), y = db.find(t);
    nlohmann::json row{{"turn", t}};
    std::vector<std::string> what;
    if (x == da.end() || y == db.end()) {
      what.push_back(x == da.end() ? "only in " + args.b : "only in " + args.a);
    } else {
      const TurnDigest &p = x->second, &q = y->second;
      if (p.prompt != q.prompt) what.push_back("prompt " + p.prompt.substr(0, 8) + " vs " + q.prompt.substr(0, 8));
      if (p.calls != q.calls) {
        what.push_back("tool calls [" + p.calls + "] vs [" + q.calls + "]");
      } else {
        // The same calls: did they return the same?
        for (size_t i = 0; i < p.outputs.size() && i < q.outputs.size(); ++i) {
          const auto &o = p.outputs[i], &r = q.outputs[i];
          if (o.digest.empty() || r.digest.empty() || o.digest == r.digest) continue;
          what.push_back("output of " + o.tool + " " + o.args + ": " + format_bytes(o.bytes) + " (" +
                         o.digest.substr(0, 8) + ") vs " + format_bytes(r.bytes) + " (" + r.digest.substr(0, 8) + ")");
        }
      }
      if (p.answer != q.answer) what.push_back("model " + p.answer + " vs " + q.answer);
      if (p.tokens_in != q.tokens_in || p.tokens_out != q.tokens_out) {
        what.push_back("tokens " + std::to_string(p.tokens_in) + "/" + std::to_string(p.tokens_out) + " vs " +
                       std::to_string(q.tokens_in) + "/" + std::to_string(q.tokens_out));
      }
    }
    if (x != da.end()) row["a"] = x->second.json();
    if (y != db.end()) row["b"] = y->second.json();
    row["same"] = what.empty();
    row["differences"] = what;
    rows.push_back(row);
    if (!what.empty() && first == 0) first = t;
    std::string line = "turn " + std::to_string(t) + "  ";
    if (what.empty()) {
      line += "same: " + (x->second.calls.empty() ? x->second.answer : x->second.calls);
    } else {
      line += (first == t ? "FIRST DIFFERENCE: " : "differs: ");
      for (size_t i = 0; i < what.size(); ++i) line += (i ? "; " : "") + what[i];
    }
    text += line + "\n";
  }
  std::string summary = first == 0 ? args.a + " and " + args.b + " did the same in " + count(turns.size(), "turn")
                                   : args.a + " and " + args.b + " part at turn " + std::to_string(first);
  if (ctx.json) {
    ctx.print_success({{"a", args.a}, {"b", args.b}, {"turns", rows}, {"first_difference", first}}, summary);
  } else {
    text = ctx.shown(text);
    std::fputs(text.c_str(), stdout);
    std::printf("%s\n", summary.c_str());
  }
  return kExitOk;
}

// ---- tail ----

struct TailArgs {
  std::string session;
  bool all = false;
  bool exit_when_done = false;
  uint64_t interval_ms = 100;
};

int run_tail(Context& ctx, const TailArgs& args) {
  if (args.session.empty() == !args.all) {
    return ctx.usage(Status::invalid_argument("give a session id or --all, not both or neither"));
  }
  if (!args.session.empty()) {
    Status valid = keys::validate_session_id(args.session);
    if (!valid.ok()) return ctx.fail(valid);
  }
  arm_stop_signals();
  // A home not written yet: wait for its log, saying so once.
  std::unique_ptr<EventLog> log;
  bool said_waiting = false;  // for the log, or for a session that has not started (or a mistyped id)
  for (bool& said = said_waiting;;) {
    Status s = EventLog::open(EventLog::Options{.path = ctx.log_path(), .mode = EventLog::Mode::kReader}, &log);
    if (s.ok()) break;
    if (!s.is_not_found()) return ctx.fail(s);
    if (!said) {
      std::fprintf(stderr, "carapace trace tail: no event log in %s yet; waiting for one (Ctrl-C stops)\n",
                   ctx.shown(ctx.home()).c_str());
      said = true;
    }
    if (stop_signal() != 0) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
  }
  // Where each session is shown up to. With --all, sessions there at the start are followed from their end.
  std::map<std::string, uint64_t> shown;
  bool first_pass = true;
  int failed_refreshes = 0;
  for (;;) {
    Status s = log->refresh();
    if (!s.ok()) {
      // The writer may have just closed (its WAL files go): open the log
      // again; only a failure that persists is reported.
      if (++failed_refreshes > 20) return ctx.fail(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
      std::unique_ptr<EventLog> reopened;
      if (EventLog::open(EventLog::Options{.path = ctx.log_path(), .mode = EventLog::Mode::kReader}, &reopened)
              .ok()) {
        log = std::move(reopened);
      }
      continue;
    }
    failed_refreshes = 0;
    std::vector<std::string> ids;
    if (args.all) {
      std::vector<SessionMeta> metas;
      std::vector<std::string> unreadable;
      if (log->list_sessions(&metas, &unreadable).ok()) {
        for (const auto& m : metas) ids.push_back(m.id);
      }
    } else {
      ids.push_back(args.session);
    }
    bool done = false;
    for (const auto& id : ids) {
      uint64_t& from = shown[id];
      if (first_pass && args.all) (void)log->last_seq(id, &from);
      std::vector<Event> events;
      uint64_t last = 0;
      if (Status known = log->last_seq(id, &last); !known.ok() || last == 0) {
        if (!args.all && !said_waiting && from == 0) {
          std::fprintf(stderr, "%s\n",
                       ctx.shown(ctx.with_home("carapace trace tail: no session " + id + " in " + ctx.home() +
                                               " yet; waiting for it to start (Ctrl-C stops; `carapace sessions` "
                                               "lists those there)"))
                           .c_str());
          said_waiting = true;
        }
        continue;
      }
      if (last <= from) continue;
      (void)log->read(id, from + 1, last, &events);
      for (const auto& e : events) {
        if (ctx.json) {
          nlohmann::json j = event_to_json(e);
          j["session"] = id;
          redact_json(j, ctx.redactor());
          std::printf("%s\n", json_terminal_safe(dump(j)).c_str());
        } else {
          std::printf("%s  %6llu  %s  %-18s %s\n", id.c_str(), static_cast<unsigned long long>(e.seq),
                      local_time(e.ts_us).c_str(), std::string(e.type_name()).c_str(),
                      ctx.shown(event_summary(e)).c_str());
        }
        from = e.seq;
        if (get_if<SessionCompleted>(e) || get_if<SessionFailed>(e)) done = true;
      }
      std::fflush(stdout);
    }
    first_pass = false;
    if ((done && args.exit_when_done && !args.all) || stop_signal() != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
  }
  return kExitOk;
}

}  // namespace

void register_trace_commands(CLI::App& app, Context& ctx) {
  auto* trace = app.add_subcommand("trace", "Look at a session as a trace: its skeleton, one span, stats, failure patterns");
  trace->require_subcommand(1);

  auto show_args = std::make_shared<ShowArgs>();
  auto* show = trace->add_subcommand("show", "The skeleton of a session: one line per span, nested");
  show->add_option("session", show_args->session, "Session id")->required();
  show->add_flag("--full", show_args->full, "Show every turn whole (no collapsing)");
  add_json_flag(show, ctx);
  show->callback([&ctx, show_args] { ctx.run = [&ctx, show_args] { return run_show(ctx, *show_args); }; });

  auto span_args = std::make_shared<SpanArgs>();
  auto* span = trace->add_subcommand("span", "One span's attributes and its verbatim request and response bodies");
  span->add_option("session", span_args->session, "Session id")->required();
  span->add_option("span", span_args->handle, "The seq `trace show` prints before the span (14, 14:hook), or its id")
      ->required();
  span->add_flag("--raw", span_args->raw, "Bodies as the exact bytes (with --body: those bytes alone)");
  span->add_option("--body", span_args->body, "Only this body: request or response");
  add_json_flag(span, ctx);
  span->callback([&ctx, span_args] { ctx.run = [&ctx, span_args] { return run_span(ctx, *span_args); }; });

  auto stats_args = std::make_shared<StatsArgs>();
  auto* stats = trace->add_subcommand("stats", "Tokens, cost, latency, tool usage and errors, retries");
  stats->add_option("session", stats_args->session, "One session (default: every session)");
  stats->add_option("--since", stats_args->since, "Only what started in this window: 90s, 30m, 24h, 7d");
  stats->add_option("--group-by", stats_args->group_by, "Also per model, tool, session or day")
      ->check(CLI::IsMember({"model", "tool", "session", "day"}));
  add_json_flag(stats, ctx);
  stats->callback([&ctx, stats_args] { ctx.run = [&ctx, stats_args] { return run_stats(ctx, *stats_args); }; });

  auto analyze_args = std::make_shared<AnalyzeArgs>();
  auto* analyze = trace->add_subcommand("analyze", "Failure patterns, each with the seqs that show it");
  analyze->add_option("session", analyze_args->session, "Session id");
  analyze->add_option("--since", analyze_args->since, "Every session updated in this window: 90s, 30m, 24h, 7d");
  analyze->add_option("--cache-ttl", analyze_args->cache_ttl,
                      "The prompt cache's lifetime for ttl_lapse (default 5m, or 1h where a breakpoint asked for it)");
  analyze->add_option("--cache-min-tokens", analyze_args->cache_min_tokens,
                      "The shortest prefix a provider caches, for provider_miss (at 4 bytes a token)")
      ->capture_default_str();
  analyze->add_option("--cache-max-bytes", analyze_args->cache_max_bytes,
                      "Read at most this many bytes of a session's request bodies for the cache patterns")
      ->capture_default_str();
  add_json_flag(analyze, ctx);
  auto diff_args = std::make_shared<DiffArgs>();
  auto* diff = trace->add_subcommand(
      "diff", "Two runs turn by turn, the first point where they part highlighted; or two model requests (--request)");
  diff->add_option("a", diff_args->a, "Session id (e.g. the parent); with --request SESSION@SEQ")->required();
  diff->add_option("b", diff_args->b, "Session id (e.g. the fork); with --request SESSION@SEQ, or SEQ")->required();
  diff->add_flag("--request", diff_args->request,
                 "Compare two model requests region by region: where their cacheable prefixes part, byte by byte");
  add_json_flag(diff, ctx);
  diff->callback([&ctx, diff_args] { ctx.run = [&ctx, diff_args] { return run_diff(ctx, *diff_args); }; });

  auto tail_args = std::make_shared<TailArgs>();
  auto* tail = trace->add_subcommand("tail", "Live: one line per event as it is appended (from another process)");
  tail->add_option("session", tail_args->session, "Session id (from its first event)");
  tail->add_flag("--all", tail_args->all, "Every session (new events only)");
  tail->add_flag("--exit-when-done", tail_args->exit_when_done, "Stop once the session completes or fails");
  tail->add_option("--interval-ms", tail_args->interval_ms, "Time between polls")->capture_default_str()->check(
      CLI::Range(10, 60'000));
  add_json_flag(tail, ctx);
  tail->callback([&ctx, tail_args] { ctx.run = [&ctx, tail_args] { return run_tail(ctx, *tail_args); }; });
  analyze->callback(
      [&ctx, analyze_args] { ctx.run = [&ctx, analyze_args] { return run_analyze(ctx, *analyze_args); }; });
  register_trace_export_command(*trace, ctx);
}

}  // namespace carapace::cli
