// carapace run "<task>"
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "events/event_summary.h"
#include "runtime/runtime.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

struct RunArgs {
  std::string task;
  std::string scenario;
  std::string provider;
  std::string model;
  uint64_t max_turns = 0;
  std::string workspace;
  std::string config;
  std::string session;
};

// What the status line shows, updated from the session's events.
class StatusLine {
 public:
  explicit StatusLine(bool tty) : tty_(tty) {}

  void on_event(const Event& e) {
    std::lock_guard lock(mu_);
    retry_until_ = {};
    if (const auto* f = get_if<LlmFailed>(e)) {
      std::string what = f->http_status ? std::to_string(f->http_status) : f->error;
      if (f->will_retry) {
        retry_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(f->retry_delay_ms);
        retry_what_ = "(" + what + ", attempt " + std::to_string(f->attempt + 1) + ")";
        if (!tty_) line("retrying in " + seconds(f->retry_delay_ms) + " " + retry_what_);
      } else {
        line("model call failed: " + what);
      }
    } else if (const auto* t = get_if<TurnStarted>(e)) {
      status_ = "turn " + std::to_string(t->turn) + ": starting";
    } else if (const auto* r = get_if<LlmRequested>(e)) {
      status_ = "turn " + std::to_string(r->turn) + ": waiting for the model";
    } else if (const auto* q = get_if<ToolRequested>(e)) {
      status_ = "running " + q->tool + " " + quote_preview(q->args.text, 50);
      if (!tty_) line(status_);
    } else if (const auto* c = get_if<ToolCompleted>(e)) {
      if (c->is_error && !tty_) line(c->tool + " failed: " + quote_preview(c->output, 60));
    } else if (const auto* h = get_if<HookDecided>(e)) {
      if (h->decision != "allow" && h->decision != "continue") {
        line("hook " + h->hook_name + " (" + h->hook_event + "): " + h->decision +
             (h->reason.empty() ? "" : " - " + h->reason));
      }
    }
  }

  // Redraws the live line (a terminal only).
  void render() {
    if (!tty_) return;
    std::lock_guard lock(mu_);
    std::string text = status_;
    if (retry_until_ != std::chrono::steady_clock::time_point{}) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(retry_until_ -
                                                                        std::chrono::steady_clock::now());
      text = "retrying in " + seconds(static_cast<uint64_t>(std::max<int64_t>(0, left.count()))) + " " +
             retry_what_;
    }
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
  }

  void clear() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  static std::string seconds(uint64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
    return buf;
  }

  void line(const std::string& text) {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "  %s\n", text.c_str());
  }

  bool tty_;
  std::mutex mu_;
  std::string status_ = "starting";
  std::chrono::steady_clock::time_point retry_until_{};
  std::string retry_what_;
};

int run_run(Context& ctx, const RunArgs& args) {
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

  std::unique_ptr<Runtime> rt;
  Status s = Runtime::open(Runtime::Options{.home = ctx.home(), .config = config}, &rt);
  if (!s.ok()) return ctx.fail(s);

  StatusLine status(!ctx.json && isatty(STDERR_FILENO));
  std::string id;
  s = rt->start_session(SessionOptions{.id = args.session,
                                       .task = args.task,
                                       .max_turns = args.max_turns,
                                       .workspace = args.workspace,
                                       .on_event = [&status](const Event& e) { status.on_event(e); }},
                        &id);
  if (!s.ok()) return ctx.fail(s);
  SessionOutcome outcome;
  for (;;) {
    s = rt->wait(id, std::chrono::milliseconds(100), &outcome);
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

}  // namespace

void register_run_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run an agent session on a task and print its final answer");
  cmd->add_option("task", args->task, "The task: the session's first user message")->required();
  cmd->add_option("--scenario", args->scenario,
                  "Scenario file of the scripted provider (docs/scenario-format.md)");
  cmd->add_option("--provider", args->provider, "Provider (default: the config's, else scripted)");
  cmd->add_option("--model", args->model, "Model name (default: the config's)");
  cmd->add_option("--max-turns", args->max_turns, "Stop after this many turns (default: the config's, 20)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--workspace", args->workspace,
                  "Directory the tools are confined to (default: the current one)");
  cmd->add_option("--config", args->config, "Config file (default: $CARAPACE_HOME/config.json if it exists)");
  cmd->add_option("--session", args->session, "Session id (default: generated)");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_run(ctx, *args); }; });
}

}  // namespace carapace::cli
