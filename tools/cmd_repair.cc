// carapace repair: salvage an event log that will not open, and say per
// session what was kept and what was lost (storage/db_salvage.h).
#include <cstdio>
#include <iostream>

#include "base/text.h"
#include "replay/verify.h"
#include "storage/db_salvage.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

std::string fate_line(const SalvagedSession& s) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  if (s.kept_to == 0) return "nothing kept: " + (s.why.empty() ? std::string("no opening checkpoint") : s.why);
  if (!s.closed) return "kept seq 1-" + n(s.kept_to) + ", everything found";
  return "kept seq 1-" + n(s.kept_to) + " (turn " + n(s.kept_turn) + ") of " + n(s.highest_seq) + " found; " +
         s.why + "; closed as failed (log_damaged): `carapace fork " + s.id + " --at-turn " + n(s.kept_turn) +
         "` goes on from there";
}

int run_repair(Context& ctx) {
  SalvageReport r;
  Status s = salvage_log_db(ctx.log_path(), &r);
  if (s.is_not_found()) return ctx.fail(s, "pass --home, or set CARAPACE_HOME, to name the home to repair");
  if (!s.ok()) return ctx.fail(s);
  if (!r.repaired) {
    std::string summary = "the event log at " + ctx.log_path() + " opens: nothing to repair";
    if (ctx.json) {
      ctx.print_success({{"repaired", false}}, summary);
    } else {
      std::cout << summary << "; " << ctx.with_home("`carapace verify --all` checks every session") << "\n";
    }
    return kExitOk;
  }
  // What the repaired log says of itself.
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  VerifyReport verified;
  s = verify_all(*log, &verified);
  if (!s.ok()) return ctx.fail(s, "the original is in " + r.original);
  size_t closed = 0;
  for (const auto& f : r.sessions) closed += f.closed || f.kept_to == 0 ? 1 : 0;
  std::string summary = "repaired " + ctx.log_path() + ": " + count(r.sessions.size(), "session") + ", " +
                        std::to_string(r.sessions.size() - closed) + " whole, " + std::to_string(closed) +
                        " with records lost; verify " + (verified.ok() ? "passes" : "FAILS") + "; the original is in " +
                        r.original;
  if (ctx.json) {
    nlohmann::json sessions = nlohmann::json::array();
    for (const auto& f : r.sessions) {
      sessions.push_back({{"session", f.id},
                          {"records_found", f.records_found},
                          {"highest_seq", f.highest_seq},
                          {"kept_to", f.kept_to},
                          {"kept_turn", f.kept_turn},
                          {"first_lost", f.first_lost},
                          {"why", f.why},
                          {"closed", f.closed}});
    }
    print_redacted(ctx, {{"success", verified.ok()},
                       {"data",
                        {{"repaired", true},
                         {"damage", r.damage},
                         {"original", r.original},
                         {"table_files", r.table_files},
                         {"wal_files", r.wal_files},
                         {"unreadable_files", r.unreadable_files},
                         {"damaged_wal_records", r.damaged_wal_records},
                         {"damaged_event_records", r.damaged_event_records},
                         {"sessions", sessions},
                         {"verified", verified.ok()}}},
                       {"summary", summary}});
    return verified.ok() ? kExitOk : kExitFailed;
  }
  std::cout << "was damaged: " << terminal_safe(r.damage) << "\n";
  std::printf("read %llu table files and %llu WAL files (%llu unreadable); skipped %llu damaged WAL records and "
              "%llu damaged event records\n",
              static_cast<unsigned long long>(r.table_files), static_cast<unsigned long long>(r.wal_files),
              static_cast<unsigned long long>(r.unreadable_files),
              static_cast<unsigned long long>(r.damaged_wal_records),
              static_cast<unsigned long long>(r.damaged_event_records));
  for (const auto& f : r.sessions) {
    std::printf("%-9s %s: %s\n", f.closed || f.kept_to == 0 ? "LOST" : "whole", terminal_safe(f.id).c_str(),
                terminal_safe(ctx.with_home(fate_line(f))).c_str());
  }
  if (r.damaged_wal_records > 0) {
    std::cout << "note: steps a session wrote after its last checkpoint that were only in a damaged WAL record "
                 "leave no trace; such a session resumes from that checkpoint as after a power loss, and a "
                 "side-effecting call it had requested there may run again\n";
  }
  std::cout << summary << "\n";
  return verified.ok() ? kExitOk : kExitFailed;
}

}  // namespace

void register_repair_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "repair",
      "Salvage an event log that will not open: move it aside, rebuild it from every intact record, and report "
      "per session what was kept");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx] { ctx.run = [&ctx] { return run_repair(ctx); }; });
}

}  // namespace carapace::cli
