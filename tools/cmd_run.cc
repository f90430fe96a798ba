// carapace run "<task>"
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "events/event_summary.h"
#include "replay/fault_plan.h"
#include "runtime/home.h"
#include "runtime/provider_factory.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "storage/sync_ledger_fs.h"
#include "tools/cli.h"
#include "tools/cli_run.h"

#include "actors/collector/collector.h"
#include "tools/stop_signals.h"

#include "actors/provider/scripted_provider.h"
#include "runtime/session_setup.h"

namespace carapace::cli {

// Wraps a tool so that each execution appends "<session> <call id> <tool>
// <idempotent>" to `path` before it runs: a record that survives SIGKILL
// (the page cache keeps it), and a power loss (it stands for the outside
// world, which a side effect changed for good).
ToolDefinition record_executions(ToolDefinition tool, std::string path) {
  ToolFunction run = std::move(tool.run);
  std::string tail = " " + tool.spec.name + " " + (tool.spec.idempotent ? "1" : "0");
  tool.run = [run, tail, path](const nlohmann::json& args, const ToolContext& ctx) {
    append_line(path, ctx.session_id + " " + ctx.call_id + tail);
    return run(args, ctx);
  };
  // A resume that asks the tool about an interrupted call, and is told to run
  // it again (the call had no effect), says so: "<session> <call> <tool> again".
  if (tool.recover) {
    RecoveryFunction recover = std::move(tool.recover);
    std::string name = tool.spec.name;
    tool.recover = [recover, name, path](const nlohmann::json& args, const ToolContext& ctx) {
      ToolRecovery r = recover(args, ctx);
      if (r.verdict == ToolRecovery::Verdict::kRunAgain) append_line(path, ctx.session_id + " " + ctx.call_id + " " + name + " again");
      return r;
    };
  }
  return tool;
}

namespace {

struct RunArgs {
  RuntimeArgs runtime;
  std::string task;
  uint64_t max_turns = 0;
  std::string workspace;
  std::string session;
  std::string resume;
  std::string mode = "step";
  std::vector<std::string> then;
};

}  // namespace

void append_line(const std::string& path, const std::string& line) {
  if (path.empty()) return;
  std::string text = line + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
}

std::function<void(const Event&)> event_printer(const RuntimeArgs& args, StatusLine& status) {
  return [&status, ack_log = args.ack_log](const Event& e) {
    status.on_event(e);
    // Subscribers hear a checkpoint only once it is durable.
    if (const auto* c = get_if<TurnCommitted>(e))
      append_line(ack_log, "checkpoint " + std::to_string(e.seq) + " " + std::to_string(c->turn));
  };
}

std::function<void(const StreamDelta&)> delta_printer(StatusLine& status) {
  return [&status](const StreamDelta& d) { status.on_delta(d); };
}

int load_cli_config(Context& ctx, const std::string& config_flag, Config* config) {
  std::vector<std::string> warnings;
  std::string config_path = config_flag;
  // The home is checked before anything in it is trusted (runtime/home.h).
  if (Status home = ctx.prepare_home(/*create=*/false); !home.ok()) return ctx.fail(home);
  std::error_code ec;
  if (config_path.empty() && std::filesystem::exists(ctx.home() + "/config.json", ec))
    config_path = ctx.home() + "/config.json";
  if (!config_path.empty()) {
    Status s = load_config(config_path, config, &warnings);
    if (!s.ok())
      return ctx.fail(s, "fix the config file, or run without --config to use the defaults (docs/config.md)");
  }
  for (const auto& w : warnings) std::fprintf(stderr, "carapace: warning: %s\n", ctx.shown(w).c_str());
  return kExitOk;
}

namespace {

// What a session imported from a bundle recorded, against the home's (with
// the flags given): the notice a resume, fork or live replay of it prints
// on stderr.
void report_bundle_configuration(const Context& ctx, const std::string& id, const StoredRun& run,
                                 const Config& home, bool trusted) {
  std::vector<ConfigDifference> differences = configuration_differences(run.config, run.scenario, home);
  if (trusted) {
    std::fprintf(stderr,
                 "carapace: session %s was imported from a bundle; it runs with the configuration the bundle "
                 "recorded (--trust-bundle-config)%s\n",
                 id.c_str(),
                 differences.empty() ? ", which is this home's" : ", which differs from this home's in:");
  } else {
    std::fprintf(stderr,
                 "carapace: notice: session %s was imported from a bundle; it runs with this home's "
                 "configuration, not the one the bundle recorded%s\n",
                 id.c_str(),
                 differences.empty()
                     ? " (they are the same)"
                     : ". Pass --trust-bundle-config to run it with the bundle's, which differs "
                       "in:");
  }
  for (const auto& d : differences) {
    std::fprintf(stderr, "  %s: bundle %s, home %s\n", ctx.shown(d.key).c_str(),
                 ctx.shown(d.recorded).c_str(), ctx.shown(d.home).c_str());
  }
}

}  // namespace

int open_runtime(Context& ctx, const RuntimeArgs& args, std::unique_ptr<Runtime>* rt,
                 const std::string& stored_session) {
  Config config;
  std::shared_ptr<Provider> stored_provider;
  StoredRun run;
  bool stored = false;
  bool from_bundle = false;
  if (!stored_session.empty()) {
    // The session says how it runs; flags given again override it, and
    // --config replaces its configuration (not its scenario).
    if (Status home = ctx.prepare_home(/*create=*/false); !home.ok()) return ctx.fail(home);
    auto log = ctx.open_log(EventLog::Mode::kReader);
    if (!log) return kExitFailed;
    Status s = stored_run(*log, stored_session, RecordedAt::kLatest, &run);
    if (s.ok()) {
      stored = true;
    } else if (!s.is_not_found()) {
      return ctx.fail(s);
    }
    if (Status b = bundle_configuration(*log, stored_session, &from_bundle); !b.ok()) return ctx.fail(b);
    from_bundle = from_bundle && stored;
  }
  bool loaded = false;
  if (from_bundle) {
    // A bundle is data: what it recorded (provider, server, hooks, MCP
    // servers, sandbox, scenario) is shown, and used only if trusted.
    if (int rc = load_cli_config(ctx, args.config, &config); rc != kExitOk) return rc;
    loaded = true;
    if (args.trust_bundle_config) {
      for (const std::string& note : drop_prompt_files(&run.config)) {
        std::fprintf(stderr, "carapace: %s\n", ctx.shown(note).c_str());
      }
      report_bundle_configuration(ctx, stored_session, run, config, true);
    } else {
      stored = false;  // neither its configuration nor its scenario
    }
  }
  const bool stored_config = stored && args.config.empty();
  if (stored_config) {
    config = run.config;
    // The server the session talked to stays its server, whatever the environment says now.
    config.provider.base_url_is_explicit = !config.provider.base_url.empty();
  } else if (!loaded) {
    if (int rc = load_cli_config(ctx, args.config, &config); rc != kExitOk) return rc;
  }
  if (!args.provider.empty()) {
    if (args.provider != "scripted" && !is_http_provider(args.provider)) {
      return ctx.usage(
          Status::invalid_argument("--provider " + args.provider + " is not a provider of this build"),
          "use --provider openai, anthropic or scripted");
    }
    if (args.provider != config.provider.name) {
      config.provider.model = ProviderConfig{}.model;
      config.provider.base_url = ProviderConfig{}.base_url;
      config.provider.api_key_env = ProviderConfig{}.api_key_env;
    }
    config.provider.name = args.provider;
  }
  if (!args.scenario.empty()) config.provider.scenario = args.scenario;
  if (stored && !run.scenario.empty() && args.scenario.empty() && config.provider.name == "scripted" &&
      (stored_config || config.provider.scenario.empty())) {
    Scenario scenario;
    Status s = parse_scenario(run.scenario, "the scenario stored with session " + stored_session, &scenario);
    if (!s.ok()) return ctx.fail(s, "pass --scenario FILE to run it with another scenario");
    stored_provider = std::make_shared<ScriptedProvider>(std::move(scenario));
  }
  if (!args.model.empty()) config.provider.model = args.model;
  if (!args.base_url.empty()) {
    if (!is_http_provider(config.provider.name)) {
      return ctx.usage(Status::invalid_argument("--base-url is for the openai and anthropic providers, not " +
                                               config.provider.name),
                      "add --provider openai (any OpenAI-compatible server) or --provider anthropic");
    }
    config.provider.base_url = args.base_url;
    config.provider.base_url_is_explicit = true;
  }
  if (is_http_provider(config.provider.name) && config.provider.model == ProviderConfig{}.model &&
      !args.resuming) {
    return ctx.fail(Status::invalid_argument("the " + config.provider.name + " provider needs a model name"),
                    "pass --model NAME (e.g. --model gpt-4o-mini) or set provider.model in the config");
  }
  // Against what it runs with instead: the home's, with the flags given.
  if (from_bundle && !args.trust_bundle_config)
    report_bundle_configuration(ctx, stored_session, run, config, false);
  std::shared_ptr<FaultPlan> faults;
  if (!args.faults.empty()) {
    Status s = FaultPlan::load(args.faults, &faults);
    if (!s.ok()) return ctx.fail(s, "docs/fault-plans.md describes fault plans");
    if (!args.fault_counts.empty()) {
      ctx.at_end.push_back([faults, path = args.fault_counts] {
        std::vector<FaultPoint> points = faults->points();
        std::vector<uint64_t> matched = faults->matched();
        std::string text;
        for (size_t i = 0; i < points.size(); ++i) {
          text += std::string(fault_point_name(points[i])) + " " + std::to_string(matched[i]) + "\n";
        }
        append_line(path, text.empty() ? "" : text.substr(0, text.size() - 1));
      });
    }
  }
  if (args.ask_user &&
      std::find(config.tools_enabled.begin(), config.tools_enabled.end(), "ask_user") == config.tools_enabled.end()) {
    config.tools_enabled.push_back("ask_user");
  }
  // The command line owns its process: it makes both process-wide changes.
  Runtime::Options options{
      .home = ctx.home(), .config = config, .builtin_tools = true, .faults = faults, .child_subreaper = true,
      .non_dumpable = true};
  options.provider = stored_provider;
  options.on_approval = args.on_approval;
  options.observe_delta = args.observe_delta;
  RuntimeInternals::TestKnobs knobs;
  if (!args.sync_ledger.empty()) {
    Status s = make_sync_ledger_fs(
        SyncLedgerOptions{.ledger_path = args.sync_ledger, .ignore_wal_syncs = args.ignore_wal_syncs},
        &knobs.file_system);
    if (!s.ok()) return ctx.fail(s);
  }
  if (!args.test_mutation.empty()) {
    auto m = loop_mutation_from_name(args.test_mutation);
    if (!m) return ctx.usage(Status::invalid_argument("--test-mutation " + args.test_mutation + " is unknown"));
    knobs.mutation = *m;
  }
  if (!args.exec_log.empty()) {
    options.decorate_builtin_tool = [path = args.exec_log](ToolDefinition t) {
      return record_executions(std::move(t), path);
    };
  }
  if (!ctx.collector) {
    // Observability never fails a run: without the trace store (another
    // collector holds it), `carapace trace` builds the spans from the log.
    Status c = ctx.prepare_home(/*create=*/true);
    if (c.ok()) c = Collector::start(CollectorOptions{.home = ctx.home()}, &ctx.collector);
    if (!c.ok()) spdlog::info("no in-process collector: {}", c.to_string());
  }
  if (ctx.collector) options.observe = ctx.collector->observer();
  Status s = RuntimeInternals::open(std::move(options), knobs, rt);
  if (!s.ok()) return ctx.fail(s);
  return kExitOk;
}

int report_outcome(Context& ctx, Runtime& rt, const std::string& id, StatusLine& status) {
  SessionOutcome outcome;
  Status s;
  arm_stop_signals();
  // The follow-ups (--then) were recorded with the session: it sends each
  // itself once it has nothing left to do; this waits for the last run.
  do {
    for (;;) {
      s = rt.wait(id, std::chrono::milliseconds(100), &outcome);
      if (!s.is_timed_out()) break;
      if (int sig = stop_signal(); sig != 0) {
        // The caller's runtime, destroyed on the way out, stops the session
        // and kills its tool processes; the log keeps what was done.
        status.clear();
        std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        rt.set_stop_reason(name);  // in the session.stopped the runtime records as it closes
        std::fprintf(stderr, "%s\n",
                     ctx.with_home("carapace: " + name + ": stopping session " + id +
                                   " and killing its tool processes; resume it with `carapace resume " + id + "`")
                         .c_str());
        return 128 + sig;
      }
      status.render();
    }
  } while (s.ok() && outcome.continues);
  status.clear();
  if (!s.ok()) return ctx.fail(s, "the session's events are in the log: carapace log show " + id);

  bool completed = outcome.status == SessionStatus::kCompleted;
  // Out of turns: stopped, resumable with a larger budget.
  const bool out_of_turns = outcome.stop_reason == "max_turns" && !completed;
  // Parked: a person decides, then it goes on (docs/approvals.md).
  const bool waiting = outcome.stop_reason == "waiting" && !completed;
  const std::string word = out_of_turns ? "stopped" : waiting ? "waiting" : std::string(status_name(outcome.status));
  char cost[32];
  std::snprintf(cost, sizeof cost, "$%.4f", outcome.cost_usd);
  std::string summary = "session " + id + " " + word + " after " +
                        count(outcome.turns, "turn") + ", " + std::to_string(outcome.tokens.input) +
                        " in / " + std::to_string(outcome.tokens.output) + " out tokens, " + cost;
  if (ctx.json) {
    print_redacted(ctx, {{"success", completed || waiting},
                       {"data",
                        {{"session", id},
                         {"status", word},
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
                         {"last_seq", outcome.last_seq},
                         {"waiting", [&] {
                            nlohmann::json list = nlohmann::json::array();
                            for (const auto& r : outcome.waiting) list.push_back(approval_json(id, 0, r));
                            return list;
                          }()}}},
                       {"summary", summary}});
  } else if (completed) {
    if (!status.streamed(outcome.final_answer)) std::cout << ctx.shown(outcome.final_answer) << "\n";
    std::fprintf(stderr, "%s (%s)\n  its events: %s\n", summary.c_str(), ctx.shown(outcome.stop_reason).c_str(),
                 ctx.shown(ctx.with_home("carapace log show " + id)).c_str());
  } else if (waiting) {
    std::fprintf(stderr, "carapace: %s: it waits for a decision\n", summary.c_str());
    print_waiting(ctx, id, outcome.waiting);
  } else if (out_of_turns) {
    std::fprintf(stderr, "carapace: %s: it used its turn budget without a final answer\n  go on: %s\n",
                 summary.c_str(),
                 ctx.shown(ctx.with_home("carapace resume " + id + " --max-turns " + std::to_string(outcome.turns * 2)))
                     .c_str());
  } else {
    std::fprintf(stderr, "carapace: %s: %s\n  its events: %s\n", summary.c_str(), ctx.shown(outcome.error).c_str(),
                 ctx.shown(ctx.with_home("carapace log show " + id)).c_str());
  }
  return completed ? kExitOk : waiting ? kExitWaiting : kExitFailed;
}

namespace {

int resume(Context& ctx, const RunArgs& args, Runtime& rt) {
  const std::string& id = args.resume;
  const std::string& mode = args.mode;
  if (mode != "step" && mode != "turn") {
    return ctx.usage(Status::invalid_argument("--mode " + mode + " is not step or turn"));
  }
  StatusLine status(ctx, !ctx.json && isatty(STDERR_FILENO), !ctx.json && isatty(STDOUT_FILENO));
  Status s = rt.resume_session(id, Runtime::ResumeOptions{.mode = mode == "turn" ? Runtime::ResumeMode::kTurn
                                                                                 : Runtime::ResumeMode::kStep,
                                                          .allow_finished = !args.then.empty(),
                                                          .follow_ups = args.then,
                                                          .on_event = event_printer(args.runtime, status),
                                                          .on_delta = delta_printer(status),
                                                          .max_turns = args.max_turns});
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  if (s.is_already_finished()) return ctx.fail(s, "`carapace resume " + id + " --then MESSAGE` sends it another message");
  if (!s.ok()) return ctx.fail(s);
  for (const auto& m : args.then) append_line(args.runtime.ack_log, "message " + m);  // durable now
  return report_outcome(ctx, rt, id, status);
}

int run_run(Context& ctx, RunArgs& args) {
  if (args.task.empty() && args.resume.empty()) {
    return ctx.usage(Status::invalid_argument("run needs a task (or --resume ID)"),
                     "carapace run \"<task>\" --scenario FILE");
  }
  args.runtime.resuming = !args.resume.empty();
  std::unique_ptr<Runtime> rt;
  if (int rc = open_runtime(ctx, args.runtime, &rt, args.resume); rc != kExitOk) return rc;
  if (!args.resume.empty()) return resume(ctx, args, *rt);
  StatusLine status(ctx, !ctx.json && isatty(STDERR_FILENO), !ctx.json && isatty(STDOUT_FILENO));
  std::string id;
  Status s = rt->start_session(SessionOptions{.id = args.session,
                                              .task = args.task,
                                              .max_turns = args.max_turns,
                                              .workspace = args.workspace,
                                              .follow_ups = args.then,
                                              .on_event = event_printer(args.runtime, status),
                                              .on_delta = delta_printer(status)},
                               &id);
  if (!s.ok()) return ctx.fail(s);
  const std::string own = rt->home() + "/workspaces/" + id;
  if (!ctx.json && args.workspace.empty() && std::filesystem::is_directory(own)) {
    std::fprintf(stderr, "workspace: %s (the session's own: --workspace names another)\n", ctx.shown(own).c_str());
  }
  for (const auto& m : args.then) append_line(args.runtime.ack_log, "message " + m);  // durable with the task
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
  if (int rc = open_runtime(ctx, args.runtime, &rt, args.source); rc != kExitOk) return rc;
  StatusLine status(ctx, !ctx.json && isatty(STDERR_FILENO), !ctx.json && isatty(STDOUT_FILENO));
  std::string id;
  Status s = rt->fork_session(args.source, args.at_turn,
                              Runtime::ForkOptions{.id = args.session,
                                                   .task = args.task,
                                                   .on_event = event_printer(args.runtime, status),
                                                   .on_delta = delta_printer(status)},
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
  cmd->add_option("--provider", args.provider,
                  "Provider: openai (and any OpenAI-compatible server), anthropic or scripted (default: the "
                  "config's, else scripted)");
  cmd->add_option("--model", args.model, "Model name (default: the config's)");
  cmd->add_option("--base-url", args.base_url,
                  "The openai or anthropic provider's API address (wins over the config and "
                  "$OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)");
  cmd->add_option("--config", args.config, "Config file (default: $CARAPACE_HOME/config.json if it exists)");
  cmd->add_option("--faults", args.faults, "Fault plan to inject (docs/fault-plans.md)");
  cmd->add_option("--exec-log", args.exec_log, "Record every tool execution in this file")->group("");
  cmd->add_option("--ack-log", args.ack_log, "Record every durable checkpoint and message here")->group("");
  cmd->add_option("--sync-ledger", args.sync_ledger, "Simulate a disk that loses unsynced writes")->group("");
  cmd->add_flag("--ignore-wal-syncs", args.ignore_wal_syncs, "Mutation: do not honour WAL syncs")->group("");
  cmd->add_option("--test-mutation", args.test_mutation, "A deliberate defect, for tests")->group("");
  cmd->add_option("--fault-counts", args.fault_counts, "Write how often each fault rule's point was reached")
      ->group("");
}

CLI::Option* add_trust_bundle_option(CLI::App* cmd, RuntimeArgs& args) {
  return cmd->add_flag(
      "--trust-bundle-config", args.trust_bundle_config,
      "For a session imported from a bundle: run with the configuration and scenario the bundle "
      "recorded (its provider, server, hooks, MCP servers, sandbox) instead of this home's; without "
      "it, the settings that differ are listed and the home's are used");
}

void register_run_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run an agent session on a task and print its final answer");
  cmd->add_option("task", args->task, "The task: the session's first user message");
  add_runtime_options(cmd, args->runtime);
  add_trust_bundle_option(cmd, args->runtime);
  cmd->add_option("--max-turns", args->max_turns, "Stop after this many turns (default: the config's, 20)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--workspace", args->workspace,
                  "Directory the tools are confined to (default: the config's session.workspace, else "
                  "HOME/workspaces/ID, made for the session)");
  cmd->add_option("--session", args->session, "Session id (default: generated)");
  cmd->add_option("--resume", args->resume,
                  "Resume this session instead of starting one (see `carapace resume`)");
  auto* mode = cmd->add_option("--mode", args->mode, "With --resume: step (default) or turn")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"step", "turn"}));
  cmd->add_option("--then", args->then,
                  "A follow-up message, sent once the session has nothing left to do (repeat for more, "
                  "each after the last's run); recorded with the task, so a crash loses none");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args, mode] {
    if (mode->count() > 0 && args->resume.empty()) {
      ctx.run = [&ctx] {
        return ctx.usage(Status::invalid_argument("--mode is for --resume: a new session has no resume mode"),
                         "carapace resume ID --mode turn");
      };
      return;
    }
    ctx.run = [&ctx, args] { return run_run(ctx, *args); };
  });

  auto resume_args = std::make_shared<RunArgs>();
  auto* res = app.add_subcommand("resume",
                                 "Resume a session after a crash, under the same id: step mode keeps every "
                                 "completed step of the interrupted "
                                 "turn; turn mode rolls the turn back and runs it again");
  res->add_option("session", resume_args->resume, "Session id")->required();
  res->add_option("--mode", resume_args->mode, "step or turn")
      ->capture_default_str()
      ->check(CLI::IsMember({"step", "turn"}));
  res->add_option("--then", resume_args->then,
                  "A follow-up message, sent once the session has nothing left to do (repeat for more); "
                  "recorded before it goes on");
  res->add_option("--max-turns", resume_args->max_turns,
                  "A new turn budget from here on, recorded (a session stopped at its budget goes on only "
                  "with a larger one)")
      ->check(whole_number_from(1));
  add_runtime_options(res, resume_args->runtime);
  add_trust_bundle_option(res, resume_args->runtime);
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
      resume_args->runtime.resuming = true;
      std::unique_ptr<Runtime> rt;
      if (int rc = open_runtime(ctx, resume_args->runtime, &rt, resume_args->resume); rc != kExitOk) return rc;
      return resume(ctx, *resume_args, *rt);
    };
  });

  auto fork_args = std::make_shared<ForkArgs>();
  auto* fork = app.add_subcommand(
      "fork",
      "Start a new session from another's history up to a checkpoint, and run it (the source is untouched)");
  fork->add_option("session", fork_args->source, "The session to fork")->required();
  fork->add_option("--at-turn", fork_args->at_turn, "The checkpoint: the end of this turn (0: just the task)")
      ->required()
      ->check(whole_number_from(0));
  fork->add_option("--task", fork_args->task,
                   "A new user message for the fork (default: go on from the checkpoint)");
  fork->add_option("--session", fork_args->session, "The fork's id (default: generated)");
  add_runtime_options(fork, fork_args->runtime);
  add_trust_bundle_option(fork, fork_args->runtime);
  add_json_flag(fork, ctx);
  fork->callback([&ctx, fork_args] { ctx.run = [&ctx, fork_args] { return run_fork(ctx, *fork_args); }; });
}

}  // namespace carapace::cli
