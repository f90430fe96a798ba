// VirtualRuntime: the actor runtime on CAF's deterministic test scheduler,
// for tests that need exact ordering and virtual time (retry backoff,
// simulated latency). Everything runs on the test's thread: the event log
// completes durable appends inline, tools and hooks must be C++ and
// non-blocking.
#pragma once

#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/caf_types.h"
#include "actors/hook/hook_actor.h"
#include "actors/provider/provider_actor.h"
#include "actors/provider/scripted_provider.h"
#include "actors/session/session_actor.h"
#include "actors/tool/tool_actor.h"
#include "events/fold.h"
#include "replay/recovery.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

namespace caf {
inline std::ostream& boost_test_print_type(std::ostream& os, const error& x) { return os << to_string(x); }
}  // namespace caf

namespace carapace::testing {

// Records the requests it answers, and answers from a scenario.
class RecordingProvider : public Provider {
 public:
  explicit RecordingProvider(Scenario scenario) : scripted_(std::move(scenario)) {}
  std::string name() const override { return "scripted"; }
  bool blocking() const override { return false; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override {
    requests.push_back(request);
    return scripted_.call(request, on_delta);
  }
  std::vector<ProviderRequest> requests;

 private:
  ScriptedProvider scripted_;
};

inline SubscriberActor::behavior_type recorder(SubscriberActor::pointer self, std::vector<Event>* events) {
  return {[=](const EventNotice& n) { events->push_back(n.event); }, [](const StreamDelta&) {},
          [](flush_atom) { return true; }, [self](close_atom) { self->quit(); }};
}

class VirtualRuntime {
 public:
  VirtualRuntime() {
    config_.set("scheduler.policy", caf::atom("testing"));
    system_ = std::make_unique<caf::actor_system>(config_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(system_->scheduler());
    CHECK_OK(
        EventLog::open(EventLog::Options{.path = dir_.sub("log"), .inline_durable_appends = true}, &log_));
    tool_host = spawn_tool_supervisor(*system_, tools);
    hook_host = spawn_hook_actor(*system_, hooks, nullptr, nullptr, /*inline_cpp_hooks=*/true);
  }

  // Injects `plan`'s faults from now on (call before scenario() and start()).
  void inject(std::shared_ptr<FaultInjector> plan) {
    faults = std::move(plan);
    caf::anon_send_exit(tool_host, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(hook_host, caf::exit_reason::user_shutdown);
    tool_host = spawn_tool_supervisor(*system_, tools, faults);
    hook_host = spawn_hook_actor(*system_, hooks, faults, nullptr, /*inline_cpp_hooks=*/true);
  }

  ~VirtualRuntime() {
    for (auto& a : spawned_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(tool_host, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(hook_host, caf::exit_reason::user_shutdown);
    if (provider_host) caf::anon_send_exit(provider_host, caf::exit_reason::user_shutdown);
    sched_->run();
  }

  void scenario(const std::string& json) {
    Scenario s;
    CHECK_OK(parse_scenario(json, "test.json", &s));
    provider = std::make_shared<RecordingProvider>(std::move(s));
    provider_host = spawn_provider_supervisor(*system_, provider, faults);
  }

  // Creates a session and runs until nothing more can happen without time passing.
  // `follow_ups` are recorded with the task, as `run --then` records them.
  SessionActor start(const std::string& id, const std::string& task, SessionSettings settings = {},
                     const std::vector<std::string>& follow_ups = {}) {
    std::unique_ptr<SessionJournal> journal;
    std::vector<EventBody> opening = {
        SessionStarted{.provider = "scripted", .model = "scripted-1", .rng_seed = 4242}, UserMessage{task}};
    for (const auto& f : follow_ups) opening.emplace_back(UserMessage{.text = f, .follow_up = true});
    CHECK_OK(SessionJournal::create(log_.get(), id, std::move(opening),
                                    JournalOptions{.snapshot_every_turns = 0, .faults = faults}, &journal));
    if (settings.workspace.empty()) settings.workspace = dir_.path();
    auto context = std::make_shared<SessionContext>(
        SessionContext{.id = id,
                       .journal = std::move(journal),
                       .settings = settings,
                       .tools = tools,
                       .hooks = hooks,
                       .provider = caf::actor_cast<ProviderActor>(provider_host),
                       .tool_host = caf::actor_cast<ToolActor>(tool_host),
                       .hook_host = hook_host});
    SessionActor session = spawn_session(*system_, context);
    SubscriberActor rec = system_->spawn(recorder, &events);
    spawned_.push_back(caf::actor_cast<caf::actor>(session));
    spawned_.push_back(caf::actor_cast<caf::actor>(rec));
    caf::anon_send(session, subscribe_atom::value, rec);
    caf::anon_send(session, start_atom::value);
    run();
    return session;
  }

  // Writes `prefix` (another session's first events, as a crash would have
  // left them) as session `id`, recovers it, adopts its interrupted turn
  // (step mode, as `carapace resume` does), and runs it; its events go to
  // *events_out.
  SessionActor resume_prefix(const std::string& id, const std::vector<Event>& prefix, SessionSettings settings,
                             std::vector<Event>* events_out) {
    // The indexes as the writer keeps them: an entry per checkpoint, and the
    // session's entry as of the last one.
    std::vector<CheckpointEntry> checkpoints;
    for (const auto& e : prefix) {
      if (const auto* c = get_if<TurnCommitted>(e))
        checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c->turn, .state_hash = c->state_hash});
    }
    Folder folder;
    for (const auto& e : prefix) CHECK_OK(folder.add(e));
    SessionMeta meta = meta_from_state(id, folder.committed(), prefix.back().ts_us, nullptr);
    CHECK_OK(log_->append(
        AppendRequest{.session = id, .events = prefix, .meta = &meta, .checkpoints = checkpoints}));
    RecoveredSession r;
    CHECK_OK(recover(*log_, id, RecoverOptions{}, &r));
    bool finished = (r.committed.status == SessionStatus::kCompleted ||
                     r.committed.status == SessionStatus::kFailed) &&
                    r.uncommitted.empty();
    auto journal = std::shared_ptr<SessionJournal>(
        SessionJournal::attach(log_.get(), id, std::move(r.committed), std::move(r.uncommitted), r.last_seq,
                               JournalOptions{.snapshot_every_turns = 0, .faults = faults}));
    CHECK_OK(journal->adopt_uncommitted());
    if (!finished) CHECK_OK(journal->append({SessionResumed{.mode = "step"}}));
    if (settings.workspace.empty()) settings.workspace = dir_.path();
    auto context = std::make_shared<SessionContext>(
        SessionContext{.id = id,
                       .journal = std::move(journal),
                       .settings = settings,
                       .tools = tools,
                       .hooks = hooks,
                       .provider = caf::actor_cast<ProviderActor>(provider_host),
                       .tool_host = caf::actor_cast<ToolActor>(tool_host),
                       .hook_host = hook_host});
    SessionActor session = spawn_session(*system_, context);
    SubscriberActor rec = system_->spawn(recorder, events_out);
    spawned_.push_back(caf::actor_cast<caf::actor>(session));
    spawned_.push_back(caf::actor_cast<caf::actor>(rec));
    caf::anon_send(session, subscribe_atom::value, rec);
    caf::anon_send(session, start_atom::value);
    run();
    return session;
  }

  // Runs, advancing virtual time a second at a time, until the session's
  // loop stops and stays stopped (a run for a queued message included; at
  // most `limit`); its outcome.
  SessionOutcome run_to_end(const SessionActor& session, std::chrono::seconds limit = std::chrono::seconds(600)) {
    caf::scoped_actor self{*system_, true};
    SessionOutcome out;
    std::chrono::seconds t{0};
    for (int settled = 0; settled < 2;) {
      self->send(session, wait_atom::value);
      bool got = false;
      for (; !got && t <= limit; t += std::chrono::seconds(1)) {
        run();
        self->receive(
            [&](SessionOutcome& o) {
              settled = settled > 0 && o.last_seq == out.last_seq ? 2 : 1;
              out = std::move(o);
              got = true;
            },
            caf::after(std::chrono::seconds(0)) >> [] {});
        if (!got) sched_->advance_time(std::chrono::seconds(1));
      }
      BOOST_REQUIRE_MESSAGE(got, "the session's loop did not stop within " << limit.count() << " s");
      sched_->advance_time(std::chrono::seconds(1));
    }
    return out;
  }

  void run() { sched_->run(); }
  void advance(std::chrono::milliseconds d) {
    sched_->advance_time(d);
    sched_->run();
  }

  // The outcome, once the loop has stopped (fails the test if it has not).
  SessionOutcome outcome(const SessionActor& session) {
    caf::scoped_actor self{*system_, true};
    self->send(session, wait_atom::value);
    run();
    SessionOutcome out;
    bool got = false;
    self->receive(
        [&](SessionOutcome& o) {
          out = std::move(o);
          got = true;
        },
        caf::after(std::chrono::seconds(0)) >> [] {});
    BOOST_REQUIRE_MESSAGE(got, "the session's loop has not stopped");
    return out;
  }

  template <class T>
  std::vector<T> of_type() const {
    std::vector<T> out;
    for (const auto& e : events) {
      if (const auto* x = get_if<T>(e)) out.push_back(*x);
    }
    return out;
  }

  std::vector<Event> logged(const std::string& id) {
    std::vector<Event> out;
    CHECK_OK(log_->read(id, 1, UINT64_MAX, &out));
    return out;
  }

  caf::actor_system& system() { return *system_; }
  EventLog& log() { return *log_; }
  std::string workspace() const { return dir_.path(); }

  std::shared_ptr<ToolRegistry> tools = std::make_shared<ToolRegistry>();
  std::shared_ptr<HookRegistry> hooks = std::make_shared<HookRegistry>();
  std::shared_ptr<RecordingProvider> provider;
  std::shared_ptr<FaultInjector> faults;
  ProviderSupervisorActor provider_host;
  ToolSupervisorActor tool_host;
  HookActor hook_host;
  std::vector<Event> events;  // every event the sessions published, in order

 private:
  TempDir dir_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  std::unique_ptr<EventLog> log_;
  std::vector<caf::actor> spawned_;
};

// A quick C++ tool that records its calls.
inline ToolDefinition echo_tool(std::vector<std::string>* calls, std::string name = "echo") {
  return ToolDefinition{.spec = {.name = name,
                                 .description = "echoes its text",
                                 .schema = JsonText{R"({"type":"object"})"},
                                 .idempotent = true},
                        .blocking = false,
                        .run = [calls](const nlohmann::json& args, const ToolContext&) {
                          calls->push_back(args.dump());
                          return ToolResult{.output = "echo: " + args.value("text", std::string())};
                        }};
}

}  // namespace carapace::testing
