// carapace demo: the README's main job. An agent session on the embedded
// default (RocksDB in a temporary home, the scripted provider, real tools in
// a temporary workspace): it writes and reads files, runs shell commands,
// rides out a rate limit, meets a hook that refuses a command, is killed with
// a real SIGKILL in the middle of a turn, and is resumed in step mode.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/child_process.h"
#include "events/event_summary.h"
#include "replay/verify.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

namespace fs = std::filesystem;

struct DemoArgs {
  std::string scenario;
  bool keep = true;
};

// The scenario shipped in examples/: next to the current directory, or to the binary.
std::string find_scenario() {
  std::vector<fs::path> candidates = {fs::current_path() / "examples/scenarios/demo.json"};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / "examples/scenarios/demo.json");
    }
  }
  for (const auto& c : candidates) {
    if (fs::exists(c)) return c.string();
  }
  return "";
}

// Runs this binary with `args`; returns the wait status. Its output goes to `log_path`.
int run_self(const std::vector<std::string>& args, const std::string& log_path, pid_t* pid_out) {
  static const std::string self = fs::read_symlink("/proc/self/exe").string();
  return run_child_process(self, args, log_path, pid_out);
}

// A few readable lines per turn, for the events in [from, to].
void narrate(const std::vector<Event>& events, uint64_t from) {
  for (const auto& e : events) {
    if (e.seq < from) continue;
    if (const auto* t = get_if<TurnStarted>(e)) {
      std::printf("  turn %llu\n", static_cast<unsigned long long>(t->turn));
    } else if (const auto* f = get_if<LlmFailed>(e)) {
      std::printf(
          "    model: %s -> %s\n",
          f->http_status ? ("HTTP " + std::to_string(f->http_status)).c_str() : f->error.c_str(),
          f->will_retry ? ("retried after " + std::to_string(f->retry_delay_ms) + " ms").c_str() : "gave up");
    } else if (const auto* r = get_if<LlmResponded>(e)) {
      std::printf("    model: %s\n", quote_preview(r->text, 70).c_str());
    } else if (const auto* h = get_if<HookDecided>(e)) {
      if (h->decision != "allow") {
        std::printf("    hook %s: %s%s\n", h->hook_name.c_str(), h->decision.c_str(),
                    h->reason.empty() ? "" : (" (" + h->reason + ")").c_str());
      }
    } else if (const auto* c = get_if<ToolCompleted>(e)) {
      std::string what = c->interrupted
                             ? "interrupted by the crash: its outcome is unknown, so it is not run again"
                         : c->is_error ? "error: " + quote_preview(c->output, 50)
                                       : "ok: " + quote_preview(c->output, 50);
      std::printf("    %s -> %s\n", c->tool.c_str(), what.c_str());
    } else if (const auto* s = get_if<SessionResumed>(e)) {
      std::printf("  resumed from the checkpoint of turn %llu (seq %llu), %s mode\n",
                  static_cast<unsigned long long>(s->checkpoint_turn),
                  static_cast<unsigned long long>(s->checkpoint_seq), s->mode.c_str());
    } else if (const auto* d = get_if<SessionCompleted>(e)) {
      std::printf("  final answer: %s\n", quote_preview(d->final_answer, 100).c_str());
    }
  }
}

std::vector<Event> read_session(const std::string& home, const std::string& id) {
  std::vector<Event> events;
  std::unique_ptr<EventLog> log;
  if (EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, &log).ok()) {
    log->read(id, 1, UINT64_MAX, &events).ok();
  }
  return events;
}

