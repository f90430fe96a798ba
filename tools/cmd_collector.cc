// carapace collector: the collector out of process (docs/trace.md).
#include <chrono>
#include <cstdio>
#include <thread>

#include "actors/collector/log_follower.h"
#include "tools/cli.h"
#include "tools/stop_signals.h"

namespace carapace::cli {
namespace {

struct CollectorArgs {
  uint64_t interval_ms = 200;
  bool once = false;
};

int run_collector(Context& ctx, const CollectorArgs& args) {
  std::unique_ptr<LogFollower> follower;
  arm_stop_signals();
  Status s = LogFollower::open(ctx.home(), &follower);
  // A running `carapace run` collects in its own process and holds the
  // store: wait for it to end (or die), then take over from where it got.
  for (bool said = false; s.is_busy() && !args.once && stop_signal() == 0;) {
    if (!said && !ctx.json) {
      std::fprintf(stderr, "collector: the trace store is held by another process (a running carapace's own "
                           "collector); waiting for it to end\n");
    }
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
    s = LogFollower::open(ctx.home(), &follower);
  }
  if (!s.ok()) {
    if (s.is_busy()) return ctx.fail(s, "another collector (or a running `carapace run`) writes the trace store");
    if (s.is_not_found()) return ctx.fail(s, "nothing has been written to " + ctx.home() + " yet");
    return ctx.fail(s);
  }
  if (stop_signal() != 0) return kExitOk;
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
  if (ctx.json) {
    ctx.print_success({{"events", total.events}, {"spans", total.spans}, {"crashed", crashed}}, summary);
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
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_collector(ctx, *args); }; });
}

}  // namespace carapace::cli
