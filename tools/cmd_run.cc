// carapace run "<task>"
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "events/event_summary.h"
#include "replay/fault_plan.h"
#include "runtime/runtime.h"
#include "tools/cli.h"
#include "tools/cli_run.h"

namespace carapace::cli {
namespace {

// Wraps a tool so that each execution appends "<session> <call id> <tool>" to
// `path` before it runs: a record that survives SIGKILL (the page cache keeps it).
ToolDefinition record_executions(ToolDefinition tool, std::string path) {
  ToolFunction run = std::move(tool.run);
  std::string name = tool.spec.name;
  tool.run = [run, name, path](const nlohmann::json& args, const ToolContext& ctx) {
    std::string line = ctx.session_id + " " + ctx.call_id + " " + name + "\n";
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
      ::close(fd);
    }
    return run(args, ctx);
  };
  return tool;
}

struct RunArgs {
  RuntimeArgs runtime;
  std::string task;
  uint64_t max_turns = 0;
  std::string workspace;
  std::string session;
  std::string resume;
  std::string mode = "step";
};

}  // namespace

int open_runtime(Context& ctx, const RuntimeArgs& args, std::unique_ptr<Runtime>* rt) {
  Config config;
  std::vector<std::string> warnings;
  std::string config_path = args.config;
  if (config_path.empty() && std::filesystem::exists(ctx.home() + "/config.json"))
    config_path = ctx.home() + "/config.json";
  if (!config_path.empty()) {
    Status s = load_config(config_path, &config, &warnings);
    if (!s.ok())
      return ctx.fail(s, "fix the config file, or run without --config to use the defaults (docs/config.md)");
  }
  for (const auto& w : warnings) std::fprintf(stderr, "carapace: warning: %s\n", w.c_str());
  if (!args.provider.empty()) {
    if (args.provider != "scripted") {
      return ctx.fail(
          Status::invalid_argument("--provider " + args.provider + " is not available in this build"),
          "use --provider scripted with --scenario FILE");
    }
    config.provider.name = args.provider;
  }
  if (!args.scenario.empty()) config.provider.scenario = args.scenario;
  if (!args.model.empty()) config.provider.model = args.model;
  std::shared_ptr<FaultPlan> faults;
  if (!args.faults.empty()) {
    Status s = FaultPlan::load(args.faults, &faults);
    if (!s.ok()) return ctx.fail(s, "docs/fault-plans.md describes fault plans");
  }
  Runtime::Options options{.home = ctx.home(), .config = config, .faults = faults};
  if (!args.exec_log.empty()) {
    options.decorate_builtin_tool = [path = args.exec_log](ToolDefinition t) {
      return record_executions(std::move(t), path);
    };
  }
  Status s = Runtime::open(std::move(options), rt);
  if (!s.ok()) return ctx.fail(s);
  return kExitOk;
}

int report_outcome(Context& ctx, Runtime& rt, const std::string& id, StatusLine& status) {
  SessionOutcome outcome;
  Status s;
  for (;;) {
    s = rt.wait(id, std::chrono::milliseconds(100), &outcome);
    if (!s.is_busy()) break;
    status.render();
  }
  status.clear();
  if (!s.ok()) return ctx.fail(s, "the session's events are in the log: carapace log show " + id);

  bool completed = outcome.status == SessionStatus::kCompleted;
  char cost[32];
  std::snprintf(cost, sizeof cost, "$%.4f", outcome.cost_usd);
  std::string summary = "session " + id + " " + std::string(status_name(outcome.status)) + " after " +
                        count(outcome.turns, "turn") + ", " + std::to_string(outcome.tokens.input) +
                        " in / " + std::to_string(outcome.tokens.output) + " out tokens, " + cost;
  if (ctx.json) {
    std::cout << dump({{"success", completed},
                       {"data",
                        {{"session", id},
                         {"status", std::string(status_name(outcome.status))},
                         {"final_answer", outcome.final_answer},
                         {"stop_reason", outcome.stop_reason},
                         {"error", outcome.error},
                         {"turns", outcome.turns},
                         {"tokens",
                          {{"input", outcome.tokens.input},
                           {"output", outcome.tokens.output},
                           {"cache_read", outcome.tokens.cache_read},
                           {"cache_write", outcome.tokens.cache_write}}},
                         {"cost_usd", outcome.cost_usd},
                         {"last_seq", outcome.last_seq}}},
                       {"summary", summary}})
              << "\n";
  } else if (completed) {
    std::cout << outcome.final_answer << "\n";
    std::fprintf(stderr, "%s (%s)\n  its events: carapace log show %s\n", summary.c_str(),
                 outcome.stop_reason.c_str(), id.c_str());
  } else {
    std::fprintf(stderr, "carapace: %s: %s\n  its events: carapace log show %s\n", summary.c_str(),
                 outcome.error.c_str(), id.c_str());
  }
  return completed ? kExitOk : kExitFailed;
}

