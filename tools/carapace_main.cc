// carapace: the command-line front end. Each subcommand is a thin layer over
// the library (tools/cmd_*.cc); this file only wires them up.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "runtime/config.h"
#include "runtime/logging.h"

#include "tools/allocator.h"
#include "tools/cli.h"
#include "tools/stop_signals.h"

#ifndef CARAPACE_VERSION
#define CARAPACE_VERSION "unknown"
#endif

namespace {

// Edits (insert, delete, replace, swap two neighbours) that turn a into b.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The subcommand of `app` closest to `word`, if one is close (a typo).
std::string closest_command(CLI::App* app, const std::string& word) {
  std::string best;
  size_t best_distance = 3;  // at most two edits, and fewer than half the word
  for (const CLI::App* sub : app->get_subcommands({})) {
    const std::string& name = sub->get_name();
    size_t d = edit_distance(word, name);
    if (d < best_distance && d * 2 < std::max(word.size(), name.size())) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

// A usage error as the command's --json would have it, or the human lines.
int usage_error(bool json, const std::string& message, const std::string& hint) {
  if (json) {
    nlohmann::json j{{"success", false}, {"error", {{"code", "usage"}, {"message", message}}}};
    if (!hint.empty()) j["error"]["hint"] = hint;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cerr << "carapace: " << carapace::terminal_safe(message) << "\n";
    if (!hint.empty()) std::cerr << "  " << carapace::terminal_safe(hint) << "\n";
  }
  return carapace::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace carapace::cli;
  using carapace::configure_logging;
  using carapace::LogOptions;
  install_stop_signals();  // before any thread starts
  // A reader that goes away (`carapace run ... | head`) must not kill a
  // session: a write to the closed pipe fails (EPIPE) instead. Tool
  // processes start with every signal at its default (process_guard.cc).
  ::signal(SIGPIPE, SIG_IGN);
  // Logs go to stderr (and the home's logs/); stdout carries answers and --json output only.
  (void)configure_logging(LogOptions{});
  CLI::App app{"carapace: a durable, observable runtime for LLM agents"};
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("-V,--version", "carapace " CARAPACE_VERSION);
  app.require_subcommand(1);
  Context ctx;
  app.add_option("--home", ctx.home_flag, "Data directory (default: $CARAPACE_HOME, else ~/.carapace)");
  std::string log_level;
  int verbose = 0;
  app.add_option("--log-level", log_level,
                 "Log lines on stderr from this level: trace, debug, info, warn (the default), error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "off"}));
  app.add_flag("-v,--verbose", verbose, "More log lines on stderr: -v info, -vv debug, -vvv trace");
  register_log_commands(app, ctx);
  register_sessions_command(app, ctx);
  register_verify_command(app, ctx);
  register_repair_command(app, ctx);
  register_run_command(app, ctx);
  register_approval_commands(app, ctx);
  register_demo_command(app, ctx);
  register_chat_command(app, ctx);
  register_torture_command(app, ctx);
  register_replay_command(app, ctx);
  register_bundle_command(app, ctx);
  register_trace_commands(app, ctx);
  register_collector_command(app, ctx);
  register_gc_command(app, ctx);
  register_mcp_commands(app, ctx);
  register_node_command(app, ctx);
  register_serve_command(app, ctx);
  register_schedule_commands(app, ctx);
  CLI::App* version = app.add_subcommand("version", "Print carapace's version (as --version does)");
  add_json_flag(version, ctx);
  version->callback([&ctx] {
    ctx.run = [&ctx] {
      const std::string allocator = carapace::allocator_in_use();
      if (ctx.json) {
        ctx.print_success({{"version", CARAPACE_VERSION}, {"allocator", allocator}},
                          "carapace " CARAPACE_VERSION);
      } else {
        std::cout << "carapace " CARAPACE_VERSION "\n"
                  << "allocator: " << allocator << "\n";
      }
      return kExitOk;
    };
  });
  for (const CLI::App* sub : app.get_subcommands({})) ctx.command_names.push_back(sub->get_name());
  app.allow_extras();  // an unknown command is named below, not reported as "a subcommand is required"
  bool wants_json = false;  // usage errors honour --json before the parser could set it
  for (int i = 1; i < argc; ++i) wants_json = wants_json || std::string_view(argv[i]) == "--json";
  // A word where a command was expected: say which, what is close, and where the list is.
  auto unknown_command = [&](CLI::App* where_app, const std::string& word) {
    std::string where = where_app == &app ? "carapace" : "carapace " + where_app->get_name();
    std::string near = closest_command(where_app, word);
    return usage_error(wants_json, "'" + word + "' is not a command of " + where,
                       (near.empty() ? std::string() : "did you mean `" + where + " " + near + "`? ") + "`" + where +
                           " --help` lists them");
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    CLI::App* deepest = &app;
    while (!deepest->get_subcommands().empty()) deepest = deepest->get_subcommands().front();
    std::vector<std::string> extras = deepest->remaining();
    if (!extras.empty() && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      return unknown_command(deepest, extras.front());
    }
    // --help and --version print and succeed; the rest is a usage error.
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kExitOk : kExitUsage;
    if (!wants_json) {
      app.exit(e);
      return kExitUsage;
    }
    return usage_error(true, e.what(), "`carapace " + (deepest == &app ? std::string() : deepest->get_name() + " ") +
                                           "--help` lists the options");
  }
  std::vector<std::string> extras = app.remaining();
  CLI::App* where_app = &app;
  for (CLI::App* sub = &app; sub != nullptr;) {
    auto subs = sub->get_subcommands();
    sub = subs.empty() ? nullptr : subs.front();
    if (sub != nullptr && !sub->remaining().empty()) {
      extras = sub->remaining();
      where_app = sub;
    }
  }
  if (!extras.empty()) {
    // A subcommand that takes subcommands: a word that is none of them.
    if (!where_app->get_subcommands({}).empty() && where_app->get_subcommands().empty()) {
      return unknown_command(where_app, extras.front());
    }
    return usage_error(wants_json, "unexpected argument '" + extras.front() + "'",
                       "`carapace --help` lists the commands");
  }
  if (!ctx.run) return kExitUsage;
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    ctx.command_path += (ctx.command_path.empty() ? "" : " ") + sub->get_name();
  }
  if (log_level.empty()) log_level = verbose >= 3 ? "trace" : verbose == 2 ? "debug" : verbose == 1 ? "info" : "warn";
  // JSON lines go to the home's logs/ when the home is there and ours
  // (commands check it fully before trusting anything in it).
  LogOptions logs{.stderr_level = log_level};
  struct stat home_stat {};
  const std::string home = ctx.home();
  if (::stat(home.c_str(), &home_stat) == 0 && S_ISDIR(home_stat.st_mode) && home_stat.st_uid == ::geteuid() &&
      (home_stat.st_mode & 077) == 0) {
    logs.dir = home + "/logs";
  }
  // The home config's redaction rules join the known patterns, for every
  // output and log line (a config that does not load is reported by the
  // commands that use it).
  std::error_code exists_error;
  if (!logs.dir.empty() && std::filesystem::exists(home + "/config.json", exists_error)) {
    carapace::Config config;
    std::vector<std::string> warnings;
    std::unique_ptr<carapace::Redactor> made;
    carapace::Status loaded = carapace::load_config(home + "/config.json", &config, &warnings);
    if (loaded.ok()) {
      loaded = carapace::Redactor::make(
          carapace::Redactor::Options{.patterns = config.redaction_patterns, .paths = config.redaction_paths}, &made);
    }
    if (loaded.ok()) {
      std::shared_ptr<const carapace::Redactor> shared(std::move(made));
      ctx.use_redactor(shared);
      logs.redactor = shared;
    } else {
      std::cerr << "carapace: warning: " << ctx.shown(loaded.message())
                << "; only the built-in redaction rules apply\n";
    }
  }
  if (carapace::Status s = configure_logging(logs); !s.ok()) {
    std::cerr << "carapace: warning: " << s.message() << "; logging to stderr only\n";
    logs.dir.clear();
    (void)configure_logging(logs);
  }
  // A command that creates the home logs into it from then on.
  if (logs.dir.empty()) {
    ctx.home_ready = [&logs, home] {
      logs.dir = home + "/logs";
      if (carapace::Status s = configure_logging(logs); !s.ok()) {
        std::cerr << "carapace: warning: " << s.message() << "; logging to stderr only\n";
        logs.dir.clear();
        (void)configure_logging(logs);
      }
    };
  }
  // No exception escapes a command: whatever a library throws becomes an
  // error message and exit status 1.
  try {
    int code = ctx.run();
    for (auto& f : ctx.at_end) f();
    return code;
  } catch (const std::exception& e) {
    std::cerr << "carapace: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "carapace: internal error (an unknown exception)\n";
  }
  return kExitFailed;
}
