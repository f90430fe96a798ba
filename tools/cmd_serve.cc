// carapace serve: a local web view of the home, live, and the host of its
// sessions: it runs them and takes writes over its API (docs/serve.md).
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>

#include "replay/fault_plan.h"
#include "runtime/home.h"
#include "schedule/schedule_spec.h"
#include "schedule/schedule_state.h"
#include "storage/db_lock.h"
#include "tools/cli.h"
#include "tools/cli_run.h"
#include "tools/serve/home_view.h"
#include "tools/serve/schedule_runner.h"
#include "tools/serve/serve_token.h"
#include "tools/serve/session_host.h"
#include "tools/serve/web_server.h"
#include "tools/stop_signals.h"

#ifndef CARAPACE_VERSION
#define CARAPACE_VERSION "unknown"
#endif

namespace carapace::cli {
namespace {

struct ServeArgs {
  uint16_t port = 8080;
  std::string bind = "127.0.0.1";
  int interval_ms = 200;
  bool no_token = false;
  bool poll = false;
  bool read_only = false;
  size_t max_connections = 256;
  bool no_resume = false;
  std::string workspace_root;  // default: HOME/workspaces
  RuntimeArgs runtime;
};

std::string who_answers() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const struct passwd* pw = ::getpwuid(::getuid());
  const char* user = pw != nullptr ? pw->pw_name : std::getenv("USER");
  return std::string(user != nullptr ? user : "?") + "@" + host + " (carapace serve, pid " +
         std::to_string(::getpid()) + ")";
}

// Host mode at the start: the sessions this server's last run was running
// (stopped by its SIGTERM or SIGINT) and those a crash cut off go on, in
// step mode; parked ones stay parked; ones a person stopped stay stopped.
void resume_where_it_left(const Context& ctx, Runtime& rt) {
  std::vector<SessionSummary> rows;
  if (Status s = rt.list_sessions(SessionFilter{}, &rows); !s.ok()) {
    std::fprintf(stderr, "carapace serve: cannot list the sessions to resume: %s\n", ctx.shown(s.to_string()).c_str());
    return;
  }
  size_t resumed = 0;
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {  // oldest first
    const SessionSummary& row = *it;
    const bool ours = row.status == "stopped" && row.stop_reason.starts_with(web::kServeStopPrefix);
    if (row.status != "crashed" && !ours) continue;
    Status s = rt.resume_session(row.id, Runtime::ResumeOptions{});
    if (s.ok()) {
      ++resumed;
      std::printf("carapace serve: resumed %s (%s)\n", ctx.shown(row.id).c_str(),
                  ours ? "this server was stopped while it ran" : "crashed");
    } else {
      std::printf("carapace serve: could not resume %s: %s\n", ctx.shown(row.id).c_str(),
                  ctx.shown(s.to_string()).c_str());
    }
  }
  if (resumed > 0) std::fflush(stdout);
}

// HOME/serve.json: where this server listens, for the commands that go
// through it while it hosts the home (`carapace schedule`). Owner-only,
// written whole (a temporary file renamed); removed when it stops. A stale
// one (a crash) is told apart by its pid, which no longer holds the log.
void write_serve_file(const Context& ctx, const std::string& url, bool hosting) {
  const std::string path = ctx.home() + "/serve.json";
  const std::string tmp = path + ".tmp";
  nlohmann::json j = {{"url", url}, {"pid", static_cast<int64_t>(::getpid())}, {"hosting", hosting}};
  const std::string text = j.dump() + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

int run_serve(Context& ctx, const ServeArgs& args) {
  const bool loopback = web::is_loopback(args.bind);
  const char* env_token = std::getenv("CARAPACE_SERVE_TOKEN");
  if (args.no_token && !loopback) {
    return ctx.usage(
        Status::invalid_argument("--no-token with --bind " + args.bind +
                                 ", which is not loopback: beyond loopback every request needs the token"),
        "drop --no-token (the URL printed carries the token), or bind to 127.0.0.1");
  }
  if (args.no_token && env_token != nullptr && *env_token != '\0') {
    return ctx.usage(Status::invalid_argument("--no-token, yet CARAPACE_SERVE_TOKEN is set"),
                    "choose one: unset CARAPACE_SERVE_TOKEN, or drop --no-token");
  }
  // The home is checked (and made, owner-only) as every other command does.
  if (Status home_ok = ctx.prepare_home(/*create=*/true); !home_ok.ok()) return ctx.fail(home_ok);
  web::ServeToken token;
  if (!args.no_token) {
    Status s = web::serve_token(ctx.home(), env_token, &token);
    if (!s.ok()) return ctx.fail(s);
  }
  // Host mode: this process runs the sessions, the home's one writer.
  std::string held_note;
  bool hosting = !args.read_only;
  if (hosting && lock_holder(ctx.log_path()) != 0) {
    hosting = false;
    held_note = "another process writes this home, so this server is read-only (its writes answer 405)";
  }
  // The host outlives the runtime, whose sessions call it until it is gone.
  std::unique_ptr<web::SessionHost> session_host;
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<web::ScheduleRunner> schedules;  // stopped before the runtime closes
  nlohmann::json config_schedules;
  if (hosting && args.runtime.scenario.empty() && args.runtime.provider.empty()) {
    // Nothing to run sessions with: the view alone, said so.
    Config config;
    if (int rc = load_cli_config(ctx, args.runtime.config, &config); rc != kExitOk) return rc;
    if (config.provider.name == "scripted" && config.provider.scenario.empty()) {
      hosting = false;
      held_note =
          "no provider is configured, so this server runs no session (pass --scenario FILE, or --provider and "
          "--model, or set provider in the config)";
    }
  }
  std::string workspace_root = args.workspace_root.empty() ? ctx.home() + "/workspaces" : args.workspace_root;
  {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(workspace_root, ec);
    if (!ec) workspace_root = absolute.lexically_normal().string();
    while (workspace_root.size() > 1 && workspace_root.back() == '/') workspace_root.pop_back();
  }
  if (hosting) {
    if (::mkdir(workspace_root.c_str(), 0700) != 0 && errno != EEXIST) {
      return ctx.fail(Status::io_error("cannot make the workspace root " + workspace_root + ": " + std::strerror(errno)));
    }
    session_host = std::make_unique<web::SessionHost>(
        web::HostOptions{.workspace_root = workspace_root, .who = who_answers(), .redactor = &ctx.redactor()});
    web::SessionHost* host = session_host.get();
    RuntimeArgs runtime = args.runtime;
    runtime.on_approval = [host](const Approval& a) { host->on_approval(a); };
    runtime.observe_delta = [host](const std::string& session, const StreamDelta& d) { host->on_delta(session, d); };
    if (int rc = open_runtime(ctx, runtime, &rt); rc != kExitOk) return rc;
    session_host->attach(rt.get());
    // Schedules (docs/schedules.md): the home's, and config.json's.
    web::RunnerOptions runner_options{.who = who_answers()};
    if (!args.runtime.faults.empty()) {
      std::shared_ptr<FaultPlan> plan;
      if (Status s = FaultPlan::load(args.runtime.faults, &plan); !s.ok()) return ctx.fail(s);
      runner_options.faults = plan;
    }
    schedules = std::make_unique<web::ScheduleRunner>(rt.get(), session_host.get(), runner_options);
    session_host->set_schedules(schedules.get());
    std::string config_path = args.runtime.config;
    std::error_code ec;
    if (config_path.empty() && std::filesystem::exists(ctx.home() + "/config.json", ec)) {
      config_path = ctx.home() + "/config.json";
    }
    if (!config_path.empty()) {
      Status s = web::read_config_schedules(config_path, &config_schedules);
      if (s.ok() && config_schedules.is_object()) {  // checked before anything starts
        for (const auto& [name, spec] : config_schedules.items()) {
          ScheduleDefined checked;
          s = schedule::validate_name(name);
          if (s.ok()) s = schedule::definition_from_json(name, spec, "config.json: schedules." + name, 0, &checked);
          if (!s.ok()) break;
        }
      }
      if (!s.ok()) return ctx.fail(s, "docs/schedules.md describes a schedule's fields");
    }
  }
  std::unique_ptr<web::HomeView> home;
  Status s = web::HomeView::open(ctx, &home);
  if (!s.ok()) return ctx.fail(s, "`carapace verify --all` checks the home");
  web::ServerOptions options{.bind = args.bind,
                             .port = args.port,
                             .token = token.value,
                             .version = CARAPACE_VERSION,
                             .home = ctx.home(),
                             .notify = !args.poll,
                             .poll_interval_ms = args.interval_ms,
                             .max_connections = args.max_connections,
                             .host = session_host.get(),
                             .workspace_root = hosting ? workspace_root : ""};
  // The schedules, loaded (and config.json's applied) before any request.
  std::vector<std::string> schedule_report;
  if (schedules) {
    s = schedules->load(config_schedules.is_null() ? nullptr : &config_schedules, &schedule_report);
    if (!s.ok()) {
      schedules.reset();
      rt->set_stop_reason(std::string(web::kServeStopPrefix) + " (a schedule did not load)");
      rt.reset();
      return ctx.fail(s, "docs/schedules.md describes a schedule's fields; `carapace verify --all` checks the home");
    }
  }
  std::unique_ptr<web::WebServer> server;
  s = web::WebServer::start(options, home.get(), &server);
  if (!s.ok()) {
    return ctx.fail(s, s.is_invalid_argument() ? "" : "another program may have the port: try --port 0 for any free one");
  }
  std::string host = args.bind.find(':') != std::string::npos && args.bind.front() != '[' ? "[" + args.bind + "]"
                                                                                         : args.bind;
  std::string url = "http://" + host + ":" + std::to_string(server->port()) + "/";
  // The token rides in the URL's fragment, which a browser never sends (so
  // no server or proxy log has it); the page reads it from there. One from
  // the environment is never printed: its owner has it.
  std::printf("carapace serve: listening on %s%s\n", url.c_str(),
              token.value.empty() || token.from_env ? "" : ("#token=" + token.value).c_str());
  if (token.from_env) {
    std::printf("carapace serve: the token is CARAPACE_SERVE_TOKEN's: open %s#token=TOKEN\n", url.c_str());
  } else if (!token.value.empty()) {
    std::printf("carapace serve: the token is in %s (%s; remove it for a new one)\n", token.file.c_str(),
                token.made ? "made now" : "kept from before");
  } else {
    std::printf(
        "carapace serve: WARNING: no token (--no-token): every user of this machine can read this home "
        "through port %u\n",
        static_cast<unsigned>(server->port()));
  }
  std::printf("carapace serve: %zu session%s in %s; %s; Ctrl-C stops\n", home->session_count(),
              home->session_count() == 1 ? "" : "s", ctx.home().c_str(),
              server->updates() == "inotify"
                  ? "following the log with inotify"
                  : ("reading the log every " + std::to_string(args.interval_ms) + " ms").c_str());
  if (hosting) {
    std::printf("carapace serve: hosting: sessions run in this process (the home's one writer); workspaces under %s\n",
                workspace_root.c_str());
  } else {
    std::printf("carapace serve: read-only: %s\n",
                held_note.empty() ? "--read-only (the API takes no write)" : held_note.c_str());
  }
  std::fflush(stdout);
  if (session_host) session_host->set_publisher(server->publisher());
  if (hosting) {  // the home's one writer: no other hosting server can overwrite it
    write_serve_file(ctx, url, hosting);
    ctx.at_end.push_back([path = ctx.home() + "/serve.json"] { ::unlink(path.c_str()); });
  }
  arm_stop_signals();
  if (hosting && !args.no_resume) resume_where_it_left(ctx, *rt);
  if (schedules) {
    schedules->set_publisher(server->publisher());
    schedules->start(&schedule_report);
    for (const auto& line : schedule_report) std::printf("carapace serve: %s\n", ctx.shown(line).c_str());
    std::fflush(stdout);
  }
  server->run([] { return stop_signal() != 0; });
  if (hosting) {
    const int sig = stop_signal();
    const std::string why = std::string(web::kServeStopPrefix) + " (" + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ")";
    std::printf("carapace serve: stopping the sessions it runs (%s); its next start resumes them\n", why.c_str());
    std::fflush(stdout);
    rt->set_stop_reason(why);
    server.reset();  // no request is under way past here (what sessions publish now is dropped)
    schedules.reset();  // nothing fires past here; runs the stop cuts are resumed, not ended
    rt.reset();  // session.stopped recorded for each, tool processes killed
  }
  std::printf("carapace serve: stopped\n");
  return kExitOk;
}

}  // namespace

void register_serve_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Host the home's sessions: a web page and an API to start, message, stop, resume, fork and approve them "
      "(--read-only: a live view beside other commands)");
  cmd->add_option("--port", args->port, "TCP port; 0 takes any free one")->capture_default_str();
  cmd->add_option("--bind", args->bind,
                  "Address to listen on (loopback, or an interface's: then use a TLS proxy)")
      ->capture_default_str();
  cmd->add_option(
         "--interval-ms", args->interval_ms,
         "Least time between two reads of the log (with --poll, or without inotify: the time between reads)")
      ->capture_default_str()
      ->check(CLI::Range(10, 60'000));
  cmd->add_flag(
      "--no-token", args->no_token,
      "Loopback only: ask no token, so that EVERY user of this machine can read the home through the port "
      "(by default the token is CARAPACE_SERVE_TOKEN, else the home's serve.token, printed in the URL)");
  cmd->add_flag(
      "--poll", args->poll,
      "Read the log every --interval-ms instead of when inotify reports a change (for a file system "
      "inotify does not see, e.g. a network one)");
  cmd->add_option("--max-connections", args->max_connections,
                  "Open connections at most, WebSockets included (one more is closed at once and counted)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--read-only", args->read_only,
                "Run no session and take no write: a live view of a home other commands write (the default when "
                "another process writes the home)");
  cmd->add_option("--workspace-root", args->workspace_root,
                  "Directory under which sessions started over the API get their workspaces (default: "
                  "HOME/workspaces)");
  cmd->add_flag("--no-resume", args->no_resume,
                "At the start, leave crashed sessions and those this server stopped as they are (default: resume them)");
  add_runtime_options(cmd, args->runtime);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_serve(ctx, *args); }; });
}

}  // namespace carapace::cli
