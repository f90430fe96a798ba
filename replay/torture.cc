#include "replay/torture.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/provider/scripted_provider.h"
#include "base/bounded_file.h"
#include "base/bounded_json.h"
#include "base/child_process.h"
#include "base/fault_injection.h"
#include "base/limits.h"
#include "events/fold.h"
#include "replay/fault_plan.h"
#include "replay/recovery.h"
#include "replay/torture_compare.h"
#include "replay/torture_nodes.h"
#include "replay/verify.h"
#include "storage/event_log.h"
#include "storage/power_loss.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSession = "torture";
constexpr int kExitWaiting = 3;  // a child parked on a person (tools/cli.h)
// A child that neither finishes nor crashes by then is a violation.
constexpr uint64_t kChildTimeoutMs = 120'000;

std::string tail(const std::string& path, size_t bytes = 600) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

Status open_reader(const std::string& home, std::unique_ptr<EventLog>* log) {
  return EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, log);
}

Digest128 prefix_digest(const EventLog& log, uint64_t seq) {
  Digest128Builder b;
  for (auto c = log.cursor(kSession, 1); c->valid() && c->seq() <= seq; c->next()) {
    b.update(c->key());
    b.update(c->value());
  }
  return b.finish();
}

// The conversation and the outcome, leaving out the bookkeeping of crashes
// (resumes, rollbacks, lost requests) that a crash-free run does not have.
Digest128 outcome_digest(const SessionState& s) {
  std::string bytes = s.messages_digest.bytes();
  bytes += static_cast<char>(s.status);
  bytes += s.final_answer + "|" + s.stop_reason + "|";
  for (uint64_t v : {s.committed_turn, s.tokens.input, s.tokens.output, s.tokens.cache_read,
                     s.tokens.cache_write, s.tool_calls, s.tool_errors, s.llm_calls, s.llm_failures}) {
    bytes += std::to_string(v) + ",";
  }
  return digest128(bytes);
}

// A fresh home: the workspace (a copy of the user's, or input.txt alone) and
// the runner's own config unless the user gave theirs.
Status prepare_home(const TortureOptions& o, const std::string& home) {
  std::error_code ec;
  fs::remove_all(home, ec);
  fs::create_directories(home, ec);
  if (ec) return Status::io_error("cannot create " + home + ": " + ec.message());
  if (!o.workspace.empty()) {
    fs::copy(o.workspace, home + "/ws", fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
    if (ec) return Status::io_error("cannot copy the workspace " + o.workspace + " to " + home + "/ws: " + ec.message());
  } else {
    fs::create_directories(home + "/ws");
    std::ofstream(home + "/ws/input.txt") << "hello torture\n";
  }
  if (o.nodes > 0) {  // the routed calls' workspace: the nodes' shared root, the session's directory in it
    fs::create_directories(home + "/node-ws", ec);
    fs::copy(home + "/ws", home + "/node-ws/" + kSession, fs::copy_options::recursive | fs::copy_options::copy_symlinks,
             ec);
    if (ec) return Status::io_error("cannot make the nodes' workspace in " + home + ": " + ec.message());
  }
  if (!o.config.empty()) return Status();
  // A command hook on every tool call, so that the hook point is reached; a
  // PostToolUse hook that stops the turn when a shell call prints DONE; and
  // snapshots often enough that recovery starts from them.
  std::ofstream(home + "/config.json") << R"({"retry": {"base_delay_ms": 5, "max_delay_ms": 50},
             "session": {"snapshot_every_turns": 2},)"
                                        << (o.approvals ? R"("approvals": {"non_idempotent": true},)" : "") << R"(
             "hooks": [{"name": "allow-all", "event": "PreToolUse",
                        "command": "cat > /dev/null; echo '{\"decision\":\"allow\"}'", "timeout_ms": 10000},
                       {"name": "stop-when-done", "event": "PostToolUse", "matcher": "^shell$",
                        "command": "grep -q DONE && echo '{\"decision\":\"stop\",\"reason\":\"the status is DONE\"}' || echo '{\"decision\":\"continue\"}'",
                        "timeout_ms": 10000}]})";
  return Status();
}

// A defect the runner passes to its tools nodes, not to the host's children.
bool is_node_mutation(const std::string& m) { return m == "forgetful_ledger"; }

struct Counts {
  std::array<uint64_t, kFaultPointCount> at{};
};

