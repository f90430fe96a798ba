// carapace serve: a local web view of the home, live (docs/serve.md).
#include <cstdio>
#include <cstdlib>

#include "runtime/home.h"
#include "tools/cli.h"
#include "tools/serve/home_view.h"
#include "tools/serve/serve_token.h"
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
};

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
  std::unique_ptr<web::HomeView> home;
  Status s = web::HomeView::open(ctx, &home);
  if (!s.ok()) return ctx.fail(s, "`carapace verify --all` checks the home");
  web::ServerOptions options{.bind = args.bind,
                             .port = args.port,
                             .token = token.value,
                             .version = CARAPACE_VERSION,
                             .home = ctx.home(),
                             .notify = !args.poll,
                             .poll_interval_ms = args.interval_ms};
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
  std::fflush(stdout);
  arm_stop_signals();
  server->run([] { return stop_signal() != 0; });
  std::printf("carapace serve: stopped\n");
  return kExitOk;
}

}  // namespace

void register_serve_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "A web view of the home in the browser: sessions, traces, live status (reads beside running commands)");
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
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_serve(ctx, *args); }; });
}

}  // namespace carapace::cli
