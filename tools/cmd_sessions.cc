// carapace sessions
#include <cstdio>
#include <iostream>

#include "actors/collector/log_watch.h"
#include "events/session_state.h"
#include "storage/db_lock.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

// The index's status, or for a session that never finished: "stopped" when
// its last event is session.stopped (its runtime stopped it), "crashed" when
// no process holds the log (nobody is writing it), else "running" (a process
// writes the home; a crashed session cannot be told from a running one then).
std::string shown_status(EventLog& log, const SessionMeta& m, uint64_t last, bool log_held) {
  if (m.status == SessionStatus::kRunning && last > 0) {
    if (ends_stopped(log, m.id, last)) return "stopped";
    if (!log_held) return "crashed";
  }
  return std::string(status_name(m.status));
}

int run_sessions(Context& ctx) {
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  std::vector<SessionMeta> sessions;
  std::vector<std::string> unreadable;
  Status s = log->list_sessions(&sessions, &unreadable);
  if (!s.ok()) return ctx.fail(s, "`carapace verify --all` checks the session index against the log");
  const bool log_held = lock_holder(ctx.log_path()) != 0;
  std::string summary = count(sessions.size(), "session") + " in " + ctx.home();
  if (!unreadable.empty()) {
    summary += "; " + std::to_string(unreadable.size()) + " unreadable index entr" + (unreadable.size() == 1 ? "y" : "ies") + " skipped (" + ctx.with_home("`carapace verify --all`") + ")";
  }
  // Damage in the index is reported, and the readable entries still listed.
  for (const auto& entry : unreadable) {
    std::fprintf(stderr, "carapace: skipped the session index entry %s\n", ctx.shown(entry).c_str());
  }
  if (ctx.json) {
    nlohmann::json data = nlohmann::json::array();
    for (const auto& m : sessions) {
      uint64_t last = 0;
      log->last_seq(m.id, &last).ok();
      data.push_back({{"id", m.id},
                      {"status", shown_status(*log, m, last, log_held)},
                      {"turns", m.committed_turn},
                      {"checkpoint_seq", m.committed_seq},
                      {"last_seq", last},
                      {"agent_id", m.agent_id},
                      {"provider", m.provider},
                      {"model", m.model},
                      {"parent_session", m.parent_session},
                      {"parent_turn", m.parent_turn},
                      {"created_us", m.created_us},
                      {"updated_us", m.updated_us},
                      {"imported_seq", m.imported_seq}});
    }
    print_redacted(ctx, {{"success", true}, {"data", data}, {"summary", summary}, {"unreadable", unreadable}});
    return kExitOk;
  }
  if (sessions.empty()) {
    std::cout << "no sessions in " << ctx.home() << "\n";
    return kExitOk;
  }
  std::printf("%-32s %-10s %6s %9s  %-19s  %s\n", "SESSION", "STATUS", "TURNS", "EVENTS", "UPDATED", "MODEL");
  for (const auto& m : sessions) {
    uint64_t last = 0;
    log->last_seq(m.id, &last).ok();
    std::string model = m.provider + "/" + m.model;
    if (!m.parent_session.empty())
      model += "  (fork of " + m.parent_session + "@" + std::to_string(m.parent_turn) + ")";
    if (m.imported_seq > 0) model += "  (imported)";
    std::printf("%-32s %-10s %6llu %9llu  %-19s  %s\n", m.id.c_str(),
                shown_status(*log, m, last, log_held).c_str(), static_cast<unsigned long long>(m.committed_turn),
                static_cast<unsigned long long>(last), local_time(m.updated_us).c_str(), model.c_str());
  }
  std::cout << summary << "\n";
  return kExitOk;
}

}  // namespace

void register_sessions_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("sessions", "List the sessions in the data directory");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx] { ctx.run = [&ctx] { return run_sessions(ctx); }; });
}

}  // namespace carapace::cli
