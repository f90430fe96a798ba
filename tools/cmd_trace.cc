// carapace trace show | span | stats | analyze (docs/trace.md)
#include <cstdio>
#include <ctime>
#include <iostream>

#include "actors/collector/span_builder.h"
#include "actors/collector/trace_analyze.h"
#include "actors/collector/trace_stats.h"
#include "actors/collector/trace_view.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "storage/trace_store.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

struct TraceInfo {
  std::string source;  // store, or log
  uint64_t last_seq = 0;
  uint64_t dropped = 0;
  uint64_t crashed_after_seq = 0;
  std::string warning;  // a damaged record cut the trace short
};

// The session's spans: from the trace store when the collector has folded
// every event the log holds, else built from the log now (the same spans).
Status load_trace(const Context& ctx, const EventLog& log, const TraceStore* store, const std::string& session,
                  std::vector<Span>* spans, TraceInfo* info) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(session));
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log.last_seq(session, &last));
  if (last == 0) return Status::not_found("no session '" + session + "' in " + ctx.home());
  info->last_seq = last;
  TraceProgress progress;
  if (store != nullptr && store->progress(session, &progress).ok()) {
    info->dropped = progress.dropped;
    info->crashed_after_seq = progress.crashed_after_seq;
    if (progress.last_seq == last) {
      std::vector<std::string> values;
      bool good = store->spans_of(session, &values).ok() && !values.empty();
      std::vector<Span> stored;
      for (const auto& v : values) {
        Span sp;
        auto j = nlohmann::json::parse(v, nullptr, false);
        if (!good || !span_from_json(j, &sp).ok()) {
          good = false;
          break;
        }
        stored.push_back(std::move(sp));
      }
      if (good) {
        *spans = std::move(stored);
        info->source = "store";
        return Status();
      }
    }
  }
  std::vector<Event> events;
  Status read = log.read(session, 1, last, &events);
  if (!read.ok()) {
    if (events.empty()) return read;
    info->warning = "the trace stops at a damaged record: " + read.message();
  }
  *spans = build_spans(session, events);
  info->source = "log";
  return Status();
}

// The trace store, if the home has one (nullptr otherwise).
std::unique_ptr<TraceStore> open_store(const Context& ctx) {
  std::unique_ptr<TraceStore> store;
  if (!TraceStore::open(ctx.home() + "/traces", TraceStore::Mode::kReader, &store).ok()) return nullptr;
  return store;
}

int no_such_session(const Context& ctx, const Status& s) {
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  return ctx.fail(s);
}

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
                        {"status", spans[0].status},      {"source", info.source},
                        {"last_seq", info.last_seq},      {"dropped_events", info.dropped},
                        {"spans", list}};
    if (options.crashed_after_seq) data["crashed_after_seq"] = options.crashed_after_seq;
    if (!info.warning.empty()) data["warning"] = info.warning;
    ctx.print_success(data, summary);
  } else {
    std::fputs(text.c_str(), stdout);
    if (!info.warning.empty()) std::fprintf(stderr, "carapace: %s\n", info.warning.c_str());
  }
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
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded()) return dump(j, 2);
  // Server-sent events: each data line that is JSON, pretty on one line each.
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(at, end - at);
    if (line.rfind("data: ", 0) == 0) {
      auto d = nlohmann::json::parse(line.substr(6), nullptr, false);
      if (!d.is_discarded()) line = "data: " + dump(d);
    }
    out += line + "\n";
    at = end + 1;
  }
  return out;
}

