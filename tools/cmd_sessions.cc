// carapace sessions
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "actors/collector/log_watch.h"
#include "events/session_state.h"
#include "replay/recovery.h"
#include "storage/db_lock.h"
#include "tools/cli.h"
#include "tools/trace_load.h"

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

struct SessionsArgs {
  std::string status;
  std::string since;
  uint64_t limit = 0;
};

struct Row {
  SessionMeta meta;
  uint64_t last = 0;
  std::string status;
  double cost_usd = 0;  // as of the last checkpoint
};

int run_sessions(Context& ctx, const SessionsArgs& args) {
  int64_t since_us = 0;
  if (!args.since.empty() && !parse_since(args.since, &since_us)) {
    return ctx.usage(Status::invalid_argument("--since '" + args.since + "' is not a duration"),
                     "e.g. --since 30m, 24h, 7d");
  }
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
  // Newest first (by the last checkpoint, else the start), filtered, cut to --limit.
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::vector<Row> rows;
  const size_t listed = sessions.size();
  for (auto& m : sessions) {
    Row r{.meta = std::move(m)};
    log->last_seq(r.meta.id, &r.last).ok();
    r.status = shown_status(*log, r.meta, r.last, log_held);
    const int64_t when = std::max(r.meta.updated_us, r.meta.created_us);
    if (!args.status.empty() && r.status != args.status) continue;
    if (!args.since.empty() && when < now_us - since_us) continue;
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    const int64_t x = std::max(a.meta.updated_us, a.meta.created_us);
    const int64_t y = std::max(b.meta.updated_us, b.meta.created_us);
    return x != y ? x > y : a.meta.id < b.meta.id;
  });
  if (args.limit > 0 && rows.size() > args.limit) rows.resize(args.limit);
  for (auto& r : rows) {
    RecoveredSession rec;
    if (r.meta.committed_seq > 0 && recover(*log, r.meta.id, RecoverOptions{}, &rec).ok()) {
      r.cost_usd = rec.committed.cost_usd;
    }
  }
  if (rows.size() != listed) summary = count(rows.size(), "session") + " shown of " + summary;
  if (ctx.json) {
    nlohmann::json data = nlohmann::json::array();
    for (const auto& r : rows) {
      const SessionMeta& m = r.meta;
      data.push_back({{"id", m.id},
                      {"status", r.status},
                      {"turns", m.committed_turn},
                      {"cost_usd", r.cost_usd},
                      {"checkpoint_seq", m.committed_seq},
                      {"last_seq", r.last},
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
  if (rows.empty()) {
    std::cout << (listed == 0 ? "no sessions in " + ctx.home() : "no session matches; " + summary) << "\n";
    return kExitOk;
  }
  std::printf("%-32s %-10s %6s %9s %10s  %-19s  %s\n", "SESSION", "STATUS", "TURNS", "EVENTS", "COST", "UPDATED",
              "MODEL");
  for (const auto& r : rows) {
    const SessionMeta& m = r.meta;
    std::string model = m.provider + "/" + m.model;
    if (!m.parent_session.empty())
      model += "  (fork of " + m.parent_session + "@" + std::to_string(m.parent_turn) + ")";
    if (m.imported_seq > 0) model += "  (imported)";
    char cost[32];
    std::snprintf(cost, sizeof cost, "$%.4f", r.cost_usd);
    std::printf("%-32s %-10s %6llu %9llu %10s  %-19s  %s\n", m.id.c_str(), r.status.c_str(),
                static_cast<unsigned long long>(m.committed_turn), static_cast<unsigned long long>(r.last), cost,
                local_time(std::max(m.updated_us, m.created_us)).c_str(), ctx.shown(model).c_str());
  }
  std::cout << summary << "\n";
  return kExitOk;
}

}  // namespace

void register_sessions_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SessionsArgs>();
  auto* cmd = app.add_subcommand(
      "sessions", "List the sessions in the data directory, newest first, with status, turns, events and cost");
  cmd->add_option("--status", args->status, "Only sessions with this status")
      ->check(CLI::IsMember({"new", "running", "completed", "failed", "stopped", "crashed"}));
  cmd->add_option("--since", args->since, "Only sessions written to within this long (30m, 24h, 7d)");
  cmd->add_option("--limit", args->limit, "At most this many (the newest)")->check(whole_number_from(1));
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_sessions(ctx, *args); }; });
}

}  // namespace carapace::cli
