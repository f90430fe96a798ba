// carapace torture <scenario>: crash sessions at random points, resume them,
// and check that nothing is lost (replay/torture.h).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "base/fault_injection.h"
#include "replay/torture.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

namespace fs = std::filesystem;

struct TortureArgs {
  std::string scenario;
  uint64_t iterations = 20;
  uint64_t seed = 1;
  std::string mode = "both";
  std::string dir;
  double resume_crash_probability = 0.3;
  double random_moment_probability = 0.5;
  std::vector<std::string> points;
  bool power_loss = false;
  bool approvals = false;
  uint32_t nodes = 0;
  bool calm_nodes = false;
  std::string mutation;
  bool keep = false;
  std::string config;
  std::string workspace;
  std::string faults;
  std::string task;
  bool random_moments_given = false;
};

std::string absolute_or_empty(const std::string& path) {
  return path.empty() ? path : fs::absolute(path).string();
}

int run_torture_command(Context& ctx, const TortureArgs& args) {
  TortureOptions options{.carapace = fs::read_symlink("/proc/self/exe").string(),
                         .scenario = fs::absolute(args.scenario).string(),
                         .task = args.task.empty() ? TortureOptions{}.task : args.task,
                         .config = absolute_or_empty(args.config),
                         .workspace = absolute_or_empty(args.workspace),
                         .faults = absolute_or_empty(args.faults),
                         .iterations = args.iterations,
                         .seed = args.seed,
                         .mode = args.mode,
                         .resume_crash_probability = args.resume_crash_probability,
                         // --points alone: every crash at one of those points.
                         .random_moment_probability = args.points.empty() || args.random_moments_given
                                                          ? args.random_moment_probability
                                                          : 0.0,
                         .points = args.points,
                         .power_loss = args.power_loss,
                         .mutation = args.mutation,
                         .approvals = args.approvals,
                         .nodes = args.nodes,
                         .node_chaos = !args.calm_nodes,
                         .keep_passing_homes = args.keep};
  bool own_dir = args.dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/carapace-torture-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return ctx.fail(Status::io_error("cannot create a temporary directory"));
    options.work_dir = tmpl;
  } else {
    options.work_dir = fs::absolute(args.dir).string();
  }
  const bool tty = !ctx.json && isatty(STDERR_FILENO);
  TortureReport report;
  Status s = run_torture(options, &report, [&](const TortureIteration& it, const TortureReport& r) {
    if (ctx.json) return;
    std::string line = "iteration " + std::to_string(it.iteration) + "/" + std::to_string(args.iterations) +
                       " (" + it.mode + "): " + count(it.crashes, "crash") + ", " +
                       count(it.resumes, "resume");
    if (!it.crash_points.empty()) {
      line += " at";
      for (const auto& p : it.crash_points) line += " " + p;
    }
    line += it.violations.empty() ? ", ok" : ", " + count(it.violations.size(), "VIOLATION");
    line += "  [" + std::to_string(r.crashes) + " crashes so far, " + std::to_string(r.violations.size()) +
            " violations]";
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      if (!it.violations.empty()) std::fprintf(stderr, "\n");
    } else if (!it.violations.empty() || it.iteration % 10 == 0 || it.iteration == args.iterations) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    for (const auto& v : it.violations) {
      std::fprintf(stderr, "  %s: %s\n", v.kind.c_str(), ctx.shown(v.detail).c_str());
    }
  });
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!s.ok()) return ctx.fail(s);

  if (ctx.json) {
    nlohmann::json violations = nlohmann::json::array();
    for (const auto& v : report.violations) {
      violations.push_back({{"iteration", v.iteration},
                            {"mode", v.mode},
                            {"home", v.home},
                            {"kind", v.kind},
                            {"detail", v.detail},
                            {"meaning", v.meaning},
                            {"look", v.look}});
    }
    const bool kept = !report.violations.empty() || args.keep;
    print_redacted(ctx, {{"success", report.violations.empty()},
                       {"data",
                        {{"iterations", report.iterations},
                         {"step_iterations", report.step_iterations},
                         {"turn_iterations", report.turn_iterations},
                         {"crashes", report.crashes},
                         {"crashes_by_point", report.crashes_by_point},
                         {"resumes", report.resumes},
                         {"power_losses", report.power_losses},
                         {"bytes_lost_to_power_losses", report.bytes_lost},
                         {"torn_writes", report.torn_writes},
                         {"checkpoints_acknowledged", report.checkpoints_acknowledged},
                         {"messages_acknowledged", report.messages_acknowledged},
                         {"recoveries_from_a_snapshot", report.snapshots_used},
                         {"compared_with_crash_free_run", report.compared_with_reference},
                         {"equal_to_crash_free_run", report.equal_to_reference},
                         {"skipped_by_reason", report.skipped_by_reason},
                         {"not_compared_after_a_violation", report.not_reached},
                         {"crash_free_run_home", kept ? nlohmann::json(report.reference_home) : nlohmann::json()},
                         {"work_dir", kept ? nlohmann::json(options.work_dir) : nlohmann::json()},
                         {"approvals_requested", report.approvals_requested},
                         {"approvals_answered", report.approvals_answered},
                         {"nodes", args.nodes},
                         {"node_kills", report.node_kills},
                         {"node_freezes", report.node_freezes},
                         {"node_partitions", report.node_partitions},
                         {"calls_on_nodes", report.calls_on_nodes},
                         {"calls_lost_with_a_node", report.calls_lost_with_a_node},
                         {"violations_by_kind", report.violations_by_kind},
                         {"violations", violations},
                         {"seconds", report.seconds}}},
                       {"summary", count(report.iterations, "iteration") + ", " +
                                       count(report.crashes, "crash") + ", " +
                                       count(report.violations.size(), "violation")}});
  } else {
    std::printf("torture: %s, seed %llu, mode %s%s%s, %.1f s\n", args.scenario.c_str(),
                static_cast<unsigned long long>(args.seed), args.mode.c_str(),
                args.power_loss ? ", power loss after every crash" : "",
                args.nodes > 0 ? (", " + std::to_string(args.nodes) + " tools nodes" +
                                  (args.calm_nodes ? "" : " killed, frozen and cut off at random"))
                                     .c_str()
                               : "",
                report.seconds);
    std::printf("  %-34s %8llu  (step %llu, turn %llu)\n", "iterations",
                static_cast<unsigned long long>(report.iterations),
                static_cast<unsigned long long>(report.step_iterations),
                static_cast<unsigned long long>(report.turn_iterations));
    std::printf("  %-34s %8llu\n", "crashes (SIGKILL)", static_cast<unsigned long long>(report.crashes));
    for (const auto& [point, n] : report.crashes_by_point) {
      std::printf("    %-32s %8llu\n", point.c_str(), static_cast<unsigned long long>(n));
    }
    if (args.power_loss) {
      std::printf("  %-34s %8llu  (%llu unsynced bytes lost, %llu torn writes)\n", "power losses",
                  static_cast<unsigned long long>(report.power_losses),
                  static_cast<unsigned long long>(report.bytes_lost),
                  static_cast<unsigned long long>(report.torn_writes));
    }
    std::printf("  %-34s %8llu\n", "resumes", static_cast<unsigned long long>(report.resumes));
    std::printf("  %-34s %8llu\n", "acknowledged checkpoints intact",
                static_cast<unsigned long long>(report.checkpoints_acknowledged));
    std::printf("  %-34s %8llu\n", "acknowledged messages kept",
                static_cast<unsigned long long>(report.messages_acknowledged));
    std::printf("  %-34s %8llu\n", "recoveries from a snapshot",
                static_cast<unsigned long long>(report.snapshots_used));
    if (report.approvals_requested != 0) {
      std::printf("  %-34s %8llu  (%llu answers by the runner)\n", "approval requests",
                  static_cast<unsigned long long>(report.approvals_requested),
                  static_cast<unsigned long long>(report.approvals_answered));
    }
    if (args.nodes > 0) {
      std::printf("  %-34s %8llu  (%llu killed and restarted, %llu frozen, %llu cut off)\n", "tools node failures",
                  static_cast<unsigned long long>(report.node_kills + report.node_freezes + report.node_partitions),
                  static_cast<unsigned long long>(report.node_kills),
                  static_cast<unsigned long long>(report.node_freezes),
                  static_cast<unsigned long long>(report.node_partitions));
      std::printf("  %-34s %8llu  (%llu touched by a lost node)\n", "calls run on tools nodes",
                  static_cast<unsigned long long>(report.calls_on_nodes),
                  static_cast<unsigned long long>(report.calls_lost_with_a_node));
    }
    std::printf("  %-34s %8llu\n", "completed and verified",
                static_cast<unsigned long long>(report.completed));
    std::printf("  %-34s %8llu of %llu compared\n", "final state equal to crash-free run",
                static_cast<unsigned long long>(report.equal_to_reference),
                static_cast<unsigned long long>(report.compared_with_reference));
    for (const auto& [why, n] : report.skipped_by_reason) {
      std::printf("    %llu not compared: %s\n", static_cast<unsigned long long>(n), why.c_str());
    }
    if (report.not_reached > 0) {
      std::printf("    %llu not compared: another violation ended the iteration first\n",
                  static_cast<unsigned long long>(report.not_reached));
    }
    std::printf("  %-34s %8zu\n", "violations", report.violations.size());
    for (const auto& [kind, n] : report.violations_by_kind) {
      std::printf("    %-32s %8llu\n", kind.c_str(), static_cast<unsigned long long>(n));
    }
    for (const auto& v : report.violations) {
      std::printf("  iteration %llu (%s): %s: %s\n", static_cast<unsigned long long>(v.iteration), v.mode.c_str(),
                  v.kind.c_str(), ctx.shown(v.detail).c_str());
      if (!v.meaning.empty()) std::printf("    what it usually means: %s\n", v.meaning.c_str());
      for (size_t k = 0; k < v.look.size(); ++k) {
        std::printf("    %s %s\n", k == 0 ? "look:" : "     ", ctx.shown(v.look[k]).c_str());
      }
    }
    if (!report.violations.empty()) {
      std::printf("  the homes of the iterations above and of the crash-free run (%s) are kept\n",
                  ctx.shown(report.reference_home).c_str());
    }
  }
  if (own_dir && report.violations.empty() && !args.keep) fs::remove_all(options.work_dir);
  return report.violations.empty() ? kExitOk : kExitFailed;
}

}  // namespace