Counts count_points(const std::vector<Event>& events) {
  Counts c;
  uint64_t requests = 0, tools = 0, commits = 0, hooks = 0, steps = 0;
  for (const auto& e : events) {
    if (std::holds_alternative<LlmRequested>(e.body)) ++requests;
    if (std::holds_alternative<ToolRequested>(e.body)) ++tools;
    if (std::holds_alternative<HookDecided>(e.body)) ++hooks;
    if (std::holds_alternative<TurnCommitted>(e.body))
      ++commits;
    else
      ++steps;
  }
  auto set = [&](FaultPoint p, uint64_t n) { c.at[static_cast<size_t>(p)] = std::max<uint64_t>(n, 1); };
  set(FaultPoint::kProviderBeforeRequest, requests);
  set(FaultPoint::kProviderAfterResponse, requests);
  set(FaultPoint::kToolBeforeExec, tools);
  set(FaultPoint::kToolAfterExec, tools);
  set(FaultPoint::kLogBeforeAppend, steps);
  set(FaultPoint::kLogAfterAppend, steps);
  set(FaultPoint::kCommitBefore, commits);
  set(FaultPoint::kCommitAfter, commits);
  set(FaultPoint::kHook, hooks);
  set(FaultPoint::kSessionActor, steps);
  return c;
}

Status read_user_messages(const std::string& scenario, std::vector<std::string>* out) {
  Scenario parsed;
  CARAPACE_RETURN_IF_ERROR(load_scenario(scenario, &parsed));
  *out = std::move(parsed.user_messages);
  return Status();
}

// Where a session stands, from the log alone.
// The approval requests of the session's open turn with no decision yet.
std::vector<ApprovalRequested> waiting_requests(const std::string& home) {
  std::vector<ApprovalRequested> out;
  std::unique_ptr<EventLog> log;
  if (!open_reader(home, &log).ok()) return out;
  SessionMeta meta;
  if (!log->get_meta(kSession, &meta).ok() || meta.status != SessionStatus::kRunning) return out;
  std::vector<Event> events;
  if (!log->read(kSession, meta.committed_seq + 1, UINT64_MAX, &events).ok()) return out;
  std::vector<PendingApproval> approvals;
  for (const auto& e : events) note_approval(approvals, e);
  for (const auto& a : approvals) {
    if (!a.decided) out.push_back(a.request);
  }
  return out;
}

struct Progress {
  uint64_t last_seq = 0;
  std::multiset<std::string> user_texts;  // every user message recorded
  bool done = false;  // every message answered: completed, with nothing after the last run
};

class Runner {
 public:
  Runner(const TortureOptions& options, TortureReport* report)
      : o_(options), report_(report), rng_(options.seed) {}

  Status prepare() {
    CARAPACE_RETURN_IF_ERROR(read_user_messages(o_.scenario, &messages_));
    for (const auto& name : o_.points) {
      auto p = fault_point_from_name(name);
      if (!p) return Status::invalid_argument("no fault point named " + name);
      points_.push_back(*p);
    }
    if (points_.empty()) {
      // Every point a session's run reaches (schedule.fired is carapace serve's).
      for (int i = 0; i < kFaultPointCount; ++i) {
        if (static_cast<FaultPoint>(i) != FaultPoint::kScheduleFired) points_.push_back(static_cast<FaultPoint>(i));
      }
    }
    if (!o_.faults.empty()) CARAPACE_RETURN_IF_ERROR(load_user_plan());
    return Status();
  }

  // The user's fault plan: checked as `run --faults` checks it, its rules
  // kept to be merged with the runner's in every child.
  Status load_user_plan() {
    std::shared_ptr<FaultPlan> plan;
    CARAPACE_RETURN_IF_ERROR(FaultPlan::load(o_.faults, &plan));
    std::string text;
    CARAPACE_RETURN_IF_ERROR(read_bounded_file(o_.faults, limits::kFaultPlanBytes, "the fault plan", &text));
    nlohmann::json j;
    CARAPACE_RETURN_IF_ERROR(parse_bounded_json(text, o_.faults, &j));
    user_rules_ = j.value("faults", nlohmann::json::array());
    if (j.contains("seed")) user_seed_ = j["seed"];
    for (size_t i = 0; i < user_rules_.size(); ++i) {
      if (user_rules_[i].value("action", "") == "crash") {
        return Status::invalid_argument(o_.faults + ": faults[" + std::to_string(i) +
                                        "] crashes: torture makes the crashes itself (one per child at a fault "
                                        "point or a random moment); leave crash rules out of --faults and choose "
                                        "where with --points");
      }
    }
    return Status();
  }

  // A plan file for a child: `first` (the runner's crash, which wins over
  // the user's rules at the same occurrence), the user's rules, `last`. An
  // `nth` rule that already fired in this session (`spent`) stays in its
  // place but never fires: a fault plan counts per process, and a resumed
  // child would fire it again.
  std::string write_plan(const std::string& path, const nlohmann::json& first, const nlohmann::json& last,
                         const std::set<size_t>& spent = {}) {
    nlohmann::json rules = nlohmann::json::array();
    for (const auto& r : first) rules.push_back(r);
    plan_offsets_[path] = first.size();
    for (size_t i = 0; i < user_rules_.size(); ++i) {
      nlohmann::json r = user_rules_[i];
      if (spent.count(i)) {
        r.erase("nth");
        r["probability"] = 0;
      }
      rules.push_back(std::move(r));
    }
    for (const auto& r : last) rules.push_back(r);
    nlohmann::json plan = {{"faults", rules}};
    if (!user_seed_.is_null()) plan["seed"] = user_seed_;
    std::ofstream(path) << plan.dump(2);
    return path;
  }