int run_span(Context& ctx, const SpanArgs& args) {
  if (!args.body.empty() && args.body != "request" && args.body != "response") {
    return ctx.fail(Status::invalid_argument("--body '" + args.body + "' is not request or response"));
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
  if (!args.body.empty() && found.empty()) {
    return ctx.fail(Status::not_found("span " + args.handle + " (" + sp.name + ") has no " + args.body + " body"),
                    "only model calls to HTTP providers keep bodies");
  }
  if (ctx.json) {
    nlohmann::json data = span_to_json(sp);
    for (const auto& b : found) {
      if (!b.error.empty()) {
        data[b.which + "_body_error"] = b.error;
      } else {
        auto parsed = nlohmann::json::parse(b.text, nullptr, false);
        data[b.which + "_body_text"] = b.text;
        if (!parsed.is_discarded() && !args.raw) data[b.which + "_body_json"] = parsed;
      }
    }
    ctx.print_success(data, sp.name + " of session " + args.session + ": " + sp.status);
    return kExitOk;
  }
  if (args.raw && !args.body.empty()) {  // the exact bytes alone, for a pipe
    if (!found[0].error.empty()) return ctx.fail(Status::not_found(found[0].error));
    std::fwrite(found[0].text.data(), 1, found[0].text.size(), stdout);
    return kExitOk;
  }
  std::printf("%s  (%s, span %s, trace %s)\n", sp.name.c_str(), sp.kind.c_str(), sp.span_id.c_str(),
              sp.trace_id.c_str());
  std::printf("  status    %s\n  seqs      %llu-%s\n  started   %s\n", sp.status.c_str(),
              static_cast<unsigned long long>(sp.open_seq),
              sp.open() ? "(open)" : std::to_string(sp.close_seq).c_str(), local_time(sp.start_us).c_str());
  if (!sp.open()) std::printf("  duration  %s\n", format_duration_us(sp.end_us - sp.start_us).c_str());
  if (!sp.parent_id.empty()) std::printf("  parent    %s\n", sp.parent_id.c_str());
  for (const auto& [key, value] : sp.attrs.items()) {
    std::printf("  %-18s %s\n", key.c_str(), value.is_string() ? value.get<std::string>().c_str() : dump(value).c_str());
  }
  for (const auto& e : sp.events) std::printf("  event #%llu %s %s\n", static_cast<unsigned long long>(e.seq), e.name.c_str(), dump(e.attrs).c_str());
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
    std::string shown = args.raw ? b.text : pretty(b.text);
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    if (shown.empty() || shown.back() != '\n') std::fputs("\n", stdout);
  }
  return kExitOk;
}

// ---- stats and analyze over one or many sessions ----

