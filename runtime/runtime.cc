#include "runtime/runtime.h"

#include "base/lib_log.h"

#include "runtime/approval_scan.h"
#include "runtime/deadlines.h"
#include "runtime/logging.h"

#include "runtime/home.h"
#include "runtime/process_settings.h"
#include "runtime/runtime_internal.h"
#include "runtime/session_setup.h"

#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "actors/actor_scheduler.h"
#include "actors/caf_types.h"
#include "actors/collector/remote/collector_shipper.h"
#include "actors/hook/hook_actor.h"
#include "actors/hook/hook_registry.h"
#include "actors/provider/provider_actor.h"
#include "actors/provider/remote/remote_provider.h"
#include "actors/provider/scripted_provider.h"
#include "actors/session/session_actor.h"
#include "actors/session/session_keeper.h"
#include "actors/session/session_outcome.h"
#include "actors/tool/ask_user_tool.h"
#include "actors/tool/file_tools.h"
#include "actors/tool/mcp/mcp_hub.h"
#include "actors/tool/process/scratch_dir.h"
#include "actors/tool/remote/node_protocol.h"
#include "actors/tool/remote/tool_router.h"
#include "actors/tool/shell_tool.h"
#include "actors/tool/tool_actor.h"
#include "actors/tool/workspace.h"
#include "base/clock.h"
#include "base/text.h"
#include "events/fold.h"
#include "replay/recovery.h"
#include "replay/replayer.h"
#include "replay/resume_journal.h"
#include "runtime/provider_factory.h"
#include "storage/body_store.h"
#include "storage/event_log.h"
#include "storage/keys.h"
#include "storage/session_journal.h"

namespace carapace {

const std::string Runtime::kNoStart = std::string("\0no-start", 9);
// launch()'s first_input for an actor woken to take an approval decision
// (Runtime::decide): a parked session, not finished, not started.
const std::string kWakeForAnswer = std::string("\0answer", 7);

namespace {

// "2026-11-26T21:20:59Z".
std::string format_time_us(int64_t us) {
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string describe_decision(const PendingApproval& a) {
  const ApprovalDecided& d = a.decision;
  return d.decision + " by " + d.by + (d.who.empty() ? "" : " (" + d.who + ")") + (d.expired ? " when it expired" : "") +
         " at seq " + std::to_string(a.decided_seq) + (d.reason.empty() ? "" : ": " + d.reason);
}

}  // namespace

namespace {

// The subscriber whose callback this thread runs (unsubscribe() from inside
// a callback must not wait for that callback to return).
thread_local caf::actor_id calling_subscriber = caf::invalid_actor_id;

// Calls a subscriber's callback: an exception is logged and the
// subscription goes on (it would end the actor, and the subscription with it).
template <typename Callback, typename Arg>
void call_back(SubscriberActor::pointer self, const Callback& callback, const Arg& arg, const char* which) {
  if (!callback) return;
  calling_subscriber = self->id();
  try {
    callback(arg);
  } catch (const std::exception& e) {
    lib_log().warn("a subscriber's {} threw ({}); the subscription goes on", which, e.what());
  } catch (...) {
    lib_log().warn("a subscriber's {} threw; the subscription goes on", which);
  }
  calling_subscriber = caf::invalid_actor_id;
}

SubscriberActor::behavior_type subscriber(SubscriberActor::pointer self,
                                          std::function<void(const Event&)> on_event,
                                          std::function<void(const StreamDelta&)> on_delta) {
  return {
      [self](close_atom) { self->quit(); },
      [=](const EventNotice& notice) { call_back(self, on_event, notice.event, "on_event"); },
      [=](const StreamDelta& delta) { call_back(self, on_delta, delta, "on_delta"); },
      [](flush_atom) { return true; },
  };
}

Status make_provider(const Config& config, std::shared_ptr<Provider>* out) {
  if (config.provider.name != "scripted") {
    return Status::invalid_argument("provider \"" + config.provider.name +
                                    "\" is not available in this build");  // HTTP providers: see Runtime::open
  }
  if (config.provider.scenario.empty()) {
    return Status::invalid_argument(
        "the scripted provider needs a scenario file: pass --scenario FILE or set provider.scenario in the "
        "config");
  }
  Scenario scenario;
  CARAPACE_RETURN_IF_ERROR(load_scenario(config.provider.scenario, &scenario));
  *out = std::make_shared<ScriptedProvider>(std::move(scenario));
  return Status();
}

}  // namespace

struct Runtime::Impl {
  Options options;
  std::string digest;
  std::unique_ptr<caf::actor_system_config> owned_config;
  std::unique_ptr<caf::actor_system> owned_system;
  caf::actor_system* system = nullptr;
  std::unique_ptr<EventLog> log;
  std::shared_ptr<ToolRegistry> tools = std::make_shared<ToolRegistry>();
  std::shared_ptr<HookRegistry> hooks = std::make_shared<HookRegistry>();
  // Declared before the provider: the provider (and its HTTP client, whose
  // callbacks use the store) goes first.
  std::shared_ptr<BodyStore> bodies;
  std::shared_ptr<Provider> provider;
  std::string scenario_text;  // the scripted provider's scenario file, as read at open
  ProviderSupervisorActor provider_supervisor;
  ToolSupervisorActor tool_supervisor;
  // With tools nodes configured: the router the sessions send calls to, and
  // which nodes are up (docs/scale-out.md). Null otherwise.
  caf::actor tool_router;
  std::shared_ptr<NodeDirectory> nodes;
  // With provider nodes configured: the provider that sends each attempt to
  // one (the same object as `provider`). Null otherwise.
  std::shared_ptr<RemoteProvider> remote_provider;
  // With collector nodes configured: sends every session's events to them.
  std::unique_ptr<CollectorShipper> shipper;
  HookActor hook_actor;
  SessionKeeperActor keeper;
  // The tool processes of this runtime's calls, stopped with it.
  std::shared_ptr<ProcessSet> processes = std::make_shared<ProcessSet>();
  LoopMutation mutation = LoopMutation::kNone;  // TestKnobs
  // The C++ tool calls' stop tokens, and the user code (tools, hooks) running.
  std::shared_ptr<CallTracker> tracker = std::make_shared<CallTracker>();
  // Options::non_dumpable, child_subreaper, while the runtime lives.
  std::unique_ptr<ProcessSettingHold> non_dumpable, subreaper;
  // The configured MCP servers (null: none configured).
  std::shared_ptr<McpHub> mcp;

  // Starts the MCP servers of `workspace` not running yet, registering
  // their tools; one that fails is logged and its tools are left out.
  void ensure_mcp(const std::string& workspace) {
    if (mcp) mcp->ensure(workspace);
  }

  // Recoveries of failed session actors run on threads of their own; the
  // runtime's destructor waits for a running one and stops new ones.
  struct Lifetime {
    std::mutex mu;
    bool alive = true;
  };
  std::shared_ptr<Lifetime> lifetime = std::make_shared<Lifetime>();
  std::map<std::string, int> recoveries;  // per session (under mu)
  std::set<std::string> recovering;       // being rebuilt after a failure (under mu)
  std::set<std::string> stopping;         // Runtime::stop at work: its outcome is not yet recorded (under mu)
  static constexpr int kMaxRecoveries = 3;

  std::mutex mu;
  std::map<std::string, SessionActor> sessions;
  // The journal of each session launched here, for its session.stopped when
  // the runtime closes with it still running (under mu).
  std::map<std::string, std::shared_ptr<SessionJournal>> journals;
  std::string stop_reason = "the runtime was closed";  // under mu
  // How the most recent finished sessions ended, for wait() after their
  // actors closed; older ones are read from the log.
  static constexpr size_t kFinishedKept = 1024;
  std::map<std::string, SessionOutcome> finished;
  std::deque<std::string> finished_order;
  // Runtime::close has begun: no new session, message, resume or fork.
  std::atomic<bool> closing{false};
  Status refuse_if_closing() const {
    return closing ? Status::busy("the runtime is closing: it takes no new session, message or resume")
                   : Status();
  }