  // --nodes: this iteration's tools nodes, started, and the home's config
  // routing the tools to them.
  Status start_nodes(const std::string& home, uint64_t seed) {
    nodes_ = std::make_unique<TortureNodes>(o_.carapace, o_.work_dir + "/certs", home, o_.nodes, seed,
                                            is_node_mutation(o_.mutation) ? o_.mutation : "");
    CARAPACE_RETURN_IF_ERROR(nodes_->start());
    std::string text;
    CARAPACE_RETURN_IF_ERROR(read_bounded_file(home + "/config.json", limits::kConfigFileBytes, "the config", &text));
    nlohmann::json config;
    CARAPACE_RETURN_IF_ERROR(parse_bounded_json(text, home + "/config.json", &config));
    nodes_->add_to_config(&config);
    std::ofstream(home + "/config.json") << config.dump(2);
    return Status();
  }

  // Where the session's files end up: the nodes' workspace, or the host's.
  std::string workspace_of(const std::string& home) const {
    return o_.nodes > 0 ? home + "/node-ws/" + kSession : home + "/ws";
  }

  // Every real execution: the host's log, and each node's.
  std::vector<std::string> exec_lines(const std::string& home) const {
    std::vector<std::string> paths = {home + "/exec.log"};
    if (nodes_) {
      for (const auto& p : nodes_->exec_logs()) paths.push_back(p);
    }
    std::vector<std::string> lines;
    for (const auto& path : paths) {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    return lines;
  }

  Status reference() {
    std::string home = o_.work_dir + "/reference";
    report_->reference_home = home;
    CARAPACE_RETURN_IF_ERROR(prepare_home(o_, home));
    if (o_.nodes > 0) CARAPACE_RETURN_IF_ERROR(start_nodes(home, o_.seed));
    // A rule at every point that never fires: the run counts how often it
    // reaches each, so that a crash drawn at the nth occurrence happens.
    nlohmann::json counting = nlohmann::json::array();
    for (int p = 0; p < kFaultPointCount; ++p) {
      counting.push_back({{"point", std::string(fault_point_name(static_cast<FaultPoint>(p)))},
                          {"action", "crash"},
                          {"probability", 0}});
    }
    std::vector<std::string> args = child_args(home, "run", "", messages_);
    args.insert(args.end(), {"--faults", write_plan(home + "/counting.json", nlohmann::json::array(), counting),
                             "--fault-counts", home + "/counts.txt"});
    auto start = std::chrono::steady_clock::now();
    int status = run_child_process(o_.carapace, args, home + "/child.log");
    // Parked on a person: answered at once, each answer's child with the counting plan too.
    for (int answers = 0; WIFEXITED(status) && WEXITSTATUS(status) == kExitWaiting && answers < 1000; ++answers) {
      std::vector<ApprovalRequested> waiting = waiting_requests(home);
      if (waiting.empty()) break;
      std::vector<std::string> a = child_args(home, "answer", waiting.front().call_id, {});
      a.insert(a.end(), {"--faults", home + "/counting.json", "--fault-counts", home + "/counts.txt"});
      status = run_child_process(o_.carapace, a, home + "/child.log");
    }
    reference_ms_ = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    nodes_.reset();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return Status::aborted("the crash-free reference run failed: " + tail(home + "/child.log"));
    }
    std::unique_ptr<EventLog> log;
    CARAPACE_RETURN_IF_ERROR(open_reader(home, &log));
    std::vector<Event> events;
    CARAPACE_RETURN_IF_ERROR(log->read(kSession, 1, UINT64_MAX, &events));
    counts_ = count_points(events);
    std::ifstream counted(home + "/counts.txt");
    std::string point;
    uint64_t times = 0;
    while (counted >> point >> times) {
      if (auto p = fault_point_from_name(point))
        counts_.at[static_cast<size_t>(*p)] = std::max<uint64_t>(times, 1);
    }
    SessionState state;
    CARAPACE_RETURN_IF_ERROR(fold(events, &state));
    reference_ = outcome_digest(state);
    reference_events_ = std::move(events);
    return Status();
  }

  // The user's `nth` rules that fired in the session at `home`: a
  // fault.injected names its rule "(PLAN faults[N])".
  void note_spent(const std::string& home, std::set<size_t>* spent) {
    if (user_rules_.empty()) return;
    std::unique_ptr<EventLog> log;
    std::vector<Event> events;
    if (!open_reader(home, &log).ok() || !log->read(kSession, 1, UINT64_MAX, &events).ok()) return;
    for (const auto& e : events) {
      const auto* f = get_if<FaultInjected>(e);
      if (f == nullptr) continue;
      for (const auto& [path, offset] : plan_offsets_) {
        const std::string tag = " (" + path + " faults[";
        size_t at = f->detail.rfind(tag);
        if (at == std::string::npos) continue;
        size_t n = std::strtoull(f->detail.c_str() + at + tag.size(), nullptr, 10);
        if (n >= offset && n - offset < user_rules_.size() && user_rules_[n - offset].contains("nth")) {
          spent->insert(n - offset);
        }
      }
    }
  }