namespace {

int resume(Context& ctx, Runtime& rt, const std::string& id, const std::string& mode) {
  if (mode != "step" && mode != "turn") {
    return ctx.fail(Status::invalid_argument("--mode " + mode + " is not step or turn"));
  }
  StatusLine status(!ctx.json && isatty(STDERR_FILENO));
  Status s = rt.resume_session(
      id,
      Runtime::ResumeOptions{.mode = mode == "turn" ? Runtime::ResumeMode::kTurn : Runtime::ResumeMode::kStep,
                             .on_event = [&status](const Event& e) { status.on_event(e); }});
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  if (!s.ok()) return ctx.fail(s);
  return report_outcome(ctx, rt, id, status);
}

int run_run(Context& ctx, const RunArgs& args) {
  std::unique_ptr<Runtime> rt;
  if (int rc = open_runtime(ctx, args.runtime, &rt); rc != kExitOk) return rc;
  if (!args.resume.empty()) return resume(ctx, *rt, args.resume, args.mode);
  if (args.task.empty()) {
    return ctx.fail(Status::invalid_argument("run needs a task (or --resume ID)"),
                    "carapace run \"<task>\" --scenario FILE");
  }
  StatusLine status(!ctx.json && isatty(STDERR_FILENO));
  std::string id;
  Status s = rt->start_session(SessionOptions{.id = args.session,
                                              .task = args.task,
                                              .max_turns = args.max_turns,
                                              .workspace = args.workspace,
                                              .on_event = [&status](const Event& e) { status.on_event(e); }},
                               &id);
  if (!s.ok()) return ctx.fail(s);
  return report_outcome(ctx, *rt, id, status);
}

struct ForkArgs {
  RuntimeArgs runtime;
  std::string source;
  uint64_t at_turn = 0;
  std::string task;
  std::string session;
};

int run_fork(Context& ctx, const ForkArgs& args) {
  std::unique_ptr<Runtime> rt;
  if (int rc = open_runtime(ctx, args.runtime, &rt); rc != kExitOk) return rc;
  StatusLine status(!ctx.json && isatty(STDERR_FILENO));
  std::string id;
  Status s =
      rt->fork_session(args.source, args.at_turn,
                       Runtime::ForkOptions{.id = args.session,
                                            .task = args.task,
                                            .on_event = [&status](const Event& e) { status.on_event(e); }},
                       &id);
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  if (!s.ok()) return ctx.fail(s);
  if (!ctx.json)
    std::fprintf(stderr, "forked %s at turn %llu as %s\n", args.source.c_str(),
                 static_cast<unsigned long long>(args.at_turn), id.c_str());
  return report_outcome(ctx, *rt, id, status);
}

}  // namespace

void add_runtime_options(CLI::App* cmd, RuntimeArgs& args) {
  cmd->add_option("--scenario", args.scenario,
                  "Scenario file of the scripted provider (docs/scenario-format.md)");
  cmd->add_option("--provider", args.provider, "Provider (default: the config's, else scripted)");
  cmd->add_option("--model", args.model, "Model name (default: the config's)");
  cmd->add_option("--config", args.config, "Config file (default: $CARAPACE_HOME/config.json if it exists)");
  cmd->add_option("--faults", args.faults, "Fault plan to inject (docs/fault-plans.md)");
  cmd->add_option("--exec-log", args.exec_log, "Record every tool execution in this file")->group("");
}

void register_run_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run an agent session on a task and print its final answer");
  cmd->add_option("task", args->task, "The task: the session's first user message");
  add_runtime_options(cmd, args->runtime);
  cmd->add_option("--max-turns", args->max_turns, "Stop after this many turns (default: the config's, 20)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--workspace", args->workspace,
                  "Directory the tools are confined to (default: the current one)");
  cmd->add_option("--session", args->session, "Session id (default: generated)");
  cmd->add_option("--resume", args->resume,
                  "Resume this session instead of starting one (see `carapace resume`)");
  cmd->add_option("--mode", args->mode, "With --resume: step (default) or turn")->capture_default_str();
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_run(ctx, *args); }; });

  auto resume_args = std::make_shared<RunArgs>();
  auto* res = app.add_subcommand("resume",
                                 "Resume a session after a crash, under the same id: step mode keeps every "
                                 "completed step of the interrupted "
                                 "turn; turn mode rolls the turn back and runs it again");
  res->add_option("session", resume_args->resume, "Session id")->required();
  res->add_option("--mode", resume_args->mode, "step or turn")->capture_default_str();
  add_runtime_options(res, resume_args->runtime);
  add_json_flag(res, ctx);
  res->callback([&ctx, resume_args] {
    ctx.run = [&ctx, resume_args] {
      // Name an unknown session before asking for a provider.
      if (auto log = ctx.open_log(EventLog::Mode::kReader)) {
        uint64_t last = 0;
        if (log->last_seq(resume_args->resume, &last).ok() && last == 0) {
          return ctx.fail(Status::not_found("no session '" + resume_args->resume + "' in " + ctx.home()),
                          "`carapace sessions` lists the sessions there");
        }
      } else {
        return kExitFailed;
      }
      std::unique_ptr<Runtime> rt;
      if (int rc = open_runtime(ctx, resume_args->runtime, &rt); rc != kExitOk) return rc;
      return resume(ctx, *rt, resume_args->resume, resume_args->mode);
    };
  });

  auto fork_args = std::make_shared<ForkArgs>();
  auto* fork = app.add_subcommand(
      "fork",
      "Start a new session from another's history up to a checkpoint, and run it (the source is untouched)");
  fork->add_option("session", fork_args->source, "The session to fork")->required();
  fork->add_option("--at-turn", fork_args->at_turn, "The checkpoint: the end of this turn (0: just the task)")
      ->required();
  fork->add_option("--task", fork_args->task,
                   "A new user message for the fork (default: go on from the checkpoint)");
  fork->add_option("--session", fork_args->session, "The fork's id (default: generated)");
  add_runtime_options(fork, fork_args->runtime);
  add_json_flag(fork, ctx);
  fork->callback([&ctx, fork_args] { ctx.run = [&ctx, fork_args] { return run_fork(ctx, *fork_args); }; });
}

}  // namespace carapace::cli
