#include "replay/torture.h"

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "base/child_process.h"
#include "base/fault_injection.h"
#include "events/fold.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "storage/event_log.h"
#include "storage/keys.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSession = "torture";

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
  bytes += s.final_answer;
  for (uint64_t v : {s.committed_turn, s.tokens.input, s.tokens.output, s.tokens.cache_read,
                     s.tokens.cache_write, s.tool_calls, s.tool_errors, s.llm_calls, s.llm_failures}) {
    bytes += std::to_string(v) + ",";
  }
  return digest128(bytes);
}

void prepare_home(const std::string& home) {
  fs::remove_all(home);
  fs::create_directories(home + "/ws");
  std::ofstream(home + "/ws/input.txt") << "hello torture\n";
  // A command hook on every tool call, so that the hook point is reached.
  std::ofstream(home + "/config.json") << R"({"retry": {"base_delay_ms": 5, "max_delay_ms": 50},
             "hooks": [{"name": "allow-all", "event": "PreToolUse",
                        "command": "cat > /dev/null; echo '{\"decision\":\"allow\"}'", "timeout_ms": 10000}]})";
}

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
  return c;
}

class Runner {
 public:
  Runner(const TortureOptions& options, TortureReport* report)
      : o_(options), report_(report), rng_(options.seed) {}

