// `carapace approvals`, `approve`, `deny`, `answer`: what waits for a person
// (docs/approvals.md), and the answers. An answer is recorded durably in the
// session's log, bound to the digest of the arguments it approves; the first
// one recorded wins. The session then goes on in this process, as `resume`
// would run it, until it finishes or parks again.
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "base/bounded_json.h"
#include "base/clock.h"
#include "runtime/approval_scan.h"
#include "tools/cli_run.h"

namespace carapace::cli {
namespace {

// "3 s", "4 min", "2 h", "3 d".
std::string span(int64_t us) {
  const int64_t s = us / 1'000'000;
  if (s < 120) return std::to_string(s) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min";
  if (s < 172800) return std::to_string(s / 3600) + " h";
  return std::to_string(s / 86400) + " d";
}

std::string who_am_i() {
  const char* user = std::getenv("USER");
  std::string name = user != nullptr && *user ? user : "";
  if (name.empty()) {
    if (const passwd* pw = getpwuid(getuid())) name = pw->pw_name;
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return name + "@" + host + " (pid " + std::to_string(::getpid()) + ")";
}

struct DecideArgs {
  RuntimeArgs runtime;
  std::string session;
  std::string call;
  std::string text;
  std::string reason;
  std::string digest;
  ApprovalAnswer::Kind kind = ApprovalAnswer::Kind::kApprove;
};

struct ListArgs {
  std::string session;
};

int run_list(Context& ctx, const ListArgs& args) {
  if (Status home = ctx.prepare_home(/*create=*/false); !home.ok()) return ctx.fail(home);
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  std::vector<Approval> waiting;
  Status s = waiting_approvals(*log, args.session, &waiting);
  if (s.is_not_found()) {
    return ctx.fail(Status::not_found("no session '" + args.session + "' in " + ctx.home()),
                    "`carapace sessions` lists the sessions there");
  }
  if (!s.ok()) return ctx.fail(s);
  const std::string summary = count(waiting.size(), "request") + " waiting";
  if (ctx.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& a : waiting) list.push_back(approval_json(a.session_id, a.seq, a.request));
    ctx.print_success(list, summary);
    return kExitOk;
  }
  if (waiting.empty()) {
    std::cout << "nothing waits for a decision\n";
    return kExitOk;
  }
  const int64_t now = now_us();
  for (const auto& a : waiting) {
    const auto& r = a.request;
    std::string expiry = r.expires_at_us == 0 ? "never expires"
                         : r.expires_at_us <= now
                             ? "expired " + span(now - r.expires_at_us) + " ago (" + r.on_expiry + " when touched)"
                             : "expires in " + span(r.expires_at_us - now) + " (then " + r.on_expiry + ")";
    std::cout << ctx.shown(a.session_id) << "  " << ctx.shown(r.call_id) << "  "
              << (r.kind == "question" ? "question" : ctx.shown(r.tool)) << "  waiting "
              << span(now - r.requested_at_us) << ", " << expiry << "\n";
    if (r.kind == "question") {
      std::cout << "  asks: " << ctx.shown(r.question) << "\n";
      std::cout << "  answer: "
                << ctx.shown(ctx.with_home("carapace answer " + a.session_id + " " + r.call_id + " \"...\"")) << "\n";
    } else {
      std::cout << "  args: " << ctx.shown(r.args.text) << "  (digest " << r.args_digest.hex() << ")\n";
      std::cout << "  why: " << ctx.shown(r.reason) << " [" << ctx.shown(r.asked_by) << "]\n";
      std::cout << "  decide: "
                << ctx.shown(ctx.with_home("carapace approve " + a.session_id + " " + r.call_id + "  |  carapace deny " +
                                           a.session_id + " " + r.call_id))
                << "\n";
    }
  }
  std::fprintf(stderr, "%s\n", summary.c_str());
  return kExitOk;
}

int run_decide(Context& ctx, DecideArgs& args) {
  // Name an unknown session, or a call that waits for nothing, before
  // opening a runtime (and asking for a provider).
  {
    if (Status home = ctx.prepare_home(/*create=*/false); !home.ok()) return ctx.fail(home);
    auto log = ctx.open_log(EventLog::Mode::kReader);
    if (!log) return kExitFailed;
    uint64_t last = 0;
    if (log->last_seq(args.session, &last).ok() && last == 0) {
      return ctx.fail(Status::not_found("no session '" + args.session + "' in " + ctx.home()),
                      "`carapace approvals` lists what waits");
    }
  }
  args.runtime.resuming = true;
  std::unique_ptr<Runtime> rt;
  if (int rc = open_runtime(ctx, args.runtime, &rt, args.session); rc != kExitOk) return rc;
  StatusLine status(ctx, !ctx.json && isatty(STDERR_FILENO), !ctx.json && isatty(STDOUT_FILENO));
  ApprovalDecided decided;
  Status s = rt->decide(args.session,
                        ApprovalAnswer{.call_id = args.call,
                                       .kind = args.kind,
                                       .reason = args.reason,
                                       .text = args.text,
                                       .args_digest = args.digest,
                                       .by = "cli",
                                       .who = who_am_i()},
                        &decided);
  if (s.is_already_decided()) return ctx.fail(s, "`carapace log show " + args.session + "` shows the decision");
  if (s.is_not_found()) return ctx.fail(s, "`carapace approvals " + args.session + "` lists what waits there");
  if (!s.ok() && !s.is_expired()) return ctx.fail(s);
  if (s.is_expired()) {
    std::fprintf(stderr, "carapace: %s\n", ctx.shown(s.message()).c_str());
  } else if (!ctx.json) {
    std::fprintf(stderr, "call %s of session %s %s (recorded); the session goes on here\n",
                 ctx.shown(args.call).c_str(), ctx.shown(args.session).c_str(), decided.decision.c_str());
  }
  uint64_t subscription = 0;
  (void)rt->subscribe(args.session, event_printer(args.runtime, status), delta_printer(status), &subscription);
  const int rc = report_outcome(ctx, *rt, args.session, status);
  return s.is_expired() && rc == kExitOk ? kExitFailed : rc;
}

void add_decide_command(CLI::App& app, Context& ctx, const std::string& name, const std::string& help,
                        ApprovalAnswer::Kind kind) {
  auto args = std::make_shared<DecideArgs>();
  args->kind = kind;
  auto* cmd = app.add_subcommand(name, help);
  cmd->add_option("session", args->session, "Session id")->required();
  cmd->add_option("call", args->call, "The tool call's id (`carapace approvals` lists them)")->required();
  if (kind == ApprovalAnswer::Kind::kAnswer) {
    cmd->add_option("text", args->text, "The answer, given to the model as the call's result")->required();
  } else {
    cmd->add_option("--reason", args->reason, "Why, recorded with the decision (and told to the model on a deny)");
  }
  if (kind == ApprovalAnswer::Kind::kApprove) {
    cmd->add_option("--digest", args->digest,
                    "The arguments' digest you reviewed (`carapace approvals`): refused if the call waits with "
                    "other arguments");
  }
  add_runtime_options(cmd, args->runtime);
  add_trust_bundle_option(cmd, args->runtime);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_decide(ctx, *args); }; });
}

}  // namespace