  // SessionOptions::deadline: Runtime::stop for the runs still going then
  // (null once the runtime closes; under mu).
  std::unique_ptr<Deadlines> deadlines;  // its thread started with the first deadline
  std::function<void(const std::string&, const std::string&)> stop_for_deadline;
  bool deadlines_closed = false;  // the runtime is closing: no deadline from now on
  void arm_deadline(const std::string& id, std::chrono::milliseconds after) {
    if (after.count() <= 0) return;
    std::lock_guard lock(mu);
    if (deadlines_closed) return;
    if (!deadlines) deadlines = std::make_unique<Deadlines>(stop_for_deadline);
    deadlines->arm(id, after);
  }
  void disarm_deadline(const std::string& id) {
    std::lock_guard lock(mu);
    if (deadlines) deadlines->disarm(id);
  }
  // Approval requests' expiry: keyed "SESSION CALL" (a session id has no
  // space); the runtime decides an expired request by its on_expiry (null
  // once the runtime closes; under mu).
  std::unique_ptr<Deadlines> expiries;
  std::function<void(const std::string&, const std::string&)> expire_approval;
  bool expiries_closed = false;
  void arm_expiry(const std::string& id, const ApprovalRequested& r) {
    if (r.expires_at_us == 0) return;
    const int64_t left_us = r.expires_at_us - now_us();
    const auto after = std::chrono::milliseconds(std::max<int64_t>(1, (left_us + 999) / 1000));
    std::lock_guard lock(mu);
    if (expiries_closed) return;
    if (!expiries) expiries = std::make_unique<Deadlines>(expire_approval);
    expiries->arm(id + " " + r.call_id, after);
  }
  // A session parked on request `a` (its actor's thread).
  void parked(const std::string& id, const PendingApproval& parked_on) {
    // The state keeps no wall-clock times: the request as recorded has them.
    PendingApproval a = parked_on;
    std::vector<PendingApproval> recorded;
    if (open_approvals(*log, id, &recorded).ok()) {
      for (const auto& r : recorded) {
        if (r.request.call_id == a.request.call_id) a.request = r.request;
      }
    }
    lib_log().info("session {}: waits for a decision on call {} ({}): {}", id, a.request.call_id, a.request.tool,
                   a.request.reason);
    arm_expiry(id, a.request);
    if (!options.on_approval) return;
    try {
      options.on_approval(Approval{.session_id = id, .seq = a.seq, .request = a.request});
    } catch (const std::exception& e) {
      lib_log().warn("session {}: on_approval threw: {}", id, e.what());
    } catch (...) {
      lib_log().warn("session {}: on_approval threw", id);
    }
  }

  // SessionOptions::on_complete of the sessions launched here, called once (under mu).
  std::map<std::string, std::function<void(const SessionOutcome&)>> completions;

  void expect_completion(const std::string& id, std::function<void(const SessionOutcome&)> on_complete) {
    std::lock_guard lock(mu);
    if (on_complete) {
      completions[id] = std::move(on_complete);
    } else {
      completions.erase(id);
    }
  }
  struct Subscription {
    std::string session;
    SubscriberActor actor;
    bool observer = false;  // Options::observe's
  };
  std::map<uint64_t, Subscription> subscriptions;
  uint64_t next_subscription = 0;

  SessionSettings settings_for(const std::string& workspace, uint64_t max_turns,
                               const std::string& extra_instructions) const;
  JournalOptions journal_options() const;
  // Writes a session.configured into `journal` if this runtime runs the
  // session (in `workspace`) differently from its latest record (or it has
  // none). The workspace's MCP servers start first: their tools are part of it.
  Status record_configuration(SessionJournal* journal, const std::string& origin, const std::string& workspace);

  SessionActor find(const std::string& id) {
    std::lock_guard lock(mu);
    auto it = sessions.find(id);
    return it == sessions.end() ? SessionActor{} : it->second;
  }

  // `complete`: the outcome is final, for on_complete (a stop records a
  // provisional one first).
  void settled(const std::string& id, const SessionOutcome& outcome, bool complete = true) {
    std::function<void(const SessionOutcome&)> on_complete;
    {
      std::lock_guard lock(mu);
      if (finished.emplace(id, outcome).second) {
        finished_order.push_back(id);
      } else {
        finished[id] = outcome;
      }
      while (finished_order.size() > kFinishedKept) {
        finished.erase(finished_order.front());
        finished_order.pop_front();
      }
      if (auto it = completions.find(id); complete && it != completions.end()) {
        on_complete = std::move(it->second);
        completions.erase(it);
      }
      if (complete && deadlines) deadlines->disarm(id);
    }
    if (on_complete) on_complete(outcome);
  }

  // A session actor closed itself: forget it (unless a newer one took its
  // place) and its subscriptions (its subscribers quit with it).
  void closed(const std::string& id, const caf::actor_addr& actor) {
    std::lock_guard lock(mu);
    auto it = sessions.find(id);
    if (it == sessions.end() || it->second.address() != actor) return;
    sessions.erase(it);
    journals.erase(id);
    for (auto s = subscriptions.begin(); s != subscriptions.end();) {
      s = s->second.session == id ? subscriptions.erase(s) : std::next(s);
    }
    log->forget_writer(id);
  }

  // The session's actor once it is no longer `dead` (the keeper has
  // forgotten a closed one or replaced a failed one); null if none.
  bool is_recovering(const std::string& id) {
    std::lock_guard lock(mu);
    return recovering.count(id) > 0 || stopping.count(id) > 0;
  }

