// carapace collector: the collector out of process (docs/trace.md).
#include <chrono>
#include <cstdio>
#include <thread>

#include "actors/collector/export_otlp.h"
#include "actors/collector/log_follower.h"
#include "actors/collector/otlp_sender.h"
#include "storage/body_store.h"
#include "tools/cli.h"
#include "tools/trace_cache.h"
#include "tools/stop_signals.h"

namespace carapace::cli {
namespace {

struct CollectorArgs {
  uint64_t interval_ms = 200;
  bool once = false;
  std::string otlp_endpoint;
};

#ifndef CARAPACE_VERSION
#define CARAPACE_VERSION "unknown"
#endif

// Sends the spans a poll closed to the OTLP receiver; a failure is a warning
// (the spans are in the trace store; `trace export --endpoint` sends them again).
struct OtlpStream {
  const Context& ctx;
  std::string endpoint;
  uint64_t sent = 0;
  uint64_t failed = 0;

  void send(const FollowReport& report) {
    if (report.finished.empty()) return;
    ExportInput input;
    input.service_version = CARAPACE_VERSION;
    const Redactor& redactor = ctx.redactor();
    input.redact = [&redactor](std::string text) { return redactor(std::move(text)); };
    input.roots = report.roots;
    std::unique_ptr<BodyStore> bodies;
    const bool have_bodies = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kReader, &bodies).ok();
    size_t n = 0;
    for (const auto& [session, finished] : report.finished) {
      std::vector<Span> spans = finished;
      for (const auto& sp : spans) {
        std::string ref = sp.attrs.value("response_body", std::string()), text;
        if (have_bodies && !ref.empty() && bodies->get(ref, &text).ok()) input.bodies[ref] = std::move(text);
      }
      if (have_bodies) annotate_cache_prefixes(&spans, *bodies);  // as `trace export` does
      n += spans.size();
      input.traces.push_back(std::move(spans));
    }
    OtlpSendOptions options{.endpoint = endpoint, .max_attempts = 3};
    OtlpSendReport sent_report;
    Status s = otlp_send(options, export_otlp(input), &sent_report);
    if (s.ok()) {
      sent += n;
      return;
    }
    failed += n;
    std::fprintf(stderr, "%s\n",
                 ctx.shown("collector: " + count(n, "span") + " not sent: " + s.message()).c_str());
  }
};

int run_collector(Context& ctx, const CollectorArgs& args) {
  std::unique_ptr<LogFollower> follower;
  arm_stop_signals();
  // Streaming: a running `carapace run` collects in its own process and
  // holds the store; its spans are streamed from here all the same, and the
  // store taken over when it ends.
  const bool stream_beside = !args.otlp_endpoint.empty();
  // The home is checked as every command checks it (runtime/home.h), each
  // time: one that appears later must be as trustworthy.
  auto open = [&]() -> Status {
    CARAPACE_RETURN_IF_ERROR(ctx.prepare_home(/*create=*/false));
    return LogFollower::open(ctx.home(), &follower, stream_beside);
  };
  Status s = open();
  if (s.ok() && !follower->writes_store() && !ctx.json) {
    std::fprintf(stderr, "collector: the trace store is held by another process (a running carapace's own "
                         "collector); streaming its spans, and writing the store once it is free\n");
  }
  // Otherwise wait for it to end (or die), then take over from where it got;
  // and a collector started before the first session (as a daemon is)
  // waits for the home and its log to appear.
  for (bool said_busy = false, said_missing = false;
       (s.is_busy() || s.is_not_found()) && !args.once && stop_signal() == 0;) {
    if (s.is_busy() && !said_busy && !ctx.json) {
      std::fprintf(stderr, "collector: the trace store is held by another process (a running carapace's own "
                           "collector); waiting for it to end\n");
      said_busy = true;
    }
    if (s.is_not_found() && !said_missing && !ctx.json) {
      std::fprintf(stderr,
                   "collector: no event log in %s yet; waiting for the first session (SIGINT or SIGTERM "
                   "stops it)\n",
                   ctx.home().c_str());
      said_missing = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
    s = open();
  }
  if (!s.ok()) {
    if (s.is_busy()) return ctx.fail(s, "another collector (or a running `carapace run`) writes the trace store");
    if (s.is_not_found()) return ctx.fail(s, "nothing has been written to " + ctx.home() + " yet");
    return ctx.fail(s);
  }
  if (stop_signal() != 0) return kExitOk;
  OtlpStream stream{ctx, args.otlp_endpoint};
  if (!args.otlp_endpoint.empty()) {
    std::string url;
    Status valid = otlp_traces_url(args.otlp_endpoint, &url);
    if (!valid.ok()) return ctx.fail(valid, "e.g. --otlp-endpoint http://localhost:4318 (an OTLP/HTTP receiver)");
    follower->report_finished(true);
  }
  if (!ctx.json && !args.once) {
    std::fprintf(stderr, "collector: following %s/log into %s/traces (SIGINT or SIGTERM stops it)\n",
                 ctx.home().c_str(), ctx.home().c_str());
  }
  FollowReport total;
  nlohmann::json crashed = nlohmann::json::array();
  for (;;) {
    FollowReport report;
    s = follower->poll(&report);
    if (!s.ok()) return ctx.fail(s);
    total.events += report.events;
    total.spans += report.spans;
    if (!args.otlp_endpoint.empty()) stream.send(report);
    for (const auto& [id, seq] : report.crashed) {
      crashed.push_back({{"session", id}, {"crashed_after_seq", seq}});
      if (!ctx.json) {
        std::printf("session %s: crashed after seq %llu (its writer is gone)\n", id.c_str(),
                    static_cast<unsigned long long>(seq));
        std::fflush(stdout);
      }
    }
    if (args.once || stop_signal() != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
  }
  std::string summary = "folded " + count(total.events, "event") + ", wrote " + count(total.spans, "span");
  if (!args.otlp_endpoint.empty()) {
    summary += ", sent " + count(stream.sent, "span") + " to " + url_for_display(args.otlp_endpoint) +
               (stream.failed ? " (" + std::to_string(stream.failed) + " not sent)" : "");
  }
  if (ctx.json) {
    nlohmann::json data{{"events", total.events}, {"spans", total.spans}, {"crashed", crashed}};
    if (!args.otlp_endpoint.empty()) {
      data["otlp_sent"] = stream.sent;
      data["otlp_failed"] = stream.failed;
    }
    ctx.print_success(data, summary);
  } else {
    std::printf("%s\n", summary.c_str());
  }
  return kExitOk;
}

}  // namespace

void register_collector_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<CollectorArgs>();
  auto* cmd = app.add_subcommand(
      "collector", "Follow the home's log from this process, build its spans into the trace store, mark crashed runs");
  cmd->add_option("--interval-ms", args->interval_ms, "Time between polls")->capture_default_str()->check(
      CLI::Range(10, 60'000));
  cmd->add_flag("--once", args->once, "One pass, then exit");
  cmd->add_option("--otlp-endpoint", args->otlp_endpoint,
                  "Also send each span as it closes to this OTLP/HTTP receiver (OTLP/JSON, /v1/traces)");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_collector(ctx, *args); }; });
}

}  // namespace carapace::cli
