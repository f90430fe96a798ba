// carapace trace export: a session's trace (or every session's in a
// window) as OTLP/JSON, Perfetto trace events, HTML, Markdown, JSON or
// NDJSON; to stdout, a file, or an OTLP/HTTP receiver (docs/trace.md, "Export").
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "actors/collector/export.h"
#include "actors/collector/export_content.h"
#include "actors/collector/otlp_sender.h"
#include "storage/body_store.h"
#include "tools/cli.h"
#include "tools/trace_cache.h"
#include "tools/trace_load.h"

#ifndef CARAPACE_VERSION
#define CARAPACE_VERSION "unknown"
#endif

namespace carapace::cli {
namespace {

struct ExportArgs {
  std::string session;
  std::string since;
  std::string format;
  std::string output;
  std::string endpoint;
  bool with_content = false;
  int attempts = 5;
};

// Writes `text` to `path` whole or not at all (a temporary file renamed).
Status write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".carapace-tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Status::io_error("cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::io_error("cannot write " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::io_error("cannot write " + path + ": " + std::strerror(err));
  }
  return Status();
}

int run_export(Context& ctx, const ExportArgs& args) {
  if (args.session.empty() == args.since.empty()) {
    return ctx.usage(Status::invalid_argument("give a session id or --since, not both or neither"),
                    "e.g. `carapace trace export <id> --format otlp` or `carapace trace export --since 24h --format html`");
  }
  if (!args.endpoint.empty() && args.format != "otlp") {
    return ctx.usage(Status::invalid_argument("--endpoint sends OTLP: it needs --format otlp, not " + args.format),
                     "add --format otlp, or drop --endpoint and write the " + args.format + " export with -o FILE");
  }
  if (!args.endpoint.empty()) {
    std::string url;
    Status valid = otlp_traces_url(args.endpoint, &url);
    if (!valid.ok()) return ctx.fail(valid, "e.g. --endpoint http://localhost:4318 (an OTLP/HTTP receiver)");
  }
  if (ctx.json && args.output.empty() && args.endpoint.empty()) {
    return ctx.usage(Status::invalid_argument("--json needs -o FILE or --endpoint: the export itself goes to stdout"),
                     "drop --json to print the export, or add -o FILE to write it there and get the summary as JSON");
  }
  TraceQuery query;
  if (int rc = open_trace_query(ctx, args.session, args.since, &query); rc != kExitOk) return rc;
  auto& log = query.log;
  auto& store = query.store;
  const auto& sessions = query.sessions;
  Status s;

  ExportInput input;
  input.with_content = args.with_content;
  input.service_version = CARAPACE_VERSION;
  const Redactor& redactor = ctx.redactor();
  input.redact = [&redactor](std::string text) { return redactor(std::move(text)); };
  std::unique_ptr<BodyStore> bodies;
  const bool have_bodies = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kReader, &bodies).ok();
  size_t span_count = 0;
  std::vector<std::string> warnings;
  for (const auto& id : sessions) {
    std::vector<Span> spans;
    TraceInfo info;
    s = load_trace(ctx, *log, store.get(), id, &spans, &info);
    if (!s.ok()) {
      if (!args.session.empty()) return no_such_session(ctx, s);
      continue;
    }
    if (!info.warning.empty()) warnings.push_back(id + ": " + info.warning);
    // Each model request's cache prefix, from the bytes it sent (docs/trace.md,
    // "Why did my cache miss?").
    if (have_bodies) annotate_cache_prefixes(&spans, *bodies);
    // Response bodies name the response's id and model; request bodies hold
    // the input messages (content).
    std::map<std::string, std::string> session_bodies;
    for (const auto& sp : spans) {
      if (!have_bodies) break;
      for (const char* which : {"response_body", "request_body"}) {
        if (!args.with_content && std::string(which) == "request_body") continue;
        std::string ref = sp.attrs.value(which, std::string());
        std::string text;
        if (!ref.empty() && bodies->get(ref, &text).ok()) session_bodies[ref] = std::move(text);
      }
    }
    if (args.with_content) {
      std::vector<Event> events;
      Status read = log->read(id, 1, info.last_seq, &events);
      if (!read.ok()) warnings.push_back(id + ": content stops at a damaged record: " + read.message());
      collect_content(spans, events, session_bodies, &input.content);
    }
    input.bodies.merge(session_bodies);
    span_count += spans.size();
    input.traces.push_back(std::move(spans));
  }
  if (input.traces.empty()) {
    return ctx.fail(Status::not_found("no session was updated in the last " + args.since + " in " + ctx.home()),
                    "`carapace sessions` lists the sessions there");
  }
  std::string text;
  s = export_trace(args.format, input, &text);
  if (!s.ok()) return ctx.fail(s);
  for (const auto& w : warnings) std::fprintf(stderr, "%s\n", ctx.shown("carapace: " + w).c_str());