  SessionActor wait_until_not(const std::string& id, const SessionActor& dead) {
    for (int i = 0; i < 400; ++i) {
      SessionActor now = find(id);
      if (now != dead) return now;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return find(id);
  }

  // wait()'s answer for a session that neither runs here nor finished.
  Status not_running(const std::string& id) {
    uint64_t last = 0;
    if (!log->last_seq(id, &last).ok() || last == 0) {
      return Status::not_found("no session '" + id + "' in " + options.home);
    }
    return Status::needs_resume("session " + id +
                                " did not finish and does not run in this runtime (it crashed or was stopped); "
                                "resume it (Runtime::resume_session) to go on");
  }

  // How a session that is not running here stands: remembered, or from its log.
  bool finished_outcome(const std::string& id, SessionOutcome* out) {
    {
      std::lock_guard lock(mu);
      auto it = finished.find(id);
      if (it != finished.end()) {
        *out = it->second;
        return true;
      }
    }
    RecoveredSession r;
    if (!recover(*log, id, RecoverOptions{}, &r).ok()) return false;
    const SessionState& s = r.committed;
    if (s.status != SessionStatus::kCompleted && s.status != SessionStatus::kFailed) {
      // Parked (by this runtime or another process): it waits for a decision.
      std::vector<PendingApproval> approvals;
      if (!open_approvals(*log, id, &approvals).ok()) return false;
      SessionOutcome o = outcome_of(id, s);
      for (const auto& a : approvals) {
        if (!a.decided) o.waiting.push_back(a.request);
      }
      if (o.waiting.empty()) return false;
      o.final_answer.clear();
      o.error.clear();
      o.stop_reason = "waiting";
      *out = std::move(o);
      return true;
    }
    *out = outcome_of(id, s);
    return true;
  }

  // Records session.stopped for each session that was still running when
  // its actor was stopped (its last event, as nothing else writes to it now).
  void record_stops(const std::map<std::string, std::shared_ptr<SessionJournal>>& running,
                    const std::string& reason) {
    for (const auto& [id, journal] : running) {
      const SessionStatus status = journal->state().status;
      if (journal->broken() || status == SessionStatus::kCompleted || status == SessionStatus::kFailed) continue;
      // Parked: it waits for a person, not for a resume (docs/approvals.md).
      if (waiting_approval(journal->state()) != nullptr) continue;
      // Its run ended with its own stop (its turn budget) and its actor had
      // not closed yet: that stop and its reason stand.
      std::vector<Event> last;
      if (journal->last_seq() != 0 && log->read(id, journal->last_seq(), journal->last_seq(), &last).ok() &&
          !last.empty() && get_if<SessionStopped>(last.back()) != nullptr) {
        continue;
      }
      Status s = journal->append({SessionStopped{.reason = reason, .pid = static_cast<int64_t>(::getpid())}});
      if (s.ok()) {
        lib_log().info("session {}: stopped ({}); `carapace resume {}` goes on", id, reason, id);
      } else {
        lib_log().warn("session {}: session.stopped was not recorded ({}); it will be taken for crashed", id,
                     s.to_string());
      }
    }
  }

  void stop_actors() {
    std::vector<caf::actor> all;
    {
      std::lock_guard lock(mu);
      for (auto& [id, s] : sessions) all.push_back(caf::actor_cast<caf::actor>(s));
      for (auto& [id, s] : subscriptions) all.push_back(caf::actor_cast<caf::actor>(s.actor));
      sessions.clear();
      subscriptions.clear();
    }
    if (provider_supervisor) all.push_back(caf::actor_cast<caf::actor>(provider_supervisor));
    if (remote_provider) remote_provider->shutdown();
    if (tool_router) all.push_back(tool_router);
    if (tool_supervisor) all.push_back(caf::actor_cast<caf::actor>(tool_supervisor));
    if (hook_actor) all.push_back(caf::actor_cast<caf::actor>(hook_actor));
    if (keeper) all.push_back(caf::actor_cast<caf::actor>(keeper));
    if (all.empty() || system == nullptr) return;
    caf::scoped_actor self{*system};
    for (auto& a : all) self->send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& a : all) self->wait_for(a);
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Runtime::set_stop_reason(std::string reason) {
  std::lock_guard lock(impl_->mu);
  impl_->stop_reason = std::move(reason);
}

void Runtime::close(std::chrono::milliseconds drain) {
  impl_->closing = true;
  const auto deadline = std::chrono::steady_clock::now() + drain;
  std::vector<std::string> live;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& [id, actor] : impl_->sessions) live.push_back(id);
  }
  for (const auto& id : live) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    SessionOutcome ignored;
    (void)wait(id, std::max(left, std::chrono::milliseconds(0)), &ignored);
  }
}

Runtime::~Runtime() {
  {
    std::lock_guard lock(impl_->lifetime->mu);  // waits for a recovery in progress
    impl_->lifetime->alive = false;
  }
  std::unique_ptr<Deadlines> deadlines;
  {
    std::lock_guard lock(impl_->mu);
    impl_->deadlines_closed = true;
    deadlines = std::move(impl_->deadlines);
  }
  deadlines.reset();  // no deadline stops a session from now on
  std::unique_ptr<Deadlines> expiries;
  {
    std::lock_guard lock(impl_->mu);
    impl_->expiries_closed = true;
    expiries = std::move(impl_->expiries);
  }
  expiries.reset();  // no request expires in this runtime from now on (the next one to touch it decides)
  std::map<std::string, std::shared_ptr<SessionJournal>> running;
  std::string reason;
  {
    std::lock_guard lock(impl_->mu);
    running = impl_->journals;
    reason = impl_->stop_reason;
  }
  impl_->tracker->stop_all();  // C++ tool calls are asked to end
  impl_->stop_actors();
  // A tool call still running holds its helper actor, which the system waits
  // for: end the call, and everything it started, first. The sessions are
  // stopped already, so none records the killed call as completed; a resume
  // reports its outcome as unknown (or runs it again if it is idempotent).
  impl_->processes->terminate_all();
  // MCP calls in flight end with an error; each server gets its stdin
  // closed, then SIGTERM, then SIGKILL.
  if (impl_->mcp) impl_->mcp->shutdown();
  // The collector nodes get what the sessions wrote, for a bounded time.
  if (impl_->shipper) impl_->shipper->shutdown(5000);
  // User code that ignores its stop token: waited for up to the bound, then
  // abandoned with the actor system that would wait for it forever.
  if (!impl_->tracker->wait_idle(impl_->options.shutdown_timeout)) {
    const size_t stuck = impl_->tracker->running();
    if (impl_->owned_system) {
      lib_log().error("{} C++ tool call(s) or hook(s) did not return within {} ms of the close; they are abandoned, "
                    "and the runtime's actor system with them (its threads stay until the process ends)",
                    stuck, impl_->options.shutdown_timeout.count());
      (void)impl_->owned_system.release();
      (void)impl_->owned_config.release();
    } else {
      lib_log().error("{} C++ tool call(s) or hook(s) did not return within {} ms of the close; the borrowed actor "
                    "system will wait for them when it is destroyed",
                    stuck, impl_->options.shutdown_timeout.count());
    }
  }
  impl_->owned_system.reset();  // waits for every actor, detached helpers included
  if (impl_->log) {
    impl_->log->drain();  // the sessions' durable writes in flight land first
    impl_->record_stops(running, reason);
    // What no collector node holds yet goes first in the next runtime.
    if (impl_->shipper) impl_->shipper->write_pending();
  }
  impl_->shipper.reset();
  impl_->log.reset();
}

Status Runtime::open(Options options, std::unique_ptr<Runtime>* out) {
  return open_with(std::move(options), TestKnobs{}, out);
}

Status Runtime::open_with(Options options, const TestKnobs& knobs, std::unique_ptr<Runtime>* out) {
  auto impl = std::make_unique<Impl>();
  impl->mutation = knobs.mutation;
  if (options.home.empty()) return Status::invalid_argument("the runtime needs a home directory");
  impl->provider = options.provider;
  CARAPACE_RETURN_IF_ERROR(prepare_home(options.home, /*create=*/true));
  CARAPACE_RETURN_IF_ERROR(validate_config(options.config, "Runtime::Options::config"));
  if (options.non_dumpable) {
    std::string error;
    impl->non_dumpable = std::make_unique<ProcessSettingHold>(ProcessSetting::kNonDumpable, &error);
    if (!error.empty()) lib_log().warn("cannot make the runtime non-dumpable: {}", error);
  }
  if (options.child_subreaper) {
    std::string error;
    impl->subreaper = std::make_unique<ProcessSettingHold>(ProcessSetting::kChildSubreaper, &error);
    if (!error.empty()) lib_log().warn("{}; orphans of a tool's killed guard go to init", error);
  }
  // What a runtime killed mid-call (SIGKILL, the OOM killer) left in the
  // temporary directory goes now, not never.
  if (size_t stale = reclaim_scratch_dirs(scratch_base()); stale > 0) {
    lib_log().info("removed {} scratch director{} of tool calls whose runtime was killed", stale,
                 stale == 1 ? "y" : "ies");
  }
  impl->bodies = options.bodies;
  bool http = !impl->provider && is_http_provider(options.config.provider.name);
  const bool provider_nodes = !options.config.provider_nodes.empty();
  if (provider_nodes && !http) {
    return Status::invalid_argument("the configuration names provider nodes, which answer for an openai or anthropic "
                                    "provider; Runtime::Options::provider gives another: choose one");
  }
  HttpProviderOptions http_options;
  if (http) {
    CARAPACE_RETURN_IF_ERROR(resolve_http_options(options.config.provider, &http_options, provider_nodes));
  } else if (!impl->provider) {
    CARAPACE_RETURN_IF_ERROR(make_provider(options.config, &impl->provider));
  }
  if (auto scripted = std::dynamic_pointer_cast<ScriptedProvider>(impl->provider))
    impl->scenario_text = scripted->scenario().text;
  CARAPACE_RETURN_IF_ERROR(EventLog::open(
      EventLog::Options{.path = options.home + "/log",
                        .block_cache_bytes = options.log_block_cache_bytes,
                        .write_buffer_bytes = options.log_write_buffer_bytes,
                        .file_system = knobs.file_system},
      &impl->log));
  if (http) {
    std::unique_ptr<BodyStore> store;
    CARAPACE_RETURN_IF_ERROR(BodyStore::open(options.home + "/bodies", BodyStore::Mode::kWriter, &store,
                                             options.config.provider.max_stored_body_bytes));
    impl->bodies = std::move(store);
    impl->provider = make_http_provider(options.config.provider.name, std::move(http_options),
                                        std::make_shared<HttpClient>(), impl->bodies);
  }

  const Config& config = options.config;
  if (options.builtin_tools) {
    CARAPACE_RETURN_IF_ERROR(
        add_builtin_tools(config, options.decorate_builtin_tool, impl->tools.get(), impl->processes));
  }
  if (options.on_approval && !impl->tools->find(kAskUserTool)) {
    // A person is there to answer: the model may ask.
    CARAPACE_RETURN_IF_ERROR(impl->tools->add(ask_user_tool()));
  }
  CARAPACE_RETURN_IF_ERROR(add_config_hooks(config, impl->hooks.get()));
  // The servers run under the shell's sandbox: what the kernel cannot
  // enforce stops the runtime here, as it does for the shell.
  CARAPACE_RETURN_IF_ERROR(make_mcp_hub(config, impl->tools, &impl->mcp));
  impl->digest = config_digest(config);

  if (options.system != nullptr) {
    impl->system = options.system;
    if (config.any_nodes() && !impl->system->has_middleman()) {
      return Status::invalid_argument(
          "the configuration names nodes, but the actor system given has no io middleman: configure it with "
          "carapace::configure_node_system, or let the runtime make its own");
    }
  } else {
    impl->owned_config = std::make_unique<caf::actor_system_config>();
    if (config.any_nodes()) CARAPACE_RETURN_IF_ERROR(configure_node_system(*impl->owned_config, config.node_net));
    // Idle workers wait on a condition variable, and timers wake the clock's
    // thread only when they are due sooner (actors/actor_scheduler.h).
    configure_scheduler(*impl->owned_config);
    impl->owned_system = std::make_unique<caf::actor_system>(*impl->owned_config);
    impl->system = impl->owned_system.get();
  }
  // A connection and its TLS handshake get at least 5 s, whatever the
  // heartbeat settings: a loaded machine is slow, not lost.
  const uint64_t node_connect_ms = std::clamp<uint64_t>(config.node_net.connection_timeout_ms, 5'000, 10'000);
  if (provider_nodes) {
    // The configured provider renders the bodies this host records; the
    // nodes, which hold the key, send them.
    impl->remote_provider = std::make_shared<RemoteProvider>(
        *impl->system, RemoteProviderOptions{.nodes = config.provider_nodes,
                                             .insecure = config.node_net.insecure_loopback,
                                             .connect_timeout_ms = node_connect_ms,
                                             .attempt_deadline_ms = provider_attempt_deadline_ms(config.provider),
                                             .max_reply_bytes = config.provider.max_response_bytes,
                                             .max_tool_calls = config.provider.max_tool_calls,
                                             .renderer = impl->provider});
    impl->provider = impl->remote_provider;
  }
  impl->provider_supervisor = spawn_provider_supervisor(*impl->system, impl->provider, options.faults);
  impl->tool_supervisor = spawn_tool_supervisor(*impl->system, impl->tools, options.faults, impl->tracker);
  if (!config.nodes.empty()) {
    impl->nodes = std::make_shared<NodeDirectory>(config.nodes, config.node_net.fallback);
    impl->tool_router = spawn_tool_router(*impl->system, impl->tool_supervisor,
                                          ToolRouterOptions{.directory = impl->nodes,
                                                            .insecure = config.node_net.insecure_loopback,
                                                            .connect_timeout_ms = node_connect_ms,
                                                            .faults = options.faults});
    // Sessions start once each node had its chance to come up.
    caf::scoped_actor self{*impl->system};
    self->request(impl->tool_router, std::chrono::milliseconds(node_connect_ms + 1000), ready_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
    for (const auto& n : impl->nodes->states()) {
      if (!n.up) lib_log().warn("tools node {} ({}) is not up yet: {}", n.route.name, n.route.address, n.why_down);
    }
    // A node's MCP tools that this host has no server for are declared to
    // the model as the node describes them; their calls go to the node.
    std::vector<ToolSpec> node_tools;
    self->request(impl->tool_router, std::chrono::milliseconds(node_connect_ms), node_tools_atom::value)
        .receive([&](std::vector<ToolSpec>& specs) { node_tools = std::move(specs); }, [](caf::error&) {});
    for (auto& spec : node_tools) {
      if (!impl->nodes->routed(spec.name) || impl->tools->find(spec.name)) continue;
      const std::string name = spec.name;
      Status added = impl->tools->add(ToolDefinition{
          .spec = std::move(spec), .blocking = false, .run = [name](const nlohmann::json&, const ToolContext&) {
            return ToolResult::error("The call was not run: " + name +
                                     " runs on a tools node only, and none that offers it is up.");
          }});
      if (!added.ok()) lib_log().warn("the tools node tool {} is not declared: {}", name, added.to_string());
    }
  }
  if (impl->remote_provider) {
    impl->remote_provider->wait_ready(node_connect_ms + 1000);
    for (const auto& n : impl->remote_provider->states()) {
      if (!n.up) lib_log().warn("provider node {} ({}) is not up yet: {}", n.route.name, n.route.address, n.why_down);
    }
  }
  if (!config.collector_nodes.empty()) {
    // The collector nodes get each event the observers hear; what they
    // miss, they get from the log.
    impl->shipper = std::make_unique<CollectorShipper>(
        *impl->system, CollectorShipperOptions{.nodes = config.collector_nodes,
                                               .insecure = config.node_net.insecure_loopback,
                                               .connect_timeout_ms = node_connect_ms,
                                               .log = impl->log.get(),
                                               .pending_path = options.home + "/collector-pending"});
    CollectorShipper* shipper = impl->shipper.get();
    options.observe = [previous = std::move(options.observe), shipper](const std::string& id, const Event& e) {
      if (previous) previous(id, e);
      shipper->offer(id, e);
    };
  }
  impl->hook_actor = spawn_hook_actor(*impl->system, impl->hooks, options.faults, impl->tracker);
  impl->options = std::move(options);
  out->reset(new Runtime(std::move(impl)));
  Runtime* rt = out->get();
  std::weak_ptr<Impl::Lifetime> lifetime = rt->impl_->lifetime;
  Impl* impl_ptr = rt->impl_.get();
  rt->impl_->keeper = spawn_session_keeper(
      *rt->impl_->system,
      [rt, lifetime](const std::string& id, const caf::error& reason) {
        std::string why = caf::to_string(reason);
        std::thread([rt, lifetime, id, why] {
          auto life = lifetime.lock();
          if (!life) return;
          std::lock_guard lock(life->mu);
          if (life->alive) rt->recover_failed_session(id, why);
        }).detach();
      },
      [impl_ptr](const std::string& id, const caf::actor_addr& actor) { impl_ptr->closed(id, actor); });
  rt->impl_->expire_approval = [rt](const std::string& key, const std::string&) {
    const size_t space = key.find(' ');
    if (space == std::string::npos) return;
    const std::string id = key.substr(0, space);
    ApprovalDecided decided;
    Status s = rt->decide_with(id, ApprovalAnswer{.call_id = key.substr(space + 1), .by = "expiry"}, &decided, true);
    if (s.ok()) {
      lib_log().info("session {}: call {} expired and was {}", id, decided.call_id, decided.decision);
    } else if (!s.is_already_decided() && !s.is_not_found()) {
      lib_log().warn("session {}: the expiry of call {} was not recorded: {}", id, key.substr(space + 1), s.to_string());
    }
  };
  rt->impl_->stop_for_deadline = [rt](const std::string& id, const std::string& reason) {
    Status s = rt->stop(id, reason);
    if (s.ok()) lib_log().info("session {}: stopped: {}", id, reason);
  };
  return Status();
}

Status Runtime::register_tool(ToolDefinition tool) { return impl_->tools->add(std::move(tool)); }
bool Runtime::unregister_tool(const std::string& name) { return impl_->tools->remove(name); }
Status Runtime::register_hook(HookDefinition hook) { return impl_->hooks->add(std::move(hook)); }
bool Runtime::unregister_hook(const std::string& name) { return impl_->hooks->remove(name); }

SessionSettings Runtime::Impl::settings_for(const std::string& workspace, uint64_t max_turns,
                                            const std::string& extra_instructions) const {
  return session_settings(options.config, workspace, max_turns, extra_instructions, mutation);
}

Status Runtime::Impl::record_configuration(SessionJournal* journal, const std::string& origin,
                                           const std::string& workspace) {
  ensure_mcp(workspace);
  SessionConfigured now = session_configured(options.config, scenario_text, tools->specs(), origin);
  SessionConfigured before;
  Status s = recorded_configuration(*log, journal->id(), RecordedAt::kLatest, &before);
  if (s.ok()) {
    if (same_configuration(before, now)) return Status();
  } else if (!s.is_not_found()) {
    return s;
  }
  lib_log().info("session {}: the {} changed its configuration; recorded as session.configured", journal->id(),
               origin);
  return journal->reconfigure(std::move(now));
}

JournalOptions Runtime::Impl::journal_options() const {
  return JournalOptions{.snapshot_every_turns = options.config.snapshot_every_turns,
                        .faults = options.faults};
}

Status Runtime::launch(const std::string& id, std::shared_ptr<SessionJournal> journal,
                       SessionSettings settings, const std::function<void(const Event&)>& on_event,
                       const std::function<void(const StreamDelta&)>& on_delta,
                       const std::string& first_input, const std::vector<Event>& backlog) {
  impl_->ensure_mcp(settings.workspace);
  auto context = std::make_shared<SessionContext>(SessionContext{
      .id = id,
      .journal = std::move(journal),
      .settings = std::move(settings),
      .tools = impl_->tools,
      .hooks = impl_->hooks,
      .provider = caf::actor_cast<ProviderActor>(impl_->provider_supervisor),
      .tool_host = impl_->tool_router ? caf::actor_cast<ToolActor>(impl_->tool_router)
                                      : caf::actor_cast<ToolActor>(impl_->tool_supervisor),
      .nodes = impl_->nodes,
      .hook_host = impl_->hook_actor,
      .faults = impl_->options.faults,
      .on_settled = [impl = impl_.get(), id](const SessionOutcome& o) { impl->settled(id, o); },
      .on_durable = log_session_event,
      .provider_reads_messages = impl_->provider->reads_messages(),
      .on_parked = [impl = impl_.get()](const std::string& sid,
                                        const PendingApproval& a) { impl->parked(sid, a); },
  });

  if (impl_->bodies) {
    context->capture_request = [provider = impl_->provider, bodies = impl_->bodies](const ProviderRequest& r) {
      std::string body = provider->render_request(r);
      std::string ref;
      if (body.empty()) return ref;
      Status s = bodies->put(body, &ref);
      if (!s.ok()) {
        lib_log().warn("the request body of {} turn {} was not captured: {}", r.session_id, r.turn, s.to_string());
        ref.clear();
      }
      return ref;
    };
  }
  SessionActor session = spawn_session(*impl_->system, context);
  std::vector<SubscriberActor> existing;  // a recovered session's subscribers
  {
    std::lock_guard lock(impl_->mu);
    impl_->sessions[id] = session;
    impl_->journals[id] = context->journal;
    for (const auto& [n, sub] : impl_->subscriptions) {
      if (sub.session == id) existing.push_back(sub.actor);
    }
  }
  caf::anon_send(impl_->keeper, keep_atom::value, session, id);
  for (const auto& sub : existing) caf::anon_send(session, subscribe_atom::value, sub);
  if (on_event || on_delta) {
    uint64_t ignored;
    CARAPACE_RETURN_IF_ERROR(subscribe_with(id, on_event, on_delta, backlog, &ignored));
  }
  if (impl_->options.observe || impl_->options.observe_delta) {
    bool observed = false;  // a recovered session keeps its observer
    {
      std::lock_guard lock(impl_->mu);
      for (const auto& [n, sub] : impl_->subscriptions) observed = observed || (sub.session == id && sub.observer);
    }
    if (!observed) {
      uint64_t n = 0;
      auto observe = impl_->options.observe;
      auto observe_delta = impl_->options.observe_delta;
      std::function<void(const Event&)> on_observed;
      std::function<void(const StreamDelta&)> on_observed_delta;
      if (observe) on_observed = [observe, id](const Event& e) { observe(id, e); };
      if (observe_delta) on_observed_delta = [observe_delta, id](const StreamDelta& d) { observe_delta(id, d); };
      CARAPACE_RETURN_IF_ERROR(subscribe_with(id, on_observed, on_observed_delta, observe ? backlog : std::vector<Event>{}, &n));
      std::lock_guard lock(impl_->mu);
      if (auto it = impl_->subscriptions.find(n); it != impl_->subscriptions.end()) it->second.observer = true;
    }
  }
  if (first_input == kNoStart || first_input == kWakeForAnswer) {
    // Woken for a message, or a decision, the caller sends next.
  } else if (first_input.empty()) {
    caf::anon_send(session, start_atom::value);
  } else {
    caf::anon_send(session, UserInput{first_input});
  }
  return Status();
}

Status Runtime::start_session(const SessionOptions& options, std::string* id_out) {
  CARAPACE_RETURN_IF_ERROR(impl_->refuse_if_closing());
  const Config& config = impl_->options.config;
  std::string id = options.id.empty() ? generate_session_id() : options.id;
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (id.rfind("schedule:", 0) == 0) {
    return Status::invalid_argument("session id '" + id + "': ids starting with \"schedule:\" name schedules' "
                                    "streams (docs/schedules.md); choose another");
  }
  if (options.task.empty()) return Status::invalid_argument("a session needs a task");
  CARAPACE_RETURN_IF_ERROR(validate_max_turns(options.max_turns, "SessionOptions::max_turns"));

  // No workspace named: one of the session's own under the home, never
  // wherever the process happens to stand.
  std::string workspace = !options.workspace.empty()  ? options.workspace
                          : !config.workspace.empty() ? config.workspace
                                                      : impl_->options.home + "/workspaces/" + id;
  if (options.workspace.empty() && config.workspace.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(workspace, ec);
    if (!ec) std::filesystem::permissions(workspace, std::filesystem::perms::owner_all, ec);
    if (ec) return Status::io_error("cannot create the session's workspace " + workspace + ": " + ec.message());
  }
  std::string canonical;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(workspace, &canonical));
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  const uint64_t max_turns = options.max_turns ? options.max_turns : config.max_turns;
  impl_->ensure_mcp(canonical);  // its tools are in session.configured and the first prompt
  std::vector<EventBody> opening;
  opening.emplace_back(SessionStarted{.agent_id = config.agent_id,
                                      .provider = impl_->provider->name(),
                                      .model = options.model.empty() ? config.provider.model : options.model,
                                      .config_digest = impl_->digest,
                                      .rng_seed = seed,
                                      .workspace = canonical,
                                      .max_turns = max_turns,
                                      .instructions = options.instructions});
  opening.emplace_back(session_configured(config, impl_->scenario_text, impl_->tools->specs()));
  opening.emplace_back(UserMessage{options.task});
  for (const auto& text : options.follow_ups) {
    if (text.empty()) return Status::invalid_argument("a follow-up message is empty");
    opening.emplace_back(UserMessage{.text = text, .follow_up = true});
  }
  std::unique_ptr<SessionJournal> journal;
  Status created =
      SessionJournal::create(impl_->log.get(), id, opening, impl_->journal_options(), &journal);
  // A generated id that is taken (two sessions in the same second drew the
  // same suffix) is drawn again.
  for (int again = 0; !created.ok() && options.id.empty() && again < 8; ++again) {
    uint64_t taken = 0;
    if (!impl_->log->last_seq(id, &taken).ok() || taken == 0) break;
    id = generate_session_id();
    created = SessionJournal::create(impl_->log.get(), id, opening, impl_->journal_options(), &journal);
  }
  CARAPACE_RETURN_IF_ERROR(created);
  // The opening (written before the actor runs) is logged and reaches on_event first.
  std::vector<Event> opening_events;
  CARAPACE_RETURN_IF_ERROR(impl_->log->read(id, 1, UINT64_MAX, &opening_events));
  for (const auto& e : opening_events) log_session_event(id, e);
  if (!options.on_event && !impl_->options.observe) opening_events.clear();
  impl_->expect_completion(id, options.on_complete);
  impl_->arm_deadline(id, options.deadline);
  Status launched = launch(id, std::move(journal), impl_->settings_for(canonical, max_turns, options.instructions),
                           options.on_event, options.on_delta, "", opening_events);
  if (!launched.ok()) {
    impl_->expect_completion(id, nullptr);
    impl_->disarm_deadline(id);
    return launched;
  }
  if (id_out != nullptr) *id_out = id;
  return Status();
}

Status Runtime::resume_session(const std::string& id, const ResumeOptions& options) {
  return resume(id, options, "");
}

Status Runtime::resume(const std::string& id, const ResumeOptions& options, const std::string& first_input) {
  CARAPACE_RETURN_IF_ERROR(impl_->refuse_if_closing());
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (impl_->find(id)) return Status::busy("session " + id + " is already running in this process");
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(impl_->log->last_seq(id, &last));
  if (last == 0) return Status::not_found("no session '" + id + "' in " + impl_->options.home);
  // A damaged record anywhere refuses the resume, even one a snapshot would
  // skip; records an earlier resume checked are not read again.
  SessionMeta meta;
  uint64_t verified = impl_->log->get_meta(id, &meta).ok() ? std::min(meta.verified_seq, last) : 0;
  uint64_t checked = verified;
  Status intact = check_records(*impl_->log, id, verified + 1, &checked);
  if (!intact.ok()) {
    return intact.with_context("the log is damaged; `carapace verify " + id +
                               "` lists the damage, and nothing was written");
  }
  RecoveredSession r;
  CARAPACE_RETURN_IF_ERROR(recover(*impl_->log, id, RecoverOptions{}, &r));
  const SessionState& s = r.committed;
  const bool finished = recovered_finished(r);
  if (first_input == kNoStart && !finished) {
    // send_message wakes only what finished; nothing is written on the way.
    return Status::needs_resume("session " + id +
                                " did not finish (it crashed or was stopped) and does not run in this runtime; "
                                "resume it first (Runtime::resume_session, with the message as a follow-up)");
  }
  if (finished && !options.allow_finished) {
    std::string what = s.status == SessionStatus::kCompleted ? "has completed"
                                                             : "ended with an error (" + s.last_error + ")";
    return Status::already_finished("session " + id + " " + what +
                                    "; there is nothing to resume. Send it a new message (Runtime::send_message; "
                                    "`carapace chat`, then /resume " + id + ") or fork it (Runtime::fork_session; "
                                    "`carapace fork " + id + " --at-turn N`)");
  }
  CARAPACE_RETURN_IF_ERROR(validate_max_turns(options.max_turns, "ResumeOptions::max_turns"));
  const uint64_t budget = options.max_turns != 0 ? options.max_turns : s.max_turns;
  if (!finished && budget != 0 && s.committed_turn >= budget) {
    return Status::invalid_argument(
        "session " + id + " stopped at its turn budget (" + std::to_string(s.committed_turn) + " of " +
        std::to_string(budget) + " turns); resume it with a larger one (ResumeOptions::max_turns, " +
        "`carapace resume " + id + " --max-turns " + std::to_string(s.committed_turn + 10) + "`)");
  }
  std::string workspace;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(s.workspace, &workspace));
  SessionSettings settings = impl_->settings_for(workspace, budget, s.instructions);
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::shared_ptr<SessionJournal> journal;
  CARAPACE_RETURN_IF_ERROR(reopen_journal(impl_->log.get(), id, std::move(r),
                                          ResumeRecord{.step = options.mode == ResumeMode::kStep,
                                                       .pid = ::getpid(),
                                                       .host = host,
                                                       .verified_seq = checked,
                                                       .max_turns = options.max_turns},
                                          impl_->journal_options(), &journal));
  CARAPACE_RETURN_IF_ERROR(impl_->record_configuration(journal.get(), "resume", workspace));
  if (!options.follow_ups.empty()) {
    std::vector<EventBody> step;
    for (const auto& text : options.follow_ups) {
      if (text.empty()) return Status::invalid_argument("a follow-up message is empty");
      step.emplace_back(UserMessage{.text = text, .follow_up = true});
    }
    CARAPACE_RETURN_IF_ERROR(journal->append_synced(std::move(step)));
  }
  lib_log().info("session {}: resumed in {} mode at seq {}", id, options.mode == ResumeMode::kStep ? "step" : "turn",
               journal->last_seq());
  const bool woken = first_input == kNoStart || first_input == kWakeForAnswer;
  if (!woken || options.on_complete) {
    impl_->expect_completion(id, options.on_complete);
    impl_->arm_deadline(id, options.deadline);
  }
  Status launched = launch(id, std::move(journal), std::move(settings), options.on_event, options.on_delta, first_input);
  if (!launched.ok() && !woken) {
    impl_->expect_completion(id, nullptr);
    impl_->disarm_deadline(id);
  }
  return launched;
}

