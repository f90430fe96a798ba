// carapace verify [<session>|--all]
#include <cstdio>
#include <iostream>

#include "base/text.h"
#include "replay/verify.h"
#include "schedule/schedule_store.h"
#include "storage/keys.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

struct VerifyArgs {
  std::string session;
  bool all = false;
};

// The streams of schedules ("schedule:NAME"): every record's checksum and
// the schedule's fold (its events in an order that makes sense).
Status verify_schedules(const EventLog& log, const std::string& only, VerifyReport* report) {
  std::vector<std::string> names;
  if (only.empty()) {
    CARAPACE_RETURN_IF_ERROR(schedule::list_schedules(log, &names));
  } else {
    names.push_back(only);
  }
  for (const auto& name : names) {
    const std::string stream = schedule::stream_id(name);
    uint64_t last = 0;
    CARAPACE_RETURN_IF_ERROR(log.last_seq(stream, &last));
    if (last == 0 && !only.empty()) return Status::not_found("no schedule '" + name + "' in " + log.path());
    schedule::ScheduleState state;
    Status s = schedule::load_schedule(log, name, &state);
    report->sessions.push_back(SessionVerdict{.session = stream, .events = last, .ok = s.ok()});
    if (!s.ok()) report->issues.push_back(VerifyIssue{.session = stream, .kind = "schedule", .detail = s.message()});
  }
  return Status();
}

int run_verify(Context& ctx, const VerifyArgs& args) {
  const bool schedule = args.session.starts_with(kScheduleStreamPrefix);
  if (!args.session.empty()) {
    Status valid = keys::validate_session_id(args.session);
    if (!valid.ok()) return ctx.fail(valid);
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  VerifyReport report;
  Status s = schedule ? Status()
             : args.session.empty() ? verify_all(*log, &report)
                                    : verify_session(*log, args.session, &report);
  if (s.ok() && (schedule || args.session.empty())) {
    s = verify_schedules(*log, schedule ? args.session.substr(kScheduleStreamPrefix.size()) : "", &report);
  }
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  if (!s.ok()) return ctx.fail(s);

  size_t bad_sessions = 0;
  uint64_t events = 0;
  for (const auto& v : report.sessions) {
    events += v.events;
    if (!v.ok) ++bad_sessions;
  }
  std::string summary =
      report.ok() ? "all " + count(report.sessions.size(), "session") + " verified, " + count(events, "event")
                  : count(report.issues.size(), "problem") + " in " + std::to_string(bad_sessions) + " of " +
                        count(report.sessions.size(), "session");
  if (ctx.json) {
    nlohmann::json sessions = nlohmann::json::array();
    for (const auto& v : report.sessions) {
      sessions.push_back({{"session", v.session},
                          {"ok", v.ok},
                          {"events", v.events},
                          {"checkpoints_verified", v.checkpoints_verified},
                          {"snapshots_checked", v.snapshots_checked},
                          {"unknown_skipped", v.unknown_skipped}});
    }
    nlohmann::json issues = nlohmann::json::array();
    for (const auto& i : report.issues) {
      issues.push_back({{"session", i.session}, {"seq", i.seq}, {"kind", i.kind}, {"detail", i.detail}});
    }
    std::cout << dump({{"success", report.ok()},
                       {"data", {{"sessions", sessions}, {"issues", issues}}},
                       {"summary", summary}})
              << "\n";
    return report.ok() ? kExitOk : kExitFailed;
  }
  for (const auto& v : report.sessions) {
    if (v.ok) {
      std::printf("ok    %s: %llu events, %llu checkpoints re-folded, %llu snapshots\n", v.session.c_str(),
                  static_cast<unsigned long long>(v.events),
                  static_cast<unsigned long long>(v.checkpoints_verified),
                  static_cast<unsigned long long>(v.snapshots_checked));
    } else {
      std::printf("FAIL  %s: %llu events\n", v.session.c_str(), static_cast<unsigned long long>(v.events));
      for (const auto& i : report.issues) {
        if (i.session != v.session) continue;
        if (i.seq != 0) {
          std::printf("        seq %llu  %s: %s\n", static_cast<unsigned long long>(i.seq), i.kind.c_str(),
                      terminal_safe(i.detail).c_str());
        } else {
          std::printf("        %s: %s\n", i.kind.c_str(), terminal_safe(i.detail).c_str());
        }
      }
    }
  }
  std::cout << summary << "\n";
  return report.ok() ? kExitOk : kExitFailed;
}

}  // namespace

void register_verify_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand(
      "verify", "Check checksums, seq contiguity and checkpoint hashes (re-folded); exit 1 on any problem");
  auto* session = cmd->add_option("session", args->session, "Session id (default: every session)");
  cmd->add_flag("--all", args->all, "Verify every session")->excludes(session);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_verify(ctx, *args); }; });
}

}  // namespace carapace::cli