  Status reference() {
    std::string home = o_.work_dir + "/reference";
    prepare_home(home);
    int status = run_child_process(o_.carapace, child_args(home, "run", ""), home + "/child.log");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return Status::aborted("the crash-free reference run failed: " + tail(home + "/child.log"));
    }
    std::unique_ptr<EventLog> log;
    CARAPACE_RETURN_IF_ERROR(open_reader(home, &log));
    std::vector<Event> events;
    CARAPACE_RETURN_IF_ERROR(log->read(kSession, 1, UINT64_MAX, &events));
    counts_ = count_points(events);
    SessionState state;
    CARAPACE_RETURN_IF_ERROR(fold(events, &state));
    reference_ = outcome_digest(state);
    log.reset();
    fs::remove_all(home);
    return Status();
  }

  TortureIteration iterate(uint64_t i) {
    TortureIteration it{.iteration = i};
    it.mode = o_.mode == "both" ? (i % 2 == 0 ? "step" : "turn") : o_.mode;
    std::string home = o_.work_dir + "/iter-" + std::to_string(i);
    prepare_home(home);
    auto violation = [&](std::string kind, std::string detail) {
      it.violations.push_back(TortureViolation{i, it.mode, home, std::move(kind), std::move(detail)});
    };
    std::vector<std::pair<uint64_t, Digest128>> prefixes;  // checkpoints seen after crashes
    bool crash_next = true;
    for (uint32_t attempt = 0;; ++attempt) {
      std::unique_ptr<EventLog> probe;
      uint64_t last = 0;
      bool done = false;
      if (open_reader(home, &probe).ok()) {
        probe->last_seq(kSession, &last).ok();
        // A crash after the final checkpoint was durable: the session is complete.
        SessionMeta meta;
        done = attempt > 0 && probe->get_meta(kSession, &meta).ok() &&
               meta.status == SessionStatus::kCompleted && meta.committed_seq == last;
      }
      probe.reset();
      if (done) break;
      std::string plan;
      std::string point;
      if (crash_next) {
        auto p = static_cast<FaultPoint>(rng_() % kFaultPointCount);
        uint64_t nth = 1 + rng_() % counts_.at[static_cast<size_t>(p)];
        point = std::string(fault_point_name(p));
        plan = home + "/plan-" + std::to_string(attempt) + ".json";
        std::ofstream(plan) << R"({"faults": [{"point": ")" << point << R"(", "action": "crash", "nth": )"
                            << nth << "}]}";
      }
      std::vector<std::string> args = child_args(home, last == 0 ? "run" : "resume", it.mode);
      if (!plan.empty()) args.insert(args.end(), {"--faults", plan});
      int status = run_child_process(o_.carapace, args, home + "/child.log");
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;  // completed
      if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        violation("child_failed",
                  "a child exited with status " + std::to_string(status) + ": " + tail(home + "/child.log"));
        return finish(it, home);
      }
      ++it.crashes;
      it.crash_points.push_back(point);
      std::unique_ptr<EventLog> log;
      if (open_reader(home, &log).ok()) {
        SessionMeta meta;
        if (log->get_meta(kSession, &meta).ok())
          prefixes.emplace_back(meta.committed_seq, prefix_digest(*log, meta.committed_seq));
      }
      if (it.resumes >= o_.max_resumes) {
        violation("did_not_finish", "still not complete after " + std::to_string(it.resumes) + " resumes");
        return finish(it, home);
      }
      ++it.resumes;
      crash_next = std::uniform_real_distribution<double>(0, 1)(rng_) < o_.resume_crash_probability;
    }
    check(it, home, prefixes, violation);
    return finish(it, home);
  }

 private:
  std::vector<std::string> child_args(const std::string& home, const std::string& verb,
                                      const std::string& mode) {
    std::vector<std::string> a = {"--home", home};
    if (verb == "run") {
      a.insert(a.end(), {"run", o_.task, "--session", kSession, "--workspace", home + "/ws"});
    } else {
      a.insert(a.end(), {"resume", kSession, "--mode", mode});
    }
    a.insert(a.end(), {"--scenario", o_.scenario, "--config", home + "/config.json", "--exec-log",
                       home + "/exec.log", "--json"});
    return a;
  }

  template <class Violation>
  void check(TortureIteration& it, const std::string& home,
             const std::vector<std::pair<uint64_t, Digest128>>& prefixes, Violation&& violation) {
    std::unique_ptr<EventLog> log;
    Status s = open_reader(home, &log);
    if (!s.ok()) return violation("unreadable", s.to_string());
    VerifyReport report;
    s = verify_session(*log, kSession, &report);
    if (!s.ok()) return violation("unreadable", s.to_string());
    for (const auto& issue : report.issues) {
      violation("verify_" + issue.kind, "seq " + std::to_string(issue.seq) + ": " + issue.detail);
    }
    for (const auto& [seq, digest] : prefixes) {
      if (prefix_digest(*log, seq) != digest) {
        violation("committed_event_lost",
                  "the records up to checkpoint seq " + std::to_string(seq) + " changed");
      }
    }
    RecoveredSession fast, full;
    Status a = recover(*log, kSession, RecoverOptions{.use_snapshots = true}, &fast);
    Status b = recover(*log, kSession, RecoverOptions{.use_snapshots = false}, &full);
    if (!a.ok() || !b.ok()) return violation("recovery_failed", (a.ok() ? b : a).to_string());
    if (state_hash(fast.committed) != state_hash(full.committed)) {
      violation("recovery_mismatch", "recovery from a snapshot differs from a fold from seq 1");
    }
    const SessionState& state = full.committed;
    if (state.status != SessionStatus::kCompleted)
      violation("not_completed", "the final status is not completed");
    std::set<std::string> answered;
    for (const auto& m : state.messages) {
      if (m.role == Role::kTool) answered.insert(m.tool_call_id);
    }
    for (const auto& m : state.messages) {
      for (const auto& c : m.tool_calls) {
        if (!answered.count(c.id))
          violation("tool_call_without_result", "call " + c.id + " (" + c.name + ") has no result");
      }
    }
    if (!state.pending.empty())
      violation("tool_call_without_result", std::to_string(state.pending.size()) + " calls pending");
    std::vector<Event> events;
    log->read(kSession, 1, UINT64_MAX, &events).ok();
    // Interrupted calls: their outcome is unknown by design (step mode).
    for (const auto& e : events) {
      if (const auto* c = get_if<ToolCompleted>(e); c != nullptr && c->interrupted)
        it.interrupted_calls = true;
    }
    if (it.mode == "step") {
      std::ifstream in(home + "/exec.log");
      std::map<std::string, int> runs;
      std::string session, call, tool;
      while (in >> session >> call >> tool) {
        if (tool == "shell" || tool == "write_file") ++runs[call];
      }
      for (const auto& [c, n] : runs) {
        if (n > 1)
          violation("tool_executed_twice",
                    "call " + c + " of a non-idempotent tool ran " + std::to_string(n) + " times");
      }
    }
    if (it.mode == "turn" || !it.interrupted_calls) {
      ++report_->compared_with_reference;
      if (outcome_digest(state) != reference_) {
        violation("final_state_differs",
                  "the final conversation or outcome differs from the crash-free run's");
      }
    }
  }

  TortureIteration finish(TortureIteration& it, const std::string& home) {
    ++report_->iterations;
    if (it.mode == "step")
      ++report_->step_iterations;
    else
      ++report_->turn_iterations;
    report_->crashes += it.crashes;
    report_->resumes += it.resumes;
    for (const auto& p : it.crash_points) ++report_->crashes_by_point[p];
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
  Counts counts_;
  Digest128 reference_;
};

}  // namespace

Status run_torture(const TortureOptions& options, TortureReport* report,
                   const std::function<void(const TortureIteration&, const TortureReport&)>& progress) {
  if (::access(options.carapace.c_str(), X_OK) != 0) {
    return Status::not_found("cannot run " + options.carapace);
  }
  if (!fs::exists(options.scenario)) return Status::not_found("no scenario file " + options.scenario);
  if (options.mode != "step" && options.mode != "turn" && options.mode != "both") {
    return Status::invalid_argument("mode must be step, turn or both, not " + options.mode);
  }
  fs::create_directories(options.work_dir);
  auto start = std::chrono::steady_clock::now();
  Runner runner(options, report);
  CARAPACE_RETURN_IF_ERROR(runner.reference());
  for (uint64_t i = 1; i <= options.iterations; ++i) {
    TortureIteration it = runner.iterate(i);
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(it, *report);
  }
  return Status();
}

}  // namespace carapace