Status Runtime::fork_session(const std::string& source, uint64_t at_turn, const ForkOptions& options,
                             std::string* id_out) {
  CARAPACE_RETURN_IF_ERROR(impl_->refuse_if_closing());
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(source));
  std::string id = options.id.empty() ? generate_session_id() : options.id;
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (id.rfind("schedule:", 0) == 0) {
    return Status::invalid_argument("session id '" + id + "': ids starting with \"schedule:\" name schedules' "
                                    "streams (docs/schedules.md); choose another");
  }
  std::vector<CheckpointEntry> checkpoints;
  CARAPACE_RETURN_IF_ERROR(impl_->log->checkpoints(source, &checkpoints));
  if (checkpoints.empty()) return Status::not_found("no session '" + source + "' in " + impl_->options.home);
  const CheckpointEntry* at = nullptr;
  for (const auto& c : checkpoints) {
    if (c.turn == at_turn) {
      at = &c;
      break;
    }
  }
  if (at == nullptr) {
    return Status::invalid_argument("session " + source + " has no checkpoint for turn " +
                                    std::to_string(at_turn) + "; its checkpoints cover turns 0 to " +
                                    std::to_string(checkpoints.back().turn));
  }
  std::vector<Event> events;
  CARAPACE_RETURN_IF_ERROR(impl_->log->read(source, 1, at->seq, &events));
  // What is copied must be what was checkpointed: every checkpoint's hash is
  // re-checked, so a damaged or forged history is refused, not copied.
  {
    Folder check;
    for (const Event& e : events) {
      Status s = check.add(e);
      if (!s.ok()) {
        return s.with_context("session " + source + " does not verify up to turn " + std::to_string(at_turn) +
                              "; nothing was forked (`carapace verify " + source + "` lists the damage)");
      }
    }
  }
  // The history as the fold sees it: rolled-back events and checkpoints left
  // out (the fork writes its own checkpoints, with its own hashes); each
  // event keeps its time.
  std::vector<std::vector<Event>> turns(1);
  std::vector<Event> since_checkpoint;
  for (auto& e : events) {
    if (std::holds_alternative<TurnRolledBack>(e.body)) {
      since_checkpoint.clear();
    } else if (std::holds_alternative<TurnCommitted>(e.body)) {
      for (auto& x : since_checkpoint) turns.back().push_back(std::move(x));
      since_checkpoint.clear();
      turns.emplace_back();
    } else {
      since_checkpoint.push_back(std::move(e));
    }
  }
  turns.pop_back();  // the one after the last checkpoint is empty
  if (turns.empty() || turns[0].empty() || !std::holds_alternative<SessionStarted>(turns[0][0].body)) {
    return Status::corruption("session " + source + " does not open with session.started");
  }
  auto& started = std::get<SessionStarted>(turns[0][0].body);
  started.parent_session = source;
  started.parent_turn = at_turn;
  started.parent_seq = at->seq;
  std::unique_ptr<SessionJournal> journal;
  CARAPACE_RETURN_IF_ERROR(SessionJournal::create_with_history(impl_->log.get(), id, std::move(turns),
                                                               impl_->journal_options(), &journal));
  const SessionState& forked = journal->state();
  std::string workspace;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(forked.workspace, &workspace));
  SessionSettings settings = impl_->settings_for(workspace, forked.max_turns, forked.instructions);
  CARAPACE_RETURN_IF_ERROR(impl_->record_configuration(journal.get(), "fork", workspace));
  lib_log().info("session {}: forked from {} at turn {} (seq {})", id, source, at_turn, at->seq);
  CARAPACE_RETURN_IF_ERROR(launch(id, std::shared_ptr<SessionJournal>(std::move(journal)), std::move(settings),
                                  options.on_event, options.on_delta, options.task));
  if (id_out != nullptr) *id_out = id;
  return Status();
}