  TortureIteration iterate(uint64_t i) {
    TortureIteration it{.iteration = i};
    it.mode = o_.mode == "both" ? (i % 2 == 0 ? "step" : "turn") : o_.mode;
    std::string home = o_.work_dir + "/iter-" + std::to_string(i);
    auto violation = [&](std::string kind, std::string detail) {
      TortureViolation v{i, it.mode, home, std::move(kind), std::move(detail)};
      v.look = {"carapace --home " + home + " log show " + kSession};
      it.violations.push_back(std::move(v));
    };
    if (Status s = prepare_home(o_, home); !s.ok()) {
      violation("setup_failed", s.to_string());
      return finish(it, home);
    }
    if (o_.nodes > 0) {
      if (Status s = start_nodes(home, rng_()); !s.ok()) {
        violation("setup_failed", s.to_string());
        return finish(it, home);
      }
      if (o_.node_chaos) nodes_->start_chaos();
    }
    std::map<uint64_t, Digest128> prefixes;  // acknowledged checkpoint seq -> digest of the records up to it
    bool crash_next = true;
    std::set<size_t> spent;  // the user's nth rules that fired
    for (uint32_t attempt = 0;; ++attempt) {
      Progress p = progress(home);
      note_spent(home, &spent);
      if (p.done) break;
      std::vector<std::string> unsent;
      std::multiset<std::string> present = p.user_texts;
      for (const auto& m : messages_) {
        auto found = present.find(m);
        if (found != present.end())
          present.erase(found);
        else
          unsent.push_back(m);
      }
      // Parked on a person: the runner answers, after a random delay, in a
      // child that goes on with the session (and may be crashed like any).
      std::vector<ApprovalRequested> waiting = p.last_seq == 0 ? std::vector<ApprovalRequested>{}
                                                               : waiting_requests(home);
      if (!waiting.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(rng_() % 50));
        ++report_->approvals_answered;
      }
      std::vector<std::string> args = !waiting.empty() ? child_args(home, "answer", waiting.front().call_id, {})
                                                        : child_args(home, p.last_seq == 0 ? "run" : "resume",
                                                                     it.mode, unsent);
      std::string point;
      uint64_t kill_after_ms = kChildTimeoutMs;
      if (crash_next) {
        if (std::uniform_real_distribution<double>(0, 1)(rng_) < o_.random_moment_probability) {
          point = "random moment";
          kill_after_ms = rng_() % (reference_ms_ + reference_ms_ / 5 + 1);
        } else {
          FaultPoint fp = points_[rng_() % points_.size()];
          uint64_t nth = 1 + rng_() % counts_.at[static_cast<size_t>(fp)];
          point = std::string(fault_point_name(fp));
          nlohmann::json crash = nlohmann::json::array();
          crash.push_back({{"point", point}, {"action", "crash"}, {"nth", nth}});
          args.insert(args.end(), {"--faults", write_plan(home + "/plan-" + std::to_string(attempt) + ".json",
                                                          crash, nlohmann::json::array(), spent)});
        }
      }
      // The user's faults apply in every child, whether the runner crashes it at a point or not.
      if (!user_rules_.empty() && (point.empty() || point == "random moment")) {
        args.insert(args.end(), {"--faults", write_plan(home + "/plan-" + std::to_string(attempt) + ".json",
                                                        nlohmann::json::array(), nlohmann::json::array(), spent)});
      }
      pid_t pid = spawn_child_process(o_.carapace, args, home + "/child.log");
      int status = 0;
      bool ended = pid > 0 && wait_child_process(pid, kill_after_ms, &status);
      if (pid > 0 && !ended) {
        ::kill(pid, SIGKILL);
        wait_child_process(pid, kChildTimeoutMs, &status);
        if (point != "random moment") {
          violation("child_hung", "a child ran for more than " + std::to_string(kChildTimeoutMs) + " ms");
          return finish(it, home);
        }
      }
      if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == kExitWaiting)) {
        check_acknowledged(home, prefixes, violation);
        continue;  // the loop's check sees whether everything is answered (or waits for the runner)
      }
      if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        violation("child_failed",
                  "a child exited with status " + std::to_string(status) + ": " + tail(home + "/child.log"));
        return finish(it, home);
      }
      ++it.crashes;
      it.crash_points.push_back(point);
      if (o_.power_loss) {
        PowerLossReport loss;
        bool tear = std::uniform_real_distribution<double>(0, 1)(rng_) < 0.5;
        Status s = simulate_power_loss(
            PowerLossOptions{.ledger_path = home + "/sync-ledger", .tear_last_write = tear, .seed = rng_()}, &loss);
        if (!s.ok()) {
          violation("power_loss_failed", s.to_string());
          return finish(it, home);
        }
        ++report_->power_losses;
        report_->bytes_lost += loss.bytes_dropped;
        if (!loss.torn_file.empty()) ++report_->torn_writes;
      }
      check_acknowledged(home, prefixes, violation);
      if (!it.violations.empty()) return finish(it, home);
      if (it.resumes >= o_.max_resumes) {
        violation("did_not_finish", "still not complete after " + std::to_string(it.resumes) + " resumes");
        return finish(it, home);
      }
      ++it.resumes;
      crash_next = std::uniform_real_distribution<double>(0, 1)(rng_) < o_.resume_crash_probability;
    }
    if (nodes_) nodes_->stop_chaos();
    check_final(it, home, violation);
    return finish(it, home);
  }

 private:
  // The runner's decision for a call: every third call asked about in a
  // session is denied, the others approved. Every run of the scenario asks
  // about the same calls in the same order (a re-run turn asks again about
  // the same ids), so the crash-free run decides alike.
  bool runner_denies(const std::string& home, const std::string& call_id) {
    auto& order = asked_[home];
    auto it = std::find(order.begin(), order.end(), call_id);
    size_t n = static_cast<size_t>(it - order.begin());
    if (it == order.end()) order.push_back(call_id);
    return n % 3 == 2;
  }
  std::map<std::string, std::vector<std::string>> asked_;  // per home: the calls asked about, in order

  std::vector<std::string> child_args(const std::string& home, const std::string& verb, const std::string& mode,
                                      const std::vector<std::string>& then) {
    std::vector<std::string> a = {"--home", home};
    if (verb == "run") {
      a.insert(a.end(), {"run", o_.task, "--session", kSession, "--workspace", home + "/ws"});
    } else if (verb == "answer") {  // `mode` is the call the runner decides
      if (runner_denies(home, mode)) {
        a.insert(a.end(), {"deny", kSession, mode, "--reason", "the torture runner denies this one"});
      } else {
        a.insert(a.end(), {"approve", kSession, mode, "--reason", "the torture runner approves"});
      }
    } else {
      a.insert(a.end(), {"resume", kSession, "--mode", mode});
    }
    for (const auto& m : then) a.insert(a.end(), {"--then", m});
    a.insert(a.end(), {"--scenario", o_.scenario, "--config", o_.config.empty() ? home + "/config.json" : o_.config,
                       "--exec-log",
                       home + "/exec.log", "--ack-log", home + "/ack.log", "--json"});
    if (o_.power_loss) a.insert(a.end(), {"--sync-ledger", home + "/sync-ledger"});
    if (!o_.mutation.empty() && !is_node_mutation(o_.mutation)) a.insert(a.end(), {"--test-mutation", o_.mutation});
    return a;
  }

  Progress progress(const std::string& home) {
    Progress p;
    std::unique_ptr<EventLog> log;
    if (!open_reader(home, &log).ok()) return p;
    std::vector<Event> events;
    if (!log->read(kSession, 1, UINT64_MAX, &events).ok() || events.empty()) return p;
    p.last_seq = events.back().seq;
    uint64_t last_message = 0, last_completion = 0;
    size_t waiting = 0;  // follow-ups recorded and not sent yet
    for (const auto& e : events) {
      if (const auto* m = get_if<UserMessage>(e)) {
        // A follow-up counts once, when it is recorded; its sending starts a run.
        if (m->follow_up) {
          p.user_texts.insert(m->text);
          ++waiting;
          continue;
        }
        if (m->from_follow_ups) {
          --waiting;
        } else {
          p.user_texts.insert(m->text);
        }
        last_message = e.seq;
      }
      if (get_if<SessionCompleted>(e) != nullptr || get_if<SessionFailed>(e) != nullptr) last_completion = e.seq;
    }
    SessionMeta meta;
    bool all_sent = p.user_texts.size() == messages_.size() + 1;  // the task, then every message
    p.done = all_sent && waiting == 0 && last_completion > last_message &&
             log->get_meta(kSession, &meta).ok() && meta.committed_seq == p.last_seq;
    return p;
  }

  // What the children were told is durable must be in the log.
  template <class Violation>
  void check_acknowledged(const std::string& home, std::map<uint64_t, Digest128>& prefixes, Violation&& violation) {
    std::unique_ptr<EventLog> log;
    Status s = open_reader(home, &log);
    // Killed before the log was made: nothing can have been acknowledged.
    if (s.is_not_found() && fs::file_size(home + "/ack.log", ignored_) == static_cast<uintmax_t>(-1)) return;
    if (!s.ok()) return violation("unreadable", s.to_string());
    std::vector<Event> events;
    s = log->read(kSession, 1, UINT64_MAX, &events);
    if (!s.ok()) return violation("unreadable", s.to_string());
    std::multiset<std::string> texts;
    for (const auto& e : events) {
      if (const auto* m = get_if<UserMessage>(e)) texts.insert(m->text);
    }
    std::ifstream acks(home + "/ack.log");
    std::string line;
    std::multiset<std::string> acked_messages;
    while (std::getline(acks, line)) {
      std::istringstream in(line);
      std::string kind;
      in >> kind;
      if (kind == "checkpoint") {
        uint64_t seq = 0, turn = 0;
        in >> seq >> turn;
        const TurnCommitted* c = seq >= 1 && seq <= events.size() ? get_if<TurnCommitted>(events[seq - 1]) : nullptr;
        if (c == nullptr || c->turn != turn) {
          violation("acknowledged_checkpoint_lost", "the checkpoint of turn " + std::to_string(turn) + " at seq " +
                                                        std::to_string(seq) + " was acknowledged as durable");
          continue;
        }
        if (!prefixes.count(seq)) {
          prefixes[seq] = prefix_digest(*log, seq);
          ++report_->checkpoints_acknowledged;
        }
      } else if (kind == "message") {
        std::string text;
        std::getline(in >> std::ws, text);
        acked_messages.insert(text);
      }
    }
    for (const auto& text : acked_messages) {
      if (texts.count(text) < acked_messages.count(text)) {
        violation("acknowledged_message_lost", "\"" + text + "\" was acknowledged as durable");
      }
    }
    for (const auto& [seq, digest] : prefixes) {
      if (prefix_digest(*log, seq) != digest) {
        violation("committed_event_changed",
                  "the records up to acknowledged checkpoint seq " + std::to_string(seq) + " changed");
      }
    }
  }

  template <class Violation>
  void check_final(TortureIteration& it, const std::string& home, Violation&& violation) {
    std::unique_ptr<EventLog> log;
    Status s = open_reader(home, &log);
    if (!s.ok()) return violation("unreadable", s.to_string());
    VerifyReport report;
    s = verify_session(*log, kSession, &report);
    if (!s.ok()) return violation("unreadable", s.to_string());
    for (const auto& issue : report.issues) {
      violation("verify_" + issue.kind, "seq " + std::to_string(issue.seq) + ": " + issue.detail);
    }
    RecoveredSession fast, full;
    Status a = recover(*log, kSession, RecoverOptions{.use_snapshots = true}, &fast);
    Status b = recover(*log, kSession, RecoverOptions{.use_snapshots = false}, &full);
    if (!a.ok() || !b.ok()) return violation("recovery_failed", (a.ok() ? b : a).to_string());
    if (fast.snapshot_seq > 0) ++report_->snapshots_used;
    if (state_hash(fast.committed) != state_hash(full.committed)) {
      violation("recovery_mismatch", "recovery from a snapshot differs from a fold from seq 1");
    }
    const SessionState& state = full.committed;
    if (state.status != SessionStatus::kCompleted) violation("not_completed", "the final status is not completed");
    std::vector<Event> events;
    log->read(kSession, 1, UINT64_MAX, &events).ok();
    // Interrupted calls: their outcome is unknown by design (step mode).
    for (const auto& e : events) {
      if (const auto* c = get_if<ToolCompleted>(e); c != nullptr && c->interrupted) it.interrupted_calls = true;
    }
    check_approvals(it, home, events, violation);
    if (it.mode == "step") {
      // Lines "<session> <call> <tool> <idempotent>", one per real execution
      // (written as it starts), and "<session> <call> <tool> again" when a
      // resume asked the tool about the interrupted call and was told its run
      // had no effect: the one run more that allows.
      std::map<std::string, int> runs, allowed;
      for (const std::string& line : exec_lines(home)) {
        std::istringstream words(line);
        std::string session, call, tool, last;
        if (!(words >> session >> call >> tool >> last)) continue;
        const std::string key = call + " (" + tool + ")";
        if (last == "again") {
          ++allowed[key];
        } else if (last == "0") {
          ++runs[key];
        }
      }
      for (const auto& [c, n] : runs) {
        if (n > 1 + allowed[c]) {
          violation("tool_executed_twice", "call " + c + " of a tool that is not idempotent ran " + std::to_string(n) +
                                               " times" +
                                               (allowed[c] ? " (its recovery allowed " + std::to_string(1 + allowed[c]) + ")" : ""));
        }
      }
    }
    check_outcomes(events, violation);
    compare(it, home, state, events, violation);
  }

  // One approval.decided per request (the first answer wins, and nothing
  // writes a second); step mode: a call whose request was denied never ran.
  template <class Violation>
  void check_approvals(TortureIteration& it, const std::string& home, const std::vector<Event>& events,
                       Violation&& violation) {
    std::map<std::string, int> decided_in_turn;  // this request's decisions, by call (cleared like the fold's)
    std::set<std::string> denied;
    for (const auto& e : events) {
      if (get_if<TurnStarted>(e) != nullptr || get_if<TurnRolledBack>(e) != nullptr) decided_in_turn.clear();
      if (const auto* r = get_if<ApprovalRequested>(e)) {
        decided_in_turn[r->call_id] = 0;
        ++report_->approvals_requested;
      }
      if (const auto* d = get_if<ApprovalDecided>(e)) {
        if (++decided_in_turn[d->call_id] > 1) {
          violation("approval_decided_twice",
                    "call " + d->call_id + " has a second approval.decided at seq " + std::to_string(e.seq));
        }
        if (d->decision == "denied") denied.insert(d->call_id);
      }
    }
    if (it.mode != "step") return;  // a rolled-back turn may run a call the re-run then denies
    for (const std::string& line : exec_lines(home)) {
      std::istringstream words(line);
      std::string session, call, tool;
      if (!(words >> session >> call >> tool)) continue;
      if (denied.count(call)) violation("denied_call_ran", "call " + call + " (" + tool + ") ran though it was denied");
    }
  }

  // Every call requested in a turn that committed has exactly one outcome
  // (a call whose tools node was lost too); a turn rolled back starts over.
  // Counts the calls that ran on nodes, and those a lost node touched.
  template <class Violation>
  void check_outcomes(const std::vector<Event>& events, Violation&& violation) {
    std::map<std::string, int> completed;
    std::set<std::string> requested;
    for (const auto& e : events) {
      if (get_if<TurnStarted>(e) != nullptr || get_if<TurnRolledBack>(e) != nullptr) {
        completed.clear();
        requested.clear();
      }
      if (const auto* r = get_if<ToolRequested>(e)) {
        requested.insert(r->call_id);
        if (r->attempt > 1) ++report_->calls_lost_with_a_node;
      }
      if (const auto* c = get_if<ToolCompleted>(e)) {
        if (++completed[c->call_id] > 1) {
          violation("call_outcome_twice",
                    "call " + c->call_id + " has a second tool.completed at seq " + std::to_string(e.seq));
        }
        if (!c->node.empty()) ++report_->calls_on_nodes;
        if (c->is_error && c->output.find("tools node") != std::string::npos) ++report_->calls_lost_with_a_node;
      }
      if (get_if<TurnCommitted>(e) != nullptr) {
        for (const auto& id : requested) {
          if (!completed.count(id)) {
            violation("call_without_outcome", "call " + id + " was requested in a turn that committed at seq " +
                                                  std::to_string(e.seq) + " without a tool.completed");
          }
        }
        completed.clear();
        requested.clear();
      }
    }
  }

  // Whether a lost or unreachable tools node touched a call (its outcome is
  // then the node's loss, told to the model, not the crash-free run's).
  static bool node_trouble(const std::vector<Event>& events) {
    for (const auto& e : events) {
      if (const auto* r = get_if<ToolRequested>(e); r != nullptr && r->attempt > 1) return true;
      if (const auto* c = get_if<ToolCompleted>(e);
          c != nullptr && c->is_error && c->output.find("tools node") != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  // The final state against the crash-free run's: the conversation and
  // outcome, then the workspace.
  template <class Violation>
  void compare(TortureIteration& it, const std::string& home, const SessionState& state,
               const std::vector<Event>& events, Violation&& violation) {
    if (it.mode == "step" && it.interrupted_calls) {
      it.comparison = "skipped";
      it.skip_reason = "step mode: a call a crash cut short was reported to the model as of unknown outcome";
      return;
    }
    if (o_.nodes > 0 && node_trouble(events)) {
      it.comparison = "skipped";
      it.skip_reason = "a tools node was lost or down during a call, and the model was told so";
      return;
    }
    // A fault plan counts occurrences per process: a resumed process fires
    // its faults again. Then only the conversation and the workspace are
    // compared, and a difference is put down to the faults, not counted.
    const bool same_faults = injected_faults(events) == injected_faults(reference_events_);
    const std::string faults_differ =
        "the fault plan fired other faults than in the crash-free run (its occurrences are counted per process, "
        "and a resumed process counts from zero)";
    const std::string ref = report_->reference_home;
    std::optional<RunDifference> d;
    if (!same_faults || outcome_digest(state) != reference_) {
      d = first_difference(reference_events_, events, it.mode);
      if (!d && same_faults) {
        d = RunDifference{.kind = "event",
                          .type = "session",
                          .meaning = "the conversations agree event by event; the counters (tokens, calls, "
                                     "errors) differ"};
      }
    }
    if (!d) d = first_workspace_difference(workspace_of(ref), workspace_of(home), it.mode);
    if (d && !same_faults) {
      it.comparison = "skipped";
      it.skip_reason = faults_differ;
      return;
    }
    ++report_->compared_with_reference;
    if (!d) {
      it.comparison = "equal";
      ++report_->equal_to_reference;
      return;
    }
    it.comparison = "differs";
    const bool workspace = d->kind == "workspace";
    violation(workspace ? "workspace_differs" : "final_state_differs",
              d->type == "session" ? "the final counters differ from the crash-free run's" : d->describe());
    TortureViolation& v = it.violations.back();
    v.meaning = d->meaning;
    v.look.clear();
    if (workspace) {
      v.look.push_back("diff -r " + workspace_of(ref) + " " + workspace_of(home));
    } else {
      auto range = [](uint64_t seq) {
        return seq == 0 ? std::string() : " --from " + std::to_string(seq > 2 ? seq - 2 : 1) + " --to " +
                                              std::to_string(seq);
      };
      v.look.push_back("carapace --home " + home + " log show " + kSession + range(d->seq));
      v.look.push_back("carapace --home " + ref + " log show " + kSession + range(d->reference_seq) +
                       "   # the crash-free run");
    }
  }

  TortureIteration finish(TortureIteration& it, const std::string& home) {
    if (nodes_) {
      nodes_->stop_chaos();
      report_->node_kills += nodes_->kills();
      report_->node_freezes += nodes_->freezes();
      report_->node_partitions += nodes_->partitions();
      nodes_.reset();
    }
    ++report_->iterations;
    if (it.mode == "step")
      ++report_->step_iterations;
    else
      ++report_->turn_iterations;
    report_->crashes += it.crashes;
    report_->resumes += it.resumes;
    for (const auto& p : it.crash_points) ++report_->crashes_by_point[p];
    if (it.comparison == "skipped") {
      ++report_->skipped_by_reason[it.skip_reason];
    } else if (it.comparison.empty()) {
      ++report_->not_reached;
    }
    std::ifstream acks(home + "/ack.log");
    std::string line;
    while (std::getline(acks, line)) {
      if (line.rfind("message ", 0) == 0) ++report_->messages_acknowledged;
    }
    if (it.violations.empty()) {
      ++report_->completed;
      if (!o_.keep_passing_homes) fs::remove_all(home);
    }
    for (const auto& v : it.violations) {
      ++report_->violations_by_kind[v.kind];
      report_->violations.push_back(v);
    }
    return it;
  }

  const TortureOptions& o_;
  TortureReport* report_;
  std::mt19937_64 rng_;
  std::vector<std::string> messages_;
  std::vector<FaultPoint> points_;
  Counts counts_;
  Digest128 reference_;
  std::vector<Event> reference_events_;
  nlohmann::json user_rules_ = nlohmann::json::array();
  nlohmann::json user_seed_;
  std::map<std::string, size_t> plan_offsets_;  // plan file -> index of the user's first rule in it
  uint64_t reference_ms_ = 0;
  std::unique_ptr<TortureNodes> nodes_;  // --nodes: the current iteration's (or the crash-free run's)
  std::error_code ignored_;
};

}  // namespace

Status run_torture(const TortureOptions& options, TortureReport* report,
                   const std::function<void(const TortureIteration&, const TortureReport&)>& progress) {
  if (::access(options.carapace.c_str(), X_OK) != 0) {
    return Status::not_found("cannot run " + options.carapace);
  }
  if (!fs::exists(options.scenario)) return Status::not_found("no scenario file " + options.scenario);
  if (!options.config.empty() && !fs::is_regular_file(options.config)) {
    return Status::not_found("no configuration file " + options.config);
  }
  if (!options.workspace.empty() && !fs::is_directory(options.workspace)) {
    return Status::not_found("no workspace directory " + options.workspace);
  }
  if (options.mode != "step" && options.mode != "turn" && options.mode != "both") {
    return Status::invalid_argument("mode must be step, turn or both, not " + options.mode);
  }
  if (options.nodes > 4) return Status::invalid_argument("--nodes: at most 4 tools nodes, not " + std::to_string(options.nodes));
  if (is_node_mutation(options.mutation) && options.nodes == 0) {
    return Status::invalid_argument("--test-mutation " + options.mutation + " is a tools node's: it needs --nodes");
  }
  if (options.nodes > 0 && !options.config.empty()) {
    return Status::invalid_argument("--nodes routes the tools of the runner's own config to the nodes it starts; "
                                    "it does not take --config (name nodes in your config and run without --nodes)");
  }
  std::error_code ec;
  fs::create_directories(options.work_dir, ec);
  if (ec) return Status::io_error("cannot create " + options.work_dir + ": " + ec.message());
  if (options.nodes > 0) {
    CARAPACE_RETURN_IF_ERROR(TortureNodes::make_certificates(options.carapace, options.work_dir + "/certs", options.nodes));
  }
  auto start = std::chrono::steady_clock::now();
  Runner runner(options, report);
  CARAPACE_RETURN_IF_ERROR(runner.prepare());
  CARAPACE_RETURN_IF_ERROR(runner.reference());
  for (uint64_t i = 1; i <= options.iterations; ++i) {
    TortureIteration it = runner.iterate(i);
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(it, *report);
  }
  // The crash-free run stays beside the iterations that differ from it.
  if (report->violations.empty() && !options.keep_passing_homes) fs::remove_all(report->reference_home, ec);
  return Status();
}

}  // namespace carapace
