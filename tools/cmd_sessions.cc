// carapace sessions
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <cstring>
#include <set>

#include "actors/collector/log_watch.h"
#include "events/session_state.h"
#include "replay/recovery.h"
#include "runtime/approval_scan.h"
#include "storage/body_store.h"
#include "storage/db_lock.h"
#include "storage/keys.h"
#include "storage/trace_store.h"
#include "tools/cli.h"
#include "tools/trace_load.h"

namespace carapace::cli {
namespace {

// The index's status, or for a session that never finished: "waiting" when
// its open turn has an approval request with no decision (docs/approvals.md),
// "stopped" when its last event is session.stopped (its runtime stopped it), "crashed" when
// no process holds the log (nobody is writing it), else "running" (a process
// writes the home; a crashed session cannot be told from a running one then).
std::string shown_status(EventLog& log, const SessionMeta& m, uint64_t last, bool log_held) {
  if (m.status == SessionStatus::kRunning && last > 0) {
    std::vector<PendingApproval> approvals;
    if (open_approvals(log, m.id, &approvals).ok() &&
        std::any_of(approvals.begin(), approvals.end(), [](const PendingApproval& a) { return !a.decided; })) {
      return "waiting";
    }
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
  const bool log_held = lock_holder(ctx.log_path()) != 0;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  // Newest first (by the last checkpoint, else the start), filtered, cut to
  // --limit. Only the sessions shown are read from the log (their last
  // event, their status).
  std::vector<Row> rows;
  auto take = [&](SessionMeta& m) {
    Row r{.meta = std::move(m)};
    log->last_seq(r.meta.id, &r.last).ok();
    r.status = shown_status(*log, r.meta, r.last, log_held);
    if (!args.status.empty() && r.status != args.status) return true;
    rows.push_back(std::move(r));
    return args.limit == 0 || rows.size() < args.limit;
  };
  std::vector<std::string> unreadable;
  uint64_t listed = 0;
  Status s;
  if (args.since.empty() && args.limit == 0) {
    // Every session: one pass over the session index, then sorted.
    std::vector<SessionMeta> sessions;
    s = log->list_sessions(&sessions, &unreadable);
    std::vector<SessionMeta*> order;
    order.reserve(sessions.size());
    for (auto& m : sessions) order.push_back(&m);
    std::sort(order.begin(), order.end(), [](const SessionMeta* a, const SessionMeta* b) { return newer_session(*a, *b); });
    for (SessionMeta* m : order) take(*m);
    listed = sessions.size();
  } else {
    // The newest, or those of the window: the time index, read from its
    // newest end, so a home of 100,000 sessions reads a few entries.
    s = log->sessions_by_time(args.since.empty() ? 0 : now_us - since_us, take, &unreadable);
    if (s.ok()) s = log->session_count(&listed);
  }
  if (!s.ok()) return ctx.fail(s, "`carapace verify --all` checks the session index against the log");
  std::string summary = count(listed, "session") + " in " + ctx.home();
  if (!unreadable.empty()) {
    summary += "; " + std::to_string(unreadable.size()) + " unreadable index entr" + (unreadable.size() == 1 ? "y" : "ies") + " skipped (" + ctx.with_home("`carapace verify --all`") + ")";
  }
  // Damage in the index is reported, and the readable entries still listed.
  for (const auto& entry : unreadable) {
    std::fprintf(stderr, "carapace: skipped the session index entry %s\n", ctx.shown(entry).c_str());
  }
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
    print_redacted(ctx, {{"success", true},
                         {"data", {{"sessions", data}, {"unreadable", unreadable}}},
                         {"summary", summary}});
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

struct RemoveArgs {
  std::vector<std::string> ids;
  bool yes = false;
};

// One line in HOME/audit.log (owner-only, appended, synced): what was removed, when, by whom.
Status audit(const Context& ctx, const std::string& line) {
  const std::string path = ctx.home() + "/audit.log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::io_error("cannot open " + path + ": " + std::strerror(errno));
  const std::string text = local_time(now_us()) + " uid " + std::to_string(::getuid()) + " pid " +
                           std::to_string(::getpid()) + " " + line + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  return ok ? Status() : Status::io_error("cannot write " + path);
}

int run_remove(Context& ctx, const RemoveArgs& args) {
  for (const auto& id : args.ids) {
    if (Status v = keys::validate_session_id(id); !v.ok()) return ctx.usage(v);
  }
  // The writer lock: no process runs a session of this home while they go.
  auto log = ctx.open_log(EventLog::Mode::kWriter);
  if (!log) return kExitFailed;
  std::vector<SessionMeta> sessions;
  if (int rc = ctx.list_every_session(*log, "nothing is removed while the log cannot be read whole", &sessions);
      rc != kExitOk) {
    return rc;
  }
  const std::set<std::string> doomed(args.ids.begin(), args.ids.end());
  std::set<std::string> known;
  for (const auto& m : sessions) known.insert(m.id);
  for (const auto& id : doomed) {
    if (!known.count(id)) {
      return ctx.fail(Status::not_found("no session '" + id + "' in " + ctx.home() + "; nothing removed"),
                      "`carapace sessions` lists the sessions there");
    }
  }
  // Bodies only the doomed sessions reference; the events they hold.
  std::set<std::string> theirs, others;
  uint64_t events = 0;
  for (const auto& m : sessions) {
    std::vector<Event> read;
    if (Status r = log->read(m.id, 1, UINT64_MAX, &read); !r.ok()) {
      return ctx.fail(r.with_context("reading session " + m.id),
                      "`carapace verify " + m.id + "` lists the damage; nothing is removed while the log cannot "
                      "be read whole");
    }
    const bool gone = doomed.count(m.id) > 0;
    if (gone) events += read.size();
    for (const auto& e : read) {
      const std::string& ref = body_ref_of(e);
      if (!ref.empty()) (gone ? theirs : others).insert(ref);
    }
  }
  std::vector<std::string> bodies;
  for (const auto& ref : theirs) {
    if (!others.count(ref)) bodies.push_back(ref);
  }
  std::string what = count(doomed.size(), "session") + " (" + count(events, "event") + ", " +
                     count(bodies.size(), "body") + " only they reference, and their spans)";
  if (!args.yes) {
    if (ctx.json || !isatty(STDIN_FILENO)) {
      return ctx.usage(Status::invalid_argument("removing " + what + " needs a confirmation"),
                       "pass --yes to remove them without a question");
    }
    std::fprintf(stderr, "remove %s from %s? This cannot be undone. [y/N] ", what.c_str(), ctx.shown(ctx.home()).c_str());
    std::string answer;
    if (!std::getline(std::cin, answer) || (answer != "y" && answer != "yes")) {
      std::fprintf(stderr, "nothing removed\n");
      return kExitFailed;
    }
  }
  // The audit line first: a removal is never unrecorded, even if it stops half-way.
  std::string names;
  for (const auto& id : doomed) names += " " + id;
  if (Status a = audit(ctx, "sessions rm" + names + ": " + what); !a.ok()) return ctx.fail(a);
  for (const auto& id : doomed) {
    if (Status s = log->remove_session(id); !s.ok()) return ctx.fail(s);
  }
  log.reset();
  std::error_code ec;
  uint64_t spans = 0;
  if (std::filesystem::exists(ctx.home() + "/bodies/CURRENT", ec) && !bodies.empty()) {
    std::unique_ptr<BodyStore> store;
    Status s = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kWriter, &store);
    if (s.ok()) s = store->remove(bodies);
    if (!s.ok()) return ctx.fail(s.with_context("removing bodies"), "the events are gone; `carapace gc` removes "
                                                                    "bodies nothing references");
  }
  if (std::filesystem::exists(ctx.home() + "/traces/CURRENT", ec)) {
    std::unique_ptr<TraceStore> traces;
    Status s = TraceStore::open(ctx.home() + "/traces", TraceStore::Mode::kWriter, &traces);
    if (s.ok()) s = traces->remove_spans(std::vector<std::string>(doomed.begin(), doomed.end()), &spans);
    if (!s.ok()) return ctx.fail(s.with_context("removing spans"), "the events are gone; `carapace gc` removes "
                                                                  "the spans later");
  }
  std::string summary = "removed " + count(doomed.size(), "session") + ": " + count(events, "event") + ", " +
                        count(bodies.size(), "body") + ", " + count(spans, "span");
  std::vector<std::string> kept_workspaces;
  for (const auto& id : doomed) {
    if (std::filesystem::is_directory(ctx.home() + "/workspaces/" + id, ec)) {
      kept_workspaces.push_back(ctx.home() + "/workspaces/" + id);
    }
  }
  if (ctx.json) {
    ctx.print_success({{"removed", std::vector<std::string>(doomed.begin(), doomed.end())},
                       {"events", events},
                       {"bodies", bodies.size()},
                       {"spans", spans},
                       {"workspaces_kept", kept_workspaces}},
                      summary);
  } else {
    std::cout << summary << "; recorded in " << ctx.shown(ctx.home() + "/audit.log") << "\n";
    for (const auto& w : kept_workspaces) {
      std::cout << "  its workspace stays (the agent's files): " << ctx.shown(w) << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void register_sessions_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SessionsArgs>();
  auto* cmd = app.add_subcommand(
      "sessions", "List the sessions in the data directory, newest first, with status, turns, events and cost");
  cmd->add_option("--status", args->status, "Only sessions with this status")
      ->check(CLI::IsMember({"new", "running", "waiting", "completed", "failed", "stopped", "crashed"}));
  cmd->add_option("--since", args->since, "Only sessions written to within this long (30m, 24h, 7d)");
  cmd->add_option("--limit", args->limit, "At most this many (the newest)")->check(whole_number_from(1));
  add_json_flag(cmd, ctx);
  auto remove_args = std::make_shared<RemoveArgs>();
  auto* rm = cmd->add_subcommand("rm", "Remove sessions: their events, the bodies only they reference, their spans "
                                       "(asks first; recorded in HOME/audit.log; never while a process writes the home)");
  rm->add_option("session", remove_args->ids, "Session ids")->required();
  rm->add_flag("-y,--yes", remove_args->yes, "Do not ask");
  add_json_flag(rm, ctx);
  rm->callback([&ctx, remove_args] { ctx.run = [&ctx, remove_args] { return run_remove(ctx, *remove_args); }; });
  cmd->callback([&ctx, args, rm] {
    if (rm->parsed()) return;
    ctx.run = [&ctx, args] { return run_sessions(ctx, *args); };
  });
}

}  // namespace carapace::cli