Status Runtime::send_message(const std::string& id, const std::string& text) {
  CARAPACE_RETURN_IF_ERROR(impl_->refuse_if_closing());
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (text.empty()) return Status::invalid_argument("the message is empty");
  caf::scoped_actor self{*impl_->system};
  for (int attempt = 0;; ++attempt) {
    SessionActor session = impl_->find(id);
    if (!session) {
      // Closed once idle (or never run here): rebuilt from its log, woken
      // for this message.
      Status woken = resume(id, ResumeOptions{.mode = ResumeMode::kStep, .allow_finished = true}, kNoStart);
      if (woken.is_busy()) continue;  // someone else woke it first
      if (woken.is_not_found()) return Status::not_found("no session '" + id + "' in " + impl_->options.home);
      CARAPACE_RETURN_IF_ERROR(woken);
      session = impl_->find(id);
      if (!session) return Status::aborted("session " + id + " could not be woken");
    }
    Status result;
    bool gone = false;
    self->request(session, std::chrono::minutes(1), UserInput{text})
        .receive(
            [&](InputAck& ack) {
              if (!ack.ok) result = Status::aborted("session " + id + " did not take the message: " + ack.error);
            },
            [&](caf::error& e) {
              // It closed between the lookup and the message: wake it.
              gone = e != caf::sec::request_timeout;
              result = Status::aborted("session " + id + " did not take the message: " + caf::to_string(e));
            });
    if (!gone || attempt >= 3) return result;
    impl_->wait_until_not(id, session);
  }
}