  const std::string what = count(span_count, "span") + " of " + count(input.traces.size(), "session") + " as " + args.format;
  nlohmann::json data{{"format", args.format}, {"sessions", sessions.size()}, {"spans", span_count},
                      {"bytes", text.size()}, {"with_content", args.with_content}};
  std::string summary = "exported " + what;
  if (!args.output.empty()) {
    s = write_file(args.output, text);
    if (!s.ok()) return ctx.fail(s, "-o names the file to write; its directory must exist and be writable");
    data["output"] = args.output;
    summary += " to " + args.output;
  }
  if (!args.endpoint.empty()) {
    OtlpSendOptions options{.endpoint = args.endpoint, .max_attempts = args.attempts};
    options.on_retry = [&ctx](int attempt, uint64_t delay_ms, const std::string& why) {
      if (!ctx.json) {
        std::fprintf(stderr, "%s\n",
                     ctx.shown("carapace: the OTLP receiver answered " + why + "; attempt " +
                               std::to_string(attempt) + " in " + std::to_string(delay_ms) + " ms")
                         .c_str());
      }
    };
    OtlpSendReport report;
    s = otlp_send(options, text, &report);
    if (!s.ok()) return ctx.fail(s, s.is_invalid_argument() ? "the receiver's answer says what it did not accept" : "");
    data["endpoint"] = report.url;
    data["http_status"] = report.status;
    data["attempts"] = report.attempts;
    summary = "sent " + what + " to " + report.url + " (HTTP " + std::to_string(report.status) + ", " +
              count(static_cast<uint64_t>(report.attempts), "attempt") + ")" +
              (args.output.empty() ? "" : "; wrote " + args.output);
  }
  if (ctx.json) {
    ctx.print_success(data, summary);
  } else if (args.output.empty() && args.endpoint.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    std::printf("%s\n", ctx.shown(summary).c_str());
  }
  return kExitOk;
}

}  // namespace

void register_trace_export_command(CLI::App& trace, Context& ctx) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = trace.add_subcommand(
      "export", "A trace as OTLP/JSON, Perfetto trace events, self-contained HTML, Markdown, JSON or NDJSON");
  cmd->add_option("session", args->session, "Session id");
  cmd->add_option("--since", args->since, "Every session updated in this window: 90s, 30m, 24h, 7d");
  cmd->add_option("--format,-f", args->format, "otlp, perfetto, html, md, json or ndjson")
      ->required()
      ->check(CLI::IsMember({"otlp", "perfetto", "html", "md", "json", "ndjson"}));
  cmd->add_option("-o,--output", args->output, "Write to this file (default: stdout)");
  cmd->add_flag("--with-content", args->with_content,
                "Include message content and verbatim bodies (redacted; otherwise left out)");
  cmd->add_option("--endpoint", args->endpoint,
                  "POST the OTLP export to this OTLP/HTTP receiver (/v1/traces is added when the URL has no path)");
  cmd->add_option("--attempts", args->attempts, "Tries at most this many times on 429/502/503/504 or no connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_export(ctx, *args); }; });
}

}  // namespace carapace::cli
