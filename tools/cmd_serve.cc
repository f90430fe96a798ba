// carapace serve: a local web view of the home, live (docs/serve.md).
#include <cstdio>
#include <cstdlib>

#include "tools/cli.h"
#include "tools/serve/home_view.h"
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
};

int run_serve(Context& ctx, const ServeArgs& args) {
  // The token: CARAPACE_SERVE_TOKEN if set; a fresh one when bound beyond loopback.
  std::string token;
  bool token_from_env = false;
  if (const char* env = std::getenv("CARAPACE_SERVE_TOKEN"); env != nullptr && *env != '\0') {
    token = env;
    token_from_env = true;
    if (token.size() < 16) {
      return ctx.fail(Status::invalid_argument("CARAPACE_SERVE_TOKEN is shorter than 16 characters"),
                      "use a long random token, or unset it to have one made");
    }
  } else if (!web::is_loopback(args.bind)) {
    token = web::random_token();
    if (token.empty()) return ctx.fail(Status::io_error("cannot read random bytes for a token"));
  }
  std::unique_ptr<web::HomeView> home;
  Status s = web::HomeView::open(ctx, &home);
  if (!s.ok()) return ctx.fail(s, "`carapace verify --all` checks the home");
  web::ServerOptions options{.bind = args.bind, .port = args.port, .token = token, .version = CARAPACE_VERSION,
                             .poll_interval_ms = args.interval_ms};
  std::unique_ptr<web::WebServer> server;
  s = web::WebServer::start(options, home.get(), &server);
  if (!s.ok()) {
    return ctx.fail(s, s.is_invalid_argument() ? "" : "another program may have the port: try --port 0 for any free one");
  }
  std::string host = args.bind.find(':') != std::string::npos && args.bind.front() != '[' ? "[" + args.bind + "]"
                                                                                         : args.bind;
  std::string url = "http://" + host + ":" + std::to_string(server->port()) + "/";
  // The URL carries a token made here (the user needs it); never one from the environment.
  std::printf("carapace serve: listening on %s%s\n", url.c_str(),
              token.empty() || token_from_env ? "" : ("?token=" + token).c_str());
  std::printf("carapace serve: %zu session%s in %s; Ctrl-C stops\n", home->session_count(),
              home->session_count() == 1 ? "" : "s", ctx.home().c_str());
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
                  "Address to listen on; beyond loopback a token is required (CARAPACE_SERVE_TOKEN, or one is made "
                  "and printed)")
      ->capture_default_str();
  cmd->add_option("--interval-ms", args->interval_ms, "Time between reads of the log")
      ->capture_default_str()
      ->check(CLI::Range(10, 60'000));
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_serve(ctx, *args); }; });
}

}  // namespace carapace::cli