Status Runtime::decide(const std::string& id, const ApprovalAnswer& answer, ApprovalDecided* recorded) {
  if (answer.expiry) {
    return Status::invalid_argument("ApprovalAnswer::expiry is set by the runtime only: a request's expiry decides it");
  }
  return decide_with(id, answer, recorded, false);
}

Status Runtime::decide_with(const std::string& id, ApprovalAnswer answer, ApprovalDecided* recorded, bool by_expiry) {
  CARAPACE_RETURN_IF_ERROR(impl_->refuse_if_closing());
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (answer.call_id.empty()) return Status::invalid_argument("the answer names no tool call");
  // What a person (or a program) sends is bounded like any outside input.
  constexpr size_t kAnswerBytes = 1 << 20, kReasonBytes = 64 << 10, kLabelBytes = 256;
  if (answer.text.size() > kAnswerBytes) {
    return Status::invalid_argument("the answer is " + std::to_string(answer.text.size()) + " bytes; at most " +
                                    std::to_string(kAnswerBytes) + " are taken");
  }
  if (answer.reason.size() > kReasonBytes) {
    return Status::invalid_argument("the reason is " + std::to_string(answer.reason.size()) + " bytes; at most " +
                                    std::to_string(kReasonBytes) + " are taken");
  }
  if (answer.by.size() > kLabelBytes || answer.who.size() > kLabelBytes || answer.call_id.size() > kLabelBytes) {
    return Status::invalid_argument("the answer's call id, by or who is longer than " + std::to_string(kLabelBytes) +
                                    " bytes");
  }
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(impl_->log->last_seq(id, &last));
  if (last == 0) return Status::not_found("no session '" + id + "' in " + impl_->options.home);
  // What the log says now: the session's actor, should it run, has the last
  // word (the first durable answer wins there), but most answers need not wake it.
  std::vector<PendingApproval> approvals;
  CARAPACE_RETURN_IF_ERROR(open_approvals(*impl_->log, id, &approvals));
  const PendingApproval* request = nullptr;
  for (const auto& a : approvals) {
    if (a.request.call_id == answer.call_id) request = &a;
  }
  if (request == nullptr) {
    // Decided in a turn that has ended since: the decision that stands.
    std::vector<Event> all;
    CARAPACE_RETURN_IF_ERROR(impl_->log->read(id, 1, UINT64_MAX, &all));
    std::vector<PendingApproval> seen;
    std::optional<PendingApproval> decided;
    for (const Event& e : all) {
      if (std::holds_alternative<TurnStarted>(e.body) || std::holds_alternative<TurnRolledBack>(e.body)) {
        for (const auto& a : seen) {
          if (a.decided && a.request.call_id == answer.call_id) decided = a;
        }
      }
      note_approval(seen, e);
    }
    for (const auto& a : seen) {
      if (a.decided && a.request.call_id == answer.call_id) decided = a;
    }
    if (decided) {
      if (recorded != nullptr) *recorded = decided->decision;
      return Status::already_decided("call " + answer.call_id + " of session " + id + " was already " +
                                     describe_decision(*decided) + "; the first decision stands");
    }
    std::string waiting;
    for (const auto& a : approvals) {
      if (!a.decided) waiting += (waiting.empty() ? "" : ", ") + a.request.call_id;
    }
    return Status::not_found("session " + id + " has no approval request for call '" + answer.call_id + "'" +
                             (waiting.empty() ? "; nothing waits there (`carapace approvals` lists what does)"
                                              : "; waiting: " + waiting));
  }
  if (request->decided) {
    if (recorded != nullptr) *recorded = request->decision;
    return Status::already_decided("call " + answer.call_id + " of session " + id + " was already " +
                                   describe_decision(*request) + "; the first decision stands");
  }
  const ApprovalRequested r = request->request;
  // What the session would refuse, refused before it is woken for it.
  if (!answer.args_digest.empty() && answer.args_digest != r.args_digest.hex()) {
    return Status::invalid_argument("the answer is for arguments with digest " + answer.args_digest + ", but call " +
                                    r.call_id + " waits with arguments " + r.args_digest.hex() +
                                    " (`carapace approvals " + id + "` shows them); nothing was recorded");
  }
  if (!by_expiry && (r.kind == "question") != (answer.kind == ApprovalAnswer::Kind::kAnswer) &&
      answer.kind != ApprovalAnswer::Kind::kDeny) {
    return Status::invalid_argument(r.kind == "question"
                                        ? "call " + r.call_id + " is a question (ask_user): answer it with text "
                                              "(`carapace answer " + id + " " + r.call_id + " TEXT`), or deny it"
                                        : "call " + r.call_id + " asks for approval of " + r.tool +
                                              ", not for an answer: approve or deny it");
  }
  bool expired_now = false;
  if (by_expiry || (r.expires_at_us != 0 && now_us() >= r.expires_at_us)) {
    if (r.expires_at_us == 0) return Status::invalid_argument("call " + r.call_id + " of session " + id + " never expires");
    if (now_us() < r.expires_at_us) return Status::busy("call " + r.call_id + " has not expired yet");
    // Too late: its on_expiry decides, and the answer is not recorded.
    expired_now = !by_expiry;
    answer = ApprovalAnswer{.call_id = r.call_id,
                            .kind = r.on_expiry == "approve" && r.kind != "question" ? ApprovalAnswer::Kind::kApprove
                                                                                     : ApprovalAnswer::Kind::kDeny,
                            .reason = "the request expired (after " + std::to_string(r.expires_after_ms / 1000) +
                                      " s) with no decision; on_expiry: " + r.on_expiry,
                            .by = "expiry",
                            .who = "",
                            .expiry = true};
  }
  caf::scoped_actor self{*impl_->system};
  ApprovalReply reply;
  bool woke = false;
  for (int attempt = 0;; ++attempt) {
    SessionActor session = impl_->find(id);
    if (!session) {
      // Parked with its actor closed, or by another process: woken from its log.
      Status w = resume(id, ResumeOptions{.mode = ResumeMode::kStep}, kWakeForAnswer);
      if (w.is_busy() && attempt < 8) {
        impl_->wait_until_not(id, SessionActor{});
        continue;
      }
      CARAPACE_RETURN_IF_ERROR(w);
      session = impl_->find(id);
      if (!session) return Status::aborted("session " + id + " could not be woken");
      woke = true;
    }
    bool gone = false;
    Status failed;
    self->request(session, std::chrono::minutes(1), answer)
        .receive([&](ApprovalReply& a) { reply = std::move(a); },
                 [&](caf::error& e) {
                   gone = e != caf::sec::request_timeout;
                   failed = Status::aborted("session " + id + " did not take the decision: " + caf::to_string(e));
                 });
    if (!failed.ok()) {
      if (gone && attempt < 3) {
        impl_->wait_until_not(id, session);
        continue;
      }
      return failed;
    }
    if (!reply.ok && woke) caf::anon_send(session, close_atom::value);  // woken for nothing: it closes again
    break;
  }
  if (recorded != nullptr) *recorded = reply.decided;
  if (!reply.ok) {
    if (reply.code == "not_found") return Status::not_found(reply.error);
    if (reply.code == "already_decided") return Status::already_decided(reply.error);
    if (reply.code == "storage") return Status::io_error(reply.error);
    return Status::invalid_argument(reply.error);
  }
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->expiries) impl_->expiries->disarm(id + " " + r.call_id);
  }
  lib_log().info("session {}: call {} {} by {}", id, r.call_id, reply.decided.decision, reply.decided.by);
  if (expired_now) {
    return Status::expired("call " + r.call_id + " of session " + id + " expired at " + format_time_us(r.expires_at_us) +
                           " before this answer; its on_expiry " + r.on_expiry + " decided it (recorded now)");
  }
  return Status();
}