int run_demo(Context& ctx, const DemoArgs& args) {
  std::string scenario = args.scenario.empty() ? find_scenario() : args.scenario;
  if (scenario.empty() || !fs::exists(scenario)) {
    return ctx.fail(Status::not_found("cannot find examples/scenarios/demo.json"),
                    "run the demo from the repository, or pass --scenario FILE");
  }
  std::string home;
  if (!ctx.home_flag.empty()) {
    // --home: the demo's home there, made for it: it writes its own config.json and workspace.
    std::error_code ec;
    if (fs::exists(ctx.home_flag, ec) && !fs::is_empty(ctx.home_flag, ec)) {
      return ctx.usage(Status::invalid_argument("--home " + ctx.home_flag + " is not empty"),
                       "the demo writes its own config.json and workspace into its home: give a directory that "
                       "does not exist yet, or leave --home out for a temporary one");
    }
    fs::create_directories(ctx.home_flag, ec);
    fs::permissions(ctx.home_flag, fs::perms::owner_all, ec);
    if (ec) return ctx.fail(Status::io_error("cannot create " + ctx.home_flag + ": " + ec.message()));
    home = fs::absolute(ctx.home_flag).string();
  } else {
    char tmpl[] = "/tmp/carapace-demo-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return ctx.fail(Status::io_error("cannot create a temporary directory"));
    home = tmpl;
  }
  std::string workspace = home + "/workspace";
  fs::create_directories(workspace);
  std::ofstream(workspace + "/data.csv") << "when,value\n09:00,12\n10:00,15\n11:00,11\n12:00,19\n";
  std::ofstream(workspace + "/README.txt") << "Measurements for the Carapace demo.\n";
  // A command hook: refuses shell commands that delete things.
  std::ofstream(home + "/guard.sh")
      << "#!/bin/sh\ncase \"$(cat)\" in\n  *'rm -'*) echo '{\"decision\":\"deny\","
         "\"reason\":\"destructive command\"}' ;;\n  *) echo '{\"decision\":\"allow\"}' ;;\nesac\n";
  std::ofstream(home + "/config.json")
      << R"({"hooks": [{"name": "guard", "event": "PreToolUse", "matcher": "^shell$",
      "command": ["/bin/sh", ")"
      << home << R"(/guard.sh"], "timeout_ms": 5000}]})";
  // The crash: SIGKILL right after the first shell command has run, before its result is saved.
  std::ofstream(home + "/crash.json")
      << R"({"faults": [{"point": "tool.after_exec", "action": "crash", "tool": "^shell$", "nth": 1}]})";

  std::printf("Carapace demo: an agent session with real tools, a rate limit, a hook and a real crash.\n");
  std::printf("  home:      %s\n  workspace: %s\n  scenario:  %s\n\n", home.c_str(), workspace.c_str(),
              scenario.c_str());
  const std::string task = "Survey the workspace, count the data rows, write a short report, and tidy up.";
  std::vector<std::string> common = {"--scenario", scenario, "--config", home + "/config.json"};

  std::vector<std::string> first = {"--home", home,          "run",     task,       "--session",
                                    "demo",   "--workspace", workspace, "--faults", home + "/crash.json"};
  first.insert(first.end(), common.begin(), common.end());
  pid_t pid = 0;
  int status = run_self(first, home + "/run-1.log", &pid);
  std::printf("run 1 (pid %d)\n", static_cast<int>(pid));
  std::vector<Event> events = read_session(home, "demo");
  narrate(events, 1);
  if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
    return ctx.fail(Status::aborted("the first run was expected to be killed; see " + home + "/run-1.log"));
  }
  uint64_t crashed_at = events.empty() ? 0 : events.back().seq;
  std::printf(
      "  KILLED with SIGKILL in the middle of the turn: the shell command ran, its result was never "
      "saved\n\n");

  std::vector<std::string> second = {"--home", home, "resume", "demo", "--mode", "step"};
  second.insert(second.end(), common.begin(), common.end());
  status = run_self(second, home + "/run-2.log", &pid);
  std::printf("resume in step mode (pid %d)\n", static_cast<int>(pid));
  events = read_session(home, "demo");
  narrate(events, crashed_at + 1);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return ctx.fail(Status::aborted("the resumed run did not complete; see " + home + "/run-2.log"));
  }

  std::unique_ptr<EventLog> log;
  Status s = EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, &log);
  VerifyReport report;
  if (s.ok()) s = verify_session(*log, "demo", &report);
  if (!s.ok() || !report.ok()) return ctx.fail(s.ok() ? Status::corruption("verify found problems") : s);
  std::printf(
      "\ncompleted: %zu events; every checksum and checkpoint re-verified, seqs contiguous; the report is in "
      "%s\n",
      events.size(), (workspace + "/report/summary.md").c_str());
  std::printf("look at it:\n  carapace --home %s log show demo\n  carapace --home %s verify\n", home.c_str(),
              home.c_str());
  return kExitOk;
}

}  // namespace

void register_demo_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<DemoArgs>();
  auto* cmd = app.add_subcommand(
      "demo",
      "Run an agent session that is killed with SIGKILL mid-turn and resumed (no network, under a minute); its "
      "home is --home (a new or empty directory), else a temporary one, kept for you to look at");
  cmd->add_option("--scenario", args->scenario, "Scenario file (default: examples/scenarios/demo.json)");
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_demo(ctx, *args); }; });
}

}  // namespace carapace::cli