// "24h", "30m", "7d", "90s" → microseconds; false on anything else.
bool parse_since(const std::string& text, int64_t* us) {
  if (text.size() < 2) return false;
  char unit = text.back();
  std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return false;
  int64_t n = std::stoll(digits);
  int64_t mult = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 0;
  if (mult == 0) return false;
  *us = n * mult * 1'000'000;
  return true;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The sessions a query covers: `session`, or every session updated since `since_us`.
Status sessions_for(const Context& ctx, const EventLog& log, const std::string& session, int64_t since_us,
                    std::vector<std::string>* out) {
  if (!session.empty()) {
    out->push_back(session);
    return Status();
  }
  std::vector<SessionMeta> metas;
  std::vector<std::string> unreadable;
  CARAPACE_RETURN_IF_ERROR(log.list_sessions(&metas, &unreadable));
  for (const auto& m : metas) {
    if (m.updated_us >= since_us || m.created_us >= since_us || since_us == 0) out->push_back(m.id);
  }
  (void)ctx;
  return Status();
}

struct StatsArgs {
  std::string session;
  std::string since;
  std::string group_by;
};

int run_stats(Context& ctx, const StatsArgs& args) {
  int64_t window = 0;
  if (!args.since.empty() && !parse_since(args.since, &window)) {
    return ctx.fail(Status::invalid_argument("--since '" + args.since + "' is not a duration"),
                    "durations look like 90s, 30m, 24h or 7d");
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  auto store = open_store(ctx);
  const int64_t since_us = window ? now_us() - window : 0;
  std::vector<std::string> sessions;
  Status s = sessions_for(ctx, *log, args.session, since_us, &sessions);
  if (!s.ok()) return ctx.fail(s);
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
  auto print = [](const std::string& title, const nlohmann::json& a) {
    std::printf("%s\n", title.c_str());
    std::printf("  sessions %llu, turns %llu, model calls %llu (%llu retried)\n",
                a["sessions"].get<unsigned long long>(), a["turns"].get<unsigned long long>(),
                a["model_calls"].get<unsigned long long>(), a["retries"].get<unsigned long long>());
    std::printf("  tokens   %s in, %s out, cache %s read / %s written;  cost %s\n",
                format_count(a["tokens_in"]).c_str(), format_count(a["tokens_out"]).c_str(),
                format_count(a["cache_read"]).c_str(), format_count(a["cache_write"]).c_str(),
                format_cost(a["cost_usd"]).c_str());
    const auto& l = a["latency_ms"];
    std::printf("  model latency  p50 %llu ms, p95 %llu ms, p99 %llu ms, max %llu ms\n",
                l["p50"].get<unsigned long long>(), l["p95"].get<unsigned long long>(),
                l["p99"].get<unsigned long long>(), l["max"].get<unsigned long long>());
    std::printf("  tool calls %llu, %llu failed (%.0f%%)\n", a["tool_calls"].get<unsigned long long>(),
                a["tool_errors"].get<unsigned long long>(), 100.0 * a["tool_error_rate"].get<double>());
    for (const auto& [name, tool] : a["tools"].items()) {
      std::printf("    %-16s %5llu calls  %4llu failed (%3.0f%%)  p50 %llu ms  p95 %llu ms\n", name.c_str(),
                  tool["calls"].get<unsigned long long>(), tool["errors"].get<unsigned long long>(),
                  100.0 * tool["error_rate"].get<double>(), tool["p50_ms"].get<unsigned long long>(),
                  tool["p95_ms"].get<unsigned long long>());
    }
  };
  print("all" + (args.since.empty() ? std::string() : " (last " + args.since + ")"), tot);
  for (const auto& g : stats["groups"]) print(args.group_by + " " + g["key"].get<std::string>(), g);
  return kExitOk;
}

struct AnalyzeArgs {
  std::string session;
  std::string since;
};

int run_analyze(Context& ctx, const AnalyzeArgs& args) {
  if (args.session.empty() == args.since.empty()) {
    return ctx.fail(Status::invalid_argument("give a session id or --since, not both or neither"),
                    "e.g. `carapace trace analyze <id>` or `carapace trace analyze --since 24h`");
  }
  int64_t window = 0;
  if (!args.since.empty() && !parse_since(args.since, &window)) {
    return ctx.fail(Status::invalid_argument("--since '" + args.since + "' is not a duration"),
                    "durations look like 90s, 30m, 24h or 7d");
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  auto store = open_store(ctx);
  std::vector<std::string> sessions;
  Status s = sessions_for(ctx, *log, args.session, window ? now_us() - window : 0, &sessions);
  if (!s.ok()) return ctx.fail(s);
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
    auto findings = analyze_trace(spans);
    total += findings.size();
    nlohmann::json list = nlohmann::json::array();
    for (const auto& f : findings) list.push_back({{"pattern", f.pattern}, {"message", f.message}, {"seqs", f.seqs}});
    if (!ctx.json) {
      if (findings.empty() && !args.session.empty()) std::printf("%s: no failure patterns found\n", id.c_str());
      for (const auto& f : findings) {
        std::string seqs;
        for (size_t q = 0; q < f.seqs.size() && q < 12; ++q) seqs += (seqs.empty() ? "" : ",") + std::to_string(f.seqs[q]);
        if (f.seqs.size() > 12) seqs += ",… (--json lists all)";
        std::printf("%s  %-24s %s  (seq %s)\n", id.c_str(), f.pattern.c_str(), f.message.c_str(), seqs.c_str());
      }
    }
    all.push_back({{"session", id}, {"findings", list}});
  }
  std::string summary = count(total, "finding") + " in " + count(sessions.size(), "session");
  if (ctx.json) {
    ctx.print_success({{"sessions", all}}, summary);
  } else if (args.session.empty()) {
    std::printf("%s\n", summary.c_str());
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
  add_json_flag(analyze, ctx);
  analyze->callback(
      [&ctx, analyze_args] { ctx.run = [&ctx, analyze_args] { return run_analyze(ctx, *analyze_args); }; });
}

}  // namespace carapace::cli