Status Runtime::list_approvals(const std::string& id, std::vector<Approval>* out) const {
  Status s = waiting_approvals(*impl_->log, id, out);
  if (s.is_not_found()) return Status::not_found("no session '" + id + "' in " + impl_->options.home);
  return s;
}

Status Runtime::stop(const std::string& id, const std::string& reason) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  SessionActor session;
  std::shared_ptr<SessionJournal> journal;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->sessions.find(id);
    auto j = impl_->journals.find(id);
    if (it == impl_->sessions.end() || j == impl_->journals.end()) {
      return Status::not_found("no session '" + id + "' runs in this runtime");
    }
    session = it->second;
    journal = j->second;
  }
  auto stopped_outcome = [&] {
    SessionOutcome o = outcome_of(id, journal->state());
    o.final_answer.clear();
    o.stop_reason = "stopped";
    o.error = reason;
    return o;
  };
  // A waiter that sees the actor gone waits on for the outcome, which is
  // settled once session.stopped is recorded.
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping.insert(id);
  }
  struct Unmark {
    Runtime::Impl* impl;
    std::string id;
    ~Unmark() {
      std::lock_guard lock(impl->mu);
      impl->stopping.erase(id);
    }
  } unmark{impl_.get(), id};
  impl_->tracker->stop_session(id);  // its C++ tool calls are asked to end
  caf::scoped_actor self{*impl_->system};
  if (impl_->tool_router) self->send(impl_->tool_router, cancel_atom::value, id);  // and its nodes' calls
  self->send_exit(caf::actor_cast<caf::actor>(session), caf::exit_reason::user_shutdown);
  self->wait_for(session);
  // Its calls' processes (and all they started); their results reach no one.
  impl_->processes->terminate_session(id);
  impl_->log->drain();  // its durable writes in flight land before the stop
  // Forgotten with its subscriptions, as a session that closed itself is
  // (a resume subscribes afresh): each subscriber quits once it has handed
  // on what it holds.
  std::vector<SubscriberActor> subscribers;
  {
    std::lock_guard lock(impl_->mu);
    if (auto it = impl_->sessions.find(id); it != impl_->sessions.end() && it->second == session) {
      impl_->sessions.erase(it);
    }
    impl_->journals.erase(id);
    for (auto sub = impl_->subscriptions.begin(); sub != impl_->subscriptions.end();) {
      if (sub->second.session != id) {
        ++sub;
        continue;
      }
      subscribers.push_back(sub->second.actor);
      sub = impl_->subscriptions.erase(sub);
    }
  }
  for (const auto& sub : subscribers) self->send(sub, close_atom::value);
  const SessionStatus status = journal->state().status;
  if (status == SessionStatus::kCompleted || status == SessionStatus::kFailed) {
    impl_->settled(id, outcome_of(id, journal->state()));  // it finished before the stop reached it
    return Status();
  }
  impl_->record_stops({{id, journal}}, reason);
  impl_->settled(id, stopped_outcome());
  impl_->log->forget_writer(id);
  return Status();
}

Status Runtime::wait(const std::string& id, std::chrono::milliseconds timeout, SessionOutcome* out) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  caf::scoped_actor self{*impl_->system};
  Status result;
  // Still being stopped or recovered when the time is up: it has not
  // settled yet, which is a time-out (wait again), not a session that needs
  // a resume.
  auto settling = [&] {
    return Status::timed_out("session " + id + " is still being stopped or recovered after " +
                             std::to_string(timeout.count()) + " ms; wait again");
  };
  // Whether it is being stopped or recovered is asked before whether it
  // finished: a stop settles the outcome before it unmarks the session, so
  // one that is no longer marked has its outcome there already. (Asked the
  // other way round, a stop ending between the two looks like a crash.)
  auto not_settling = [&] {
    const bool busy = impl_->is_recovering(id);
    if (impl_->finished_outcome(id, out)) return std::optional<Status>(Status());
    if (!busy) return std::optional<Status>(impl_->not_running(id));
    return std::optional<Status>();
  };
  SessionActor session = impl_->find(id);
  while (!session) {
    if (auto settled = not_settling()) return *settled;
    if (std::chrono::steady_clock::now() >= deadline) return settling();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    session = impl_->find(id);
  }
  for (;;) {
    // Asked in slices: a session actor that fails takes its waiters' promises
    // with it, and is replaced by one recovered from the log (on the map).
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto slice = std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(250));
    bool timed_out = false;
    result = Status();
    auto answer = [&](SessionOutcome& outcome) { *out = std::move(outcome); };
    bool gone = false;
    auto failure = [&](caf::error& e) {
      timed_out = e == caf::sec::request_timeout;
      gone = !timed_out;
      if (!timed_out) result = Status::aborted("waiting for session " + id + ": " + caf::to_string(e));
    };
    self->request(session, slice, wait_atom::value).receive(answer, failure);
    if (gone) {
      // It closed itself once idle (its outcome is remembered), or failed
      // and is being replaced: the keeper forgets or replaces it.
      SessionActor now = impl_->wait_until_not(id, session);
      while (!now) {  // closed (its outcome remembered), or being recovered
        const bool busy = impl_->is_recovering(id);
        if (impl_->finished_outcome(id, out)) return Status();
        if (!busy) return result;
        if (std::chrono::steady_clock::now() >= deadline) return settling();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        now = impl_->find(id);
      }
      session = now;
      continue;
    }
    if (!timed_out) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      result = Status::timed_out("session " + id + " is still running after " + std::to_string(timeout.count()) +
                                 " ms; wait again, or stop it (Runtime::stop)");
      break;
    }
    SessionActor now = impl_->find(id);
    while (!now) {  // closed (its outcome remembered), or being recovered
      if (auto settled = not_settling()) return *settled;
      if (std::chrono::steady_clock::now() >= deadline) return settling();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      now = impl_->find(id);
    }
    session = now;  // the same, or its replacement
  }
  if (!result.ok()) return result;
  // Subscribers handle everything the session sent them before its outcome,
  // so that a caller who waited has seen every event.
  std::vector<SubscriberActor> subscribers;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& [n, sub] : impl_->subscriptions) {
      if (sub.session == id) subscribers.push_back(sub.actor);
    }
  }
  for (const auto& sub : subscribers) {
    self->request(sub, timeout, flush_atom::value).receive([](bool) {}, [](caf::error&) {});
  }
  return result;
}