void register_torture_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<TortureArgs>();
  auto* cmd = app.add_subcommand(
      "torture",
      "Crash a scenario's session at random points, resume it until done, and check every invariant");
  cmd->add_option("scenario", args->scenario,
                  "Scenario file (examples/scenarios/torture.json is built for this)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--iterations", args->iterations, "Iterations")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--seed", args->seed, "Seed of the crash points")->capture_default_str();
  cmd->add_option("--mode", args->mode, "Resume mode: step, turn or both (alternating)")
      ->check(CLI::IsMember({"step", "turn", "both"}))
      ->capture_default_str();
  cmd->add_option("--resume-crash-probability", args->resume_crash_probability,
                  "Chance that a resumed run is crashed again")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  auto* random_moments = cmd->add_option("--random-moments", args->random_moment_probability,
                  "Share of crashes made by a SIGKILL after a random delay instead of at a fault point")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  std::vector<std::string> point_names;
  for (int p = 0; p < kFaultPointCount; ++p) {
    if (static_cast<FaultPoint>(p) != FaultPoint::kScheduleFired) {
      point_names.emplace_back(fault_point_name(static_cast<FaultPoint>(p)));
    }
  }
  cmd->add_option("--points", args->points,
                  "Crash only at these fault points (default: all ten; alone, it turns --random-moments to 0)")
      ->check(CLI::IsMember(point_names));
  cmd->add_option("--config", args->config,
                  "Your agent's configuration file (default: the runner's own, with two command hooks)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--workspace", args->workspace,
                  "Your agent's workspace: copied fresh into every iteration and the crash-free run, and "
                  "compared with the crash-free run's at the end (default: one file, input.txt)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--faults", args->faults,
                  "A fault plan (docs/fault-plans.md) applied in every run and resume besides the crashes; "
                  "crash rules are refused")
      ->check(CLI::ExistingFile);
  cmd->add_option("--task", args->task, "The first user message (default: \"Work through the scenario.\")");
  cmd->add_flag("--power-loss", args->power_loss,
                "After every crash, take away what was not synced, as a power loss would (sometimes tearing "
                "the last write)");
  cmd->add_flag("--approvals", args->approvals,
                "The runner's config asks before every call that is not idempotent; the runner answers each "
                "request after a random delay (denying every third), crashing those children too "
                "(docs/approvals.md)");
  cmd->add_option("--nodes", args->nodes,
                  "Route every tool to N tools nodes the runner starts (mutual TLS, each behind a loopback proxy), "
                  "and kill (then restart), freeze or cut off one at random moments while the host crashes "
                  "(docs/scale-out.md); not with --config")
      ->check(CLI::Range(0, 4));
  cmd->add_flag("--calm-nodes", args->calm_nodes,
                "With --nodes: never kill or freeze the nodes; only the host crashes");
  cmd->add_option("--test-mutation", args->mutation, "A deliberate defect in the children, for tests")->group("");
  cmd->add_option("--dir", args->dir, "Where the iterations' homes go (default: a temporary directory)");
  cmd->add_flag("--keep", args->keep,
                "Keep every iteration's home and the crash-free run's (reference/), not only when there are "
                "violations");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args, random_moments] {
    args->random_moments_given = random_moments->count() > 0;
    ctx.run = [&ctx, args] { return run_torture_command(ctx, *args); };
  });
}

}  // namespace carapace::cli