nlohmann::json approval_json(const std::string& session, uint64_t seq, const ApprovalRequested& r) {
  nlohmann::json args = parse_stored_json(r.args.text.empty() ? "{}" : r.args.text);
  nlohmann::json j{{"session", session},
                   {"call_id", r.call_id},
                   {"tool", r.tool},
                   {"kind", r.kind},
                   {"args", args.is_discarded() ? nlohmann::json(r.args.text) : args},
                   {"args_digest", r.args_digest.hex()},
                   {"reason", r.reason},
                   {"asked_by", r.asked_by},
                   {"requested_at_us", r.requested_at_us},
                   {"age_s", (now_us() - r.requested_at_us) / 1'000'000},
                   {"expires_at_us", r.expires_at_us},
                   {"on_expiry", r.on_expiry}};
  if (seq != 0) j["seq"] = seq;
  if (r.kind == "question") j["question"] = r.question;
  return j;
}

void print_waiting(const Context& ctx, const std::string& id, const std::vector<ApprovalRequested>& waiting) {
  for (const auto& r : waiting) {
    if (r.kind == "question") {
      std::fprintf(stderr, "  the model asks (call %s): %s\n  answer: %s\n", ctx.shown(r.call_id).c_str(),
                   ctx.shown(r.question).c_str(),
                   ctx.shown(ctx.with_home("carapace answer " + id + " " + r.call_id + " \"...\"")).c_str());
    } else {
      std::fprintf(stderr, "  call %s: %s %s\n  why: %s\n  decide: %s\n        or %s\n", ctx.shown(r.call_id).c_str(),
                   ctx.shown(r.tool).c_str(), ctx.shown(r.args.text).c_str(), ctx.shown(r.reason).c_str(),
                   ctx.shown(ctx.with_home("carapace approve " + id + " " + r.call_id)).c_str(),
                   ctx.shown(ctx.with_home("carapace deny " + id + " " + r.call_id + " --reason \"...\"")).c_str());
    }
  }
}

void register_approval_commands(CLI::App& app, Context& ctx) {
  auto list = std::make_shared<ListArgs>();
  auto* cmd = app.add_subcommand("approvals", "List the tool calls and questions that wait for a person's decision");
  cmd->add_option("session", list->session, "Only this session's");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, list] { ctx.run = [&ctx, list] { return run_list(ctx, *list); }; });
  add_decide_command(app, ctx, "approve",
                     "Approve a waiting tool call (recorded, bound to its arguments); the session goes on here",
                     ApprovalAnswer::Kind::kApprove);
  add_decide_command(app, ctx, "deny",
                     "Deny a waiting tool call or question (recorded); the session goes on here, told why",
                     ApprovalAnswer::Kind::kDeny);
  add_decide_command(app, ctx, "answer",
                     "Answer a question the model asked (ask_user); the session goes on here with the answer",
                     ApprovalAnswer::Kind::kAnswer);
}

}  // namespace carapace::cli