void Runtime::recover_failed_session(const std::string& id, const std::string& reason) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->sessions.erase(id);
    impl_->recovering.insert(id);
    if (++impl_->recoveries[id] > Impl::kMaxRecoveries) {
      impl_->recovering.erase(id);
      lib_log().error("session {}: its actor failed again ({}); not recovering it a {}th time in this process "
                    "(`carapace resume {}` goes on from its log)",
                    id, reason, Impl::kMaxRecoveries + 1, id);
      return;
    }
  }
  lib_log().error("session {}: its actor failed ({}); recovering it from its log", id, reason);
  impl_->log->drain();  // its last durable writes land before the log is read
  Status s = resume_session(id, ResumeOptions{.mode = ResumeMode::kStep, .allow_finished = true});
  {
    std::lock_guard lock(impl_->mu);
    impl_->recovering.erase(id);
  }
  if (!s.ok()) lib_log().error("session {}: could not be recovered: {}", id, s.to_string());
}

Status Runtime::replay(const std::string& id, uint64_t until_turn, ReplayReport* report) {
  // MCP tools the session had that this runtime has not registered (no
  // session of their workspace ran here) come from its record: no server
  // is started for a replay.
  std::shared_ptr<ToolRegistry> tools = impl_->tools;
  StoredRun stored;
  if (stored_run(*impl_->log, id, RecordedAt::kLatest, &stored).ok()) {
    bool missing = false;
    for (const auto& t : stored.tools) missing = missing || (t.name.rfind("mcp__", 0) == 0 && !tools->find(t.name));
    if (missing) {
      tools = std::make_shared<ToolRegistry>();
      for (const auto& name : impl_->tools->names()) {
        if (auto def = impl_->tools->find(name)) CARAPACE_RETURN_IF_ERROR(tools->add(*def));
      }
      CARAPACE_RETURN_IF_ERROR(add_recorded_mcp_tools(stored.tools, tools.get()));
    }
  }
  ReplayOptions options{.tools = tools,
                        .hooks = impl_->hooks,
                        .settings =
                            [this](const SessionState& s) {
                              return impl_->settings_for(s.workspace, s.max_turns, s.instructions);
                            },
                        .until_turn = until_turn};
  return replay_session(*impl_->log, id, options, report);
}

Status Runtime::subscribe(const std::string& id, std::function<void(const Event&)> on_event,
                          std::function<void(const StreamDelta&)> on_delta, uint64_t* subscription) {
  return subscribe_with(id, std::move(on_event), std::move(on_delta), {}, subscription);
}

Status Runtime::subscribe_with(const std::string& id, std::function<void(const Event&)> on_event,
                               std::function<void(const StreamDelta&)> on_delta, const std::vector<Event>& backlog,
                               uint64_t* subscription) {
  SessionActor session = impl_->find(id);
  if (!session) return Status::not_found("no session '" + id + "' runs in this runtime");
  SubscriberActor sub = impl_->system->spawn(subscriber, std::move(on_event), std::move(on_delta));
  {
    std::lock_guard lock(impl_->mu);
    *subscription = ++impl_->next_subscription;
    impl_->subscriptions.emplace(*subscription, Impl::Subscription{id, sub});
  }
  // Enqueued before the session knows the subscriber, so they come first.
  for (const auto& e : backlog) caf::anon_send(sub, EventNotice{id, e});
  caf::anon_send(session, subscribe_atom::value, sub);
  return Status();
}

void Runtime::unsubscribe(uint64_t subscription) {
  SubscriberActor sub;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->subscriptions.find(subscription);
    if (it == impl_->subscriptions.end()) return;
    sub = it->second.actor;
    impl_->subscriptions.erase(it);
  }
  // Once it has ended, no callback of it runs; from inside one, that one is the last.
  if (calling_subscriber != caf::invalid_actor_id && calling_subscriber == sub->id()) {
    caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
    return;
  }
  caf::scoped_actor self{*impl_->system};
  self->send_exit(sub, caf::exit_reason::user_shutdown);
  self->wait_for(sub);
}

size_t Runtime::live_sessions() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sessions.size();
}

Status Runtime::list_sessions(const SessionFilter& filter, std::vector<SessionSummary>* out) const {
  static const std::set<std::string> kStatuses = {"new",     "running", "waiting", "completed",
                                                  "failed",  "stopped", "crashed"};
  if (!filter.status.empty() && !kStatuses.count(filter.status)) {
    return Status::invalid_argument("no session status '" + filter.status +
                                    "': new, running, waiting, completed, failed, stopped or crashed");
  }
  std::vector<SessionMeta> metas;
  std::vector<std::string> unreadable;
  Status listed = impl_->log->list_sessions(&metas, &unreadable);
  if (!listed.ok()) return listed;
  for (const auto& entry : unreadable) lib_log().warn("the session index entry {} does not decode: skipped", entry);
  std::vector<SessionSummary> rows;
  for (const auto& m : metas) {
    SessionSummary r{.id = m.id,
                     .status = std::string(status_name(m.status)),
                     .turns = m.committed_turn,
                     .provider = m.provider,
                     .model = m.model,
                     .parent_session = m.parent_session,
                     .created_us = m.created_us,
                     .updated_us = m.updated_us};
    (void)impl_->log->last_seq(m.id, &r.last_seq);
    std::vector<PendingApproval> approvals;
    const bool parked = m.status == SessionStatus::kRunning && r.last_seq > 0 &&
                        open_approvals(*impl_->log, m.id, &approvals).ok() &&
                        std::any_of(approvals.begin(), approvals.end(), [](const auto& a) { return !a.decided; });
    if (parked) {
      // Waiting for a person (it may be woken here for the decision).
      r.status = "waiting";
    } else if (m.status == SessionStatus::kRunning && r.last_seq > 0 && !impl_->find(m.id)) {
      // Not finished and not run here: stopped if its last event says so;
      // else its writer died (this runtime holds the home: nobody else writes).
      std::vector<Event> last;
      const SessionStopped* stopped = impl_->log->read(m.id, r.last_seq, r.last_seq, &last).ok() && !last.empty()
                                          ? get_if<SessionStopped>(last.back())
                                          : nullptr;
      r.status = stopped ? "stopped" : "crashed";
      if (stopped) r.stop_reason = stopped->reason;
    }
    if (!filter.status.empty() && r.status != filter.status) continue;
    if (filter.since_us != 0 && std::max(r.updated_us, r.created_us) < filter.since_us) continue;
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const SessionSummary& a, const SessionSummary& b) {
    const int64_t x = std::max(a.updated_us, a.created_us), y = std::max(b.updated_us, b.created_us);
    return x != y ? x > y : a.id < b.id;
  });
  if (filter.limit != 0 && rows.size() > filter.limit) rows.resize(filter.limit);
  *out = std::move(rows);
  return Status();
}

Status Runtime::resume_unfinished(const ResumeOptions& options, std::vector<ResumedSession>* report) {
  std::vector<SessionSummary> all;
  CARAPACE_RETURN_IF_ERROR(list_sessions(SessionFilter{}, &all));
  std::reverse(all.begin(), all.end());  // oldest first
  for (const auto& row : all) {
    if (row.status != "crashed" && row.status != "stopped") continue;
    // At its turn budget: only a larger one (ResumeOptions::max_turns) goes on.
    if (row.stop_reason == "max_turns" && options.max_turns <= row.turns) continue;
    Status s = resume_session(row.id, options);
    lib_log().info("session {}: {} ({})", row.id, s.ok() ? "resumed" : "not resumed: " + s.to_string(), row.status);
    if (report != nullptr) report->push_back(ResumedSession{.id = row.id, .was = row.status, .status = s});
  }
  return Status();
}

Status Runtime::read_events(const std::string& id, uint64_t from_seq, std::vector<Event>* out) const {
  SessionMeta meta;
  Status s = impl_->log->get_meta(id, &meta);
  if (!s.ok()) return s;
  return impl_->log->read(id, std::max<uint64_t>(from_seq, 1), UINT64_MAX, out);
}

EventLog& RuntimeInternals::log(Runtime& runtime) { return *runtime.impl_->log; }
const Config& Runtime::config() const { return impl_->options.config; }
caf::actor_system& Runtime::system() { return *impl_->system; }
const std::string& Runtime::home() const { return impl_->options.home; }

std::string generate_session_id() { return keys::generate_session_id("s"); }

}  // namespace carapace
