// carapace replay <session> | --all
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "events/event_json.h"
#include "events/payload.h"
#include "replay/bundle.h"
#include "replay/replayer.h"
#include "runtime/home.h"
#include "runtime/session_setup.h"
#include "storage/keys.h"
#include "tools/cli.h"
#include "tools/cli_run.h"

namespace carapace::cli {
namespace {

// A temporary directory, removed with it.
class TempHome {
 public:
  Status open() {
    std::string pattern = (std::filesystem::temp_directory_path() / "carapace-bundle-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error("cannot create a temporary directory: " + std::string(std::strerror(errno)));
    }
    path_ = pattern;
    return Status();
  }
  ~TempHome() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ReplayArgs {
  std::string session;
  bool all = false;
  std::string config;
  uint64_t until_turn = 0;
  uint64_t live_after = 0;
  std::string task;
  RuntimeArgs live;  // the provider to go on with (--live-after)
};

// Whether two recordings are the same events, byte for byte.
bool same_events(const std::vector<Event>& a, const std::vector<Event>& b) {
  if (a.size() != b.size()) return false;
  std::string x, y;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].seq != b[i].seq || a[i].ts_us != b[i].ts_us || a[i].type_number() != b[i].type_number())
      return false;
    x.clear();
    y.clear();
    encode_payload(a[i].body, x);
    encode_payload(b[i].body, y);
    if (x != y) return false;
  }
  return true;
}

// The live part of a bundle's replay runs in the home: the bundle's session
// is imported there first (as `bundle import` does, without its bodies),
// unless the home holds the very same recording (the home that wrote it).
int import_for_live(Context& ctx, const Bundle& bundle) {
  if (Status home = ctx.prepare_home(/*create=*/true); !home.ok()) return ctx.fail(home);
  auto log = ctx.open_log(EventLog::Mode::kWriter);
  if (!log) return kExitFailed;
  uint64_t last = 0;
  if (Status s = log->last_seq(bundle.session, &last); !s.ok()) return ctx.fail(s);
  if (last != 0) {
    std::vector<Event> here;
    if (Status s = log->read(bundle.session, 1, UINT64_MAX, &here); !s.ok()) return ctx.fail(s);
    if (same_events(here, bundle.events)) return kExitOk;
    return ctx.fail(Status::invalid_argument("session '" + bundle.session +
                                             "' already exists in this home and is not the bundle's"),
                    "import the bundle under another id (carapace bundle import FILE --as ID), then "
                    "`carapace replay ID --live-after N`");
  }
  // Verified by the replay, in its scratch log, under the same id.
  if (Status s = import_bundle(log.get(), bundle, "", nullptr, /*checked=*/true); !s.ok()) return ctx.fail(s);
  if (!ctx.json) {
    std::fprintf(stderr, "imported %s into %s to go on live from it\n", bundle.session.c_str(),
                 ctx.home().c_str());
  }
  return kExitOk;
}

// After an identical replay up to turn `at`: the session goes on live, as a
// new session forked there.
int go_live(Context& ctx, const ReplayArgs& args, const std::string& id) {
  RuntimeArgs live = args.live;
  live.config = args.config;
  std::unique_ptr<Runtime> rt;
  if (int rc = open_runtime(ctx, live, &rt, id); rc != kExitOk) return rc;
  StatusLine status(ctx, !ctx.json && isatty(STDERR_FILENO));
  std::string fork;
  Status s = rt->fork_session(
      id, args.live_after,
      Runtime::ForkOptions{.task = args.task, .on_event = event_printer(live, status)}, &fork);
  if (!s.ok()) return ctx.fail(s);
  if (!ctx.json) {
    std::fprintf(stderr, "live from turn %llu of %s as %s\n", static_cast<unsigned long long>(args.live_after),
                 id.c_str(), fork.c_str());
  }
  return report_outcome(ctx, *rt, fork, status);
}

nlohmann::json divergence_json(const ReplayDivergence& d) {
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& f : d.fields) fields.push_back({{"field", f.field}, {"expected", f.expected}, {"actual", f.actual}});
  nlohmann::json before = nlohmann::json::array();
  for (const auto& e : d.before) before.push_back(event_to_json(e));
  return {{"seq", d.seq},
          {"turn", d.turn},
          {"expected", d.expected ? event_to_json(*d.expected) : nlohmann::json(nullptr)},
          {"actual", d.actual ? event_to_json(*d.actual) : nlohmann::json(nullptr)},
          {"fields", fields},
          {"before", before}};
}

nlohmann::json report_json(const ReplayReport& r, const std::vector<std::string>& notes = {}) {
  nlohmann::json j{{"session", r.session},
                   {"identical", r.identical()},
                   {"events", r.events},
                   {"turns", r.turns},
                   {"resumes", r.resumes},
                   {"divergence", r.divergence ? divergence_json(*r.divergence) : nlohmann::json(nullptr)}};
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

std::string identical_line(const ReplayReport& r) {
  std::string line = "identical: " + count(r.events, "event") + ", " + count(r.turns, "turn");
  if (r.resumes > 0) line += " (" + count(r.resumes, "resume") + " re-enacted)";
  return line;
}

// "tool.requested -> hook.decided", or the first differing field.
std::string divergence_brief(const ReplayDivergence& d) {
  std::string what = "seq " + std::to_string(d.seq) + " (turn " + std::to_string(d.turn) + "): ";
  if (!d.actual) return what + "the replay stopped; the recording goes on with " + std::string(d.expected->type_name());
  if (!d.expected) return what + "the replay wrote " + std::string(d.actual->type_name()) + " past the recording's end";
  if (!d.fields.empty() && d.fields[0].field == "type") {
    return what + "recorded " + d.fields[0].expected + ", replayed " + d.fields[0].actual;
  }
  std::string names;
  for (const auto& f : d.fields) names += (names.empty() ? "" : ", ") + f.field;
  return what + std::string(d.expected->type_name()) + " differs in " + names;
}

// Terminal controls made visible, not redacted: the lines are made of
// digests and ids, which the redactor would take for secrets.
void print_divergence(const ReplayDivergence& d) {
  auto line = [](const std::string& text) { std::printf("%s\n", terminal_safe(text).c_str()); };
  line("DIVERGED at " + divergence_brief(d));
  for (const auto& e : d.before) line("    " + describe_event(e));
  line("  recorded: " + (d.expected ? describe_event(*d.expected) : "(nothing: the recording ends)"));
  line("  replayed: " + (d.actual ? describe_event(*d.actual) : "(nothing: the replay stopped)"));
  if (d.expected && d.actual && !(d.fields.size() == 1 && d.fields[0].field == "type")) {
    for (const auto& f : d.fields) {
      line("  field " + f.field + "\n    recorded: " + (f.expected.empty() ? "(absent)" : f.expected) +
           "\n    replayed: " + (f.actual.empty() ? "(absent)" : f.actual));
    }
  }
}

int run_replay(Context& ctx, const ReplayArgs& args) {
  if (!args.all && args.session.empty()) {
    return ctx.usage(Status::invalid_argument("name a session to replay, or pass --all"),
                    "`carapace sessions` lists the sessions");
  }
  // A bundle file (carapace bundle) replays from a scratch home of its own.
  std::error_code ec;
  const bool from_bundle = !args.all && std::filesystem::is_regular_file(args.session, ec);
  std::string session = args.session;
  std::unique_ptr<TempHome> bundle_home;  // outlives the log in it
  std::unique_ptr<EventLog> log;
  Config home_config;
  Bundle bundle;
  if (from_bundle) {
    // Bodies are checked against their keys and left out: a replay reads none.
    if (Status s = read_bundle(args.session, &bundle, ReadBundleOptions{.keep_bodies = false}); !s.ok()) {
      return ctx.fail(s);
    }
    bundle_home = std::make_unique<TempHome>();
    if (Status s = bundle_home->open(); !s.ok()) return ctx.fail(s);
    if (Status s = EventLog::open(EventLog::Options{.path = bundle_home->path() + "/log", .scratch = true}, &log);
        !s.ok()) {
      return ctx.fail(s);
    }
    if (Status s = import_bundle_to_scratch(log.get(), bundle); !s.ok()) return ctx.fail(s);
    session = bundle.session;
    if (!args.config.empty()) {
      std::vector<std::string> warnings;
      if (Status s = load_config(args.config, &home_config, &warnings); !s.ok()) return ctx.fail(s);
    }
  } else {
    if (!args.session.empty()) {
      if (Status valid = keys::validate_session_id(args.session); !valid.ok()) {
        return ctx.fail(valid, "name a session, or a bundle file that exists");
      }
    }
    // The home's config (or --config) for sessions that stored none.
    if (int rc = load_cli_config(ctx, args.config, &home_config); rc != kExitOk) return rc;
    log = ctx.open_log(EventLog::Mode::kReader);
    if (!log) return kExitFailed;
  }
  // A replay stops its sessions where the recorded runs crashed; the loop's
  // error line about it is not news.
  spdlog::set_level(spdlog::level::off);

  // Replays one session with the configuration it stored (unless --config
  // is given), else the home's. One that came from a bundle (a bundle file,
  // or an imported session) has no prompt file of this machine read.
  std::vector<std::string> notes;
  auto replay_one = [&](const std::string& id, ReplayReport* report) -> Status {
    notes.clear();
    Config config = home_config;
    StoredRun run;
    Status stored = stored_run(*log, id, RecordedAt::kOpening, &run);
    if (!stored.ok() && !stored.is_not_found()) return stored;
    bool imported = false;
    CARAPACE_RETURN_IF_ERROR(imported_session(*log, id, &imported));
    if (args.config.empty() && stored.ok()) {
      config = run.config;
      if (imported) notes = drop_prompt_files(&config);
    }
    ReplayOptions options{.tools = std::make_shared<ToolRegistry>(),
                          .hooks = std::make_shared<HookRegistry>(),
                          .settings =
                              [&config](const SessionState& s) {
                                return session_settings(config, s.workspace, s.max_turns, s.instructions);
                              },
                          .until_turn = args.live_after > 0 ? args.live_after : args.until_turn};
    CARAPACE_RETURN_IF_ERROR(add_builtin_tools(config, nullptr, options.tools.get()));
    // MCP tools as recorded: no server is started.
    CARAPACE_RETURN_IF_ERROR(add_recorded_mcp_tools(run.tools, options.tools.get()));
    CARAPACE_RETURN_IF_ERROR(add_config_hooks(config, options.hooks.get()));
    if (args.config.empty()) {
      // Where a resume or fork changed how the session ran, the replay follows.
      options.reconfigure = [id, imported, &notes](const SessionConfigured& recorded,
                                                   ReplayConfiguration* next) {
        auto changed = std::make_shared<Config>();
        std::vector<std::string> warnings;
        CARAPACE_RETURN_IF_ERROR(
            parse_config(recorded.config.text, "the configuration stored with session " + id, changed.get(), &warnings));
        if (imported) {
          for (std::string& note : drop_prompt_files(changed.get())) notes.push_back(std::move(note));
        }
        next->tools = std::make_shared<ToolRegistry>();
        next->hooks = std::make_shared<HookRegistry>();
        CARAPACE_RETURN_IF_ERROR(add_builtin_tools(*changed, nullptr, next->tools.get()));
        CARAPACE_RETURN_IF_ERROR(add_recorded_mcp_tools(recorded_tools(recorded), next->tools.get()));
        CARAPACE_RETURN_IF_ERROR(add_config_hooks(*changed, next->hooks.get()));
        next->settings = [changed](const SessionState& s) {
          return session_settings(*changed, s.workspace, s.max_turns, s.instructions);
        };
        return Status();
      };
    }
    return replay_session(*log, id, options, report);
  };

  if (!args.all) {
    ReplayReport report;
    Status s = replay_one(session, &report);
    if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
    if (!s.ok()) return ctx.fail(s);
    if (args.live_after > 0 && report.identical()) {
      if (report.turns < args.live_after) {
        return ctx.fail(Status::invalid_argument("session " + session + " has " + count(report.turns, "turn") +
                                                 "; --live-after " + std::to_string(args.live_after) +
                                                 " is past its end"));
      }
      if (!ctx.json) std::fprintf(stderr, "%s\n", identical_line(report).c_str());
      log.reset();  // the runtime writes to this home
      if (from_bundle) {
        if (int rc = import_for_live(ctx, bundle); rc != kExitOk) return rc;
      }
      return go_live(ctx, args, session);
    }
    std::string summary = report.identical() ? identical_line(report)
                                             : "diverged at " + divergence_brief(*report.divergence);
    if (ctx.json) {
      print_redacted(
          ctx, {{"success", report.identical()}, {"data", report_json(report, notes)}, {"summary", summary}});
    } else if (report.identical()) {
      std::printf("%s\n", summary.c_str());
    } else {
      print_divergence(*report.divergence);
      for (const std::string& note : notes) std::printf("  note: %s\n", ctx.shown(note).c_str());
    }
    return report.identical() ? kExitOk : kExitFailed;
  }

  std::vector<SessionMeta> sessions;
  if (Status s = log->list_sessions(&sessions); !s.ok()) return ctx.fail(s);
  size_t identical = 0, diverged = 0, failed = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& meta : sessions) {
    ReplayReport report;
    Status s = replay_one(meta.id, &report);
    if (!s.ok()) {
      ++failed;
      if (ctx.json) {
        rows.push_back({{"session", meta.id}, {"identical", false}, {"error", s.to_string()}});
      } else {
        std::printf("ERROR      %s: %s\n", meta.id.c_str(), ctx.shown(s.to_string()).c_str());
      }
      continue;
    }
    report.identical() ? ++identical : ++diverged;
    if (ctx.json) {
      rows.push_back(report_json(report));
    } else if (report.identical()) {
      std::printf("identical  %s: %s\n", meta.id.c_str(), identical_line(report).substr(11).c_str());
    } else {
      std::printf("DIVERGED   %s: at %s\n", meta.id.c_str(),
                  terminal_safe(divergence_brief(*report.divergence)).c_str());
    }
  }
  std::string summary = count(sessions.size(), "session") + ": " + std::to_string(identical) + " identical, " +
                        std::to_string(diverged) + " diverged, " + std::to_string(failed) + " could not be replayed";
  bool ok = diverged == 0 && failed == 0;
  if (ctx.json) {
    print_redacted(ctx, {{"success", ok}, {"data", {{"sessions", rows}}}, {"summary", summary}});
  } else {
    std::printf("%s\n", summary.c_str());
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void register_replay_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ReplayArgs>();
  auto* cmd = app.add_subcommand(
      "replay",
      "Re-run a recorded session offline with the current code and config (no model call, no tool runs) and "
      "report `identical` or the first event that differs; exit 1 on a divergence");
  auto* session = cmd->add_option("session", args->session, "Session id, or a bundle file (carapace bundle)");
  cmd->add_flag("--all", args->all, "Replay every session in the home (for CI): one line each and a summary")
      ->excludes(session);
  cmd->add_option("--config", args->config,
                  "Replay against this config (default: the one stored with each session)");
  auto* until = cmd->add_option("--until-turn", args->until_turn, "Stop after the checkpoint of turn N")
                    ->check(whole_number_from(1));
  auto* live = cmd->add_option("--live-after", args->live_after,
                               "Replay up to turn N, then go on live from there as a new session forked at N, "
                               "with the configured provider")
                   ->check(whole_number_from(1))
                   ->excludes(until)
                   ->excludes("--all");
  cmd->add_option("--task", args->task, "With --live-after: a new user message for the live session")->needs(live);
  cmd->add_option("--scenario", args->live.scenario, "With --live-after: the scripted provider's scenario")
      ->needs(live);
  cmd->add_option("--provider", args->live.provider, "With --live-after: the provider")->needs(live);
  cmd->add_option("--model", args->live.model, "With --live-after: the model")->needs(live);
  add_trust_bundle_option(cmd, args->live)->needs(live);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_replay(ctx, *args); }; });
}

}  // namespace carapace::cli
