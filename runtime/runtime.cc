#include "runtime/runtime.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <random>

#include <unistd.h>

#include "actors/caf_types.h"
#include "actors/tool/file_tools.h"
#include "actors/hook/hook_actor.h"
#include "actors/provider/provider_actor.h"
#include "actors/provider/scripted_provider.h"
#include "actors/session/session_actor.h"
#include "actors/tool/shell_tool.h"
#include "actors/tool/tool_actor.h"
#include "actors/tool/workspace.h"
#include "replay/recovery.h"
#include "storage/keys.h"

namespace carapace {
namespace {

SubscriberActor::behavior_type subscriber(SubscriberActor::pointer,
                                          std::function<void(const Event&)> on_event,
                                          std::function<void(const StreamDelta&)> on_delta) {
  return {
      [=](const EventNotice& notice) {
        if (on_event) on_event(notice.event);
      },
      [=](const StreamDelta& delta) {
        if (on_delta) on_delta(delta);
      },
      [](flush_atom) { return true; },
  };
}

Status make_provider(const Config& config, std::shared_ptr<Provider>* out) {
  if (config.provider.name != "scripted") {
    return Status::invalid_argument("provider \"" + config.provider.name +
                                    "\" is not available in this build");
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
  std::shared_ptr<Provider> provider;
  ProviderSupervisorActor provider_supervisor;
  ToolSupervisorActor tool_supervisor;
  HookActor hook_actor;

  std::mutex mu;
  std::map<std::string, SessionActor> sessions;
  struct Subscription {
    std::string session;
    SubscriberActor actor;
  };
  std::map<uint64_t, Subscription> subscriptions;
  uint64_t next_subscription = 0;

  SessionSettings settings_for(const std::string& workspace, uint64_t max_turns,
                               const std::string& extra_instructions) const;
  JournalOptions journal_options() const;

  SessionActor find(const std::string& id) {
    std::lock_guard lock(mu);
    auto it = sessions.find(id);
    return it == sessions.end() ? SessionActor{} : it->second;
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
    if (tool_supervisor) all.push_back(caf::actor_cast<caf::actor>(tool_supervisor));
    if (hook_actor) all.push_back(caf::actor_cast<caf::actor>(hook_actor));
    if (all.empty() || system == nullptr) return;
    caf::scoped_actor self{*system};
    for (auto& a : all) self->send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& a : all) self->wait_for(a);
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Runtime::~Runtime() {
  impl_->stop_actors();
  impl_->owned_system.reset();  // waits for every actor, detached helpers included
  impl_->log.reset();
}

Status Runtime::open(Options options, std::unique_ptr<Runtime>* out) {
  auto impl = std::make_unique<Impl>();
  if (options.home.empty()) return Status::invalid_argument("the runtime needs a home directory");
  impl->provider = options.provider;
  if (!impl->provider) CARAPACE_RETURN_IF_ERROR(make_provider(options.config, &impl->provider));
  CARAPACE_RETURN_IF_ERROR(EventLog::open(EventLog::Options{.path = options.home + "/log"}, &impl->log));

  const Config& config = options.config;
  if (options.builtin_tools) {
    for (const auto& name : config.tools_enabled) {
      ToolDefinition tool;
      if (name == "shell")
        tool = make_shell_tool(config.shell);
      else if (name == "read_file")
        tool = make_read_file_tool(config.files);
      else if (name == "write_file")
        tool = make_write_file_tool(config.files);
      else if (name == "list_dir")
        tool = make_list_dir_tool(config.files);
      else
        return Status::invalid_argument("tools.enabled names an unknown tool: " + name);
      if (options.decorate_builtin_tool) tool = options.decorate_builtin_tool(std::move(tool));
      CARAPACE_RETURN_IF_ERROR(impl->tools->add(std::move(tool)));
    }
  }
  for (const auto& h : config.hooks) {
    CARAPACE_RETURN_IF_ERROR(impl->hooks->add(HookDefinition{.name = h.name,
                                                             .event = h.event,
                                                             .matcher = h.matcher,
                                                             .command = h.command,
                                                             .timeout_ms = h.timeout_ms}));
  }
  impl->digest = config_digest(config);

  if (options.system != nullptr) {
    impl->system = options.system;
  } else {
    impl->owned_config = std::make_unique<caf::actor_system_config>();
    // An idle worker waits on a condition variable that new work signals at
    // once, instead of CAF 0.17's default of polling with 50 us sleeps, which
    // adds up to ~100 us (timer slack) to every message hop of a turn.
    impl->owned_config->set("work-stealing.moderate-poll-attempts", 0);
    impl->owned_system = std::make_unique<caf::actor_system>(*impl->owned_config);
    impl->system = impl->owned_system.get();
  }
  impl->provider_supervisor = spawn_provider_supervisor(*impl->system, impl->provider, options.faults);
  impl->tool_supervisor = spawn_tool_supervisor(*impl->system, impl->tools, options.faults);
  impl->hook_actor = spawn_hook_actor(*impl->system, impl->hooks, options.faults);
  impl->options = std::move(options);
  out->reset(new Runtime(std::move(impl)));
  return Status();
}

Status Runtime::register_tool(ToolDefinition tool) { return impl_->tools->add(std::move(tool)); }
bool Runtime::unregister_tool(const std::string& name) { return impl_->tools->remove(name); }
Status Runtime::register_hook(HookDefinition hook) { return impl_->hooks->add(std::move(hook)); }
bool Runtime::unregister_hook(const std::string& name) { return impl_->hooks->remove(name); }

SessionSettings Runtime::Impl::settings_for(const std::string& workspace, uint64_t max_turns,
                                            const std::string& extra_instructions) const {
  const Config& config = options.config;
  SessionSettings settings{
      .max_turns = max_turns ? max_turns : config.max_turns,
      .context_max_chars = config.context_max_chars,
      .retry = config.retry,
      .prompt = config.prompt,
      .instructions = config.instructions,
      .prices = config.prices,
      .workspace = workspace,
      .tool_timeout_ms = config.tool_timeout_ms,
      .provider_timeout_ms = config.provider.timeout_ms,
      .mutation = options.mutation,
  };
  if (!extra_instructions.empty()) {
    settings.instructions += (settings.instructions.empty() ? "" : "\n\n") + extra_instructions;
  }
  return settings;
}

JournalOptions Runtime::Impl::journal_options() const {
  return JournalOptions{.snapshot_every_turns = options.config.snapshot_every_turns,
                        .faults = options.faults};
}

Status Runtime::launch(const std::string& id, std::shared_ptr<SessionJournal> journal,
                       SessionSettings settings, const std::function<void(const Event&)>& on_event,
                       const std::function<void(const StreamDelta&)>& on_delta,
                       const std::string& first_input) {
  auto context = std::make_shared<SessionContext>(SessionContext{
      .id = id,
      .journal = std::move(journal),
      .settings = std::move(settings),
      .tools = impl_->tools,
      .hooks = impl_->hooks,
      .provider = caf::actor_cast<ProviderActor>(impl_->provider_supervisor),
      .tool_host = caf::actor_cast<ToolActor>(impl_->tool_supervisor),
      .hook_host = impl_->hook_actor,
  });
  SessionActor session = spawn_session(*impl_->system, context);
  {
    std::lock_guard lock(impl_->mu);
    impl_->sessions[id] = session;
  }
  if (on_event || on_delta) {
    uint64_t ignored;
    CARAPACE_RETURN_IF_ERROR(subscribe(id, on_event, on_delta, &ignored));
  }
  if (first_input.empty()) {
    caf::anon_send(session, start_atom::value);
  } else {
    caf::anon_send(session, UserInput{first_input});
  }
  return Status();
}

Status Runtime::start_session(const SessionOptions& options, std::string* id_out) {
  const Config& config = impl_->options.config;
  std::string id = options.id.empty() ? generate_session_id() : options.id;
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (options.task.empty()) return Status::invalid_argument("a session needs a task");

  std::string workspace = !options.workspace.empty()  ? options.workspace
                          : !config.workspace.empty() ? config.workspace
                                                      : std::filesystem::current_path().string();
  std::string canonical;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(workspace, &canonical));
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  const uint64_t max_turns = options.max_turns ? options.max_turns : config.max_turns;
  std::vector<EventBody> opening;
  opening.emplace_back(SessionStarted{.agent_id = config.agent_id,
                                      .provider = impl_->provider->name(),
                                      .model = options.model.empty() ? config.provider.model : options.model,
                                      .config_digest = impl_->digest,
                                      .rng_seed = seed,
                                      .workspace = canonical,
                                      .max_turns = max_turns,
                                      .instructions = options.instructions});
  opening.emplace_back(UserMessage{options.task});
  std::unique_ptr<SessionJournal> journal;
  CARAPACE_RETURN_IF_ERROR(
      SessionJournal::create(impl_->log.get(), id, std::move(opening), impl_->journal_options(), &journal));
  CARAPACE_RETURN_IF_ERROR(launch(id, std::move(journal),
                                  impl_->settings_for(canonical, max_turns, options.instructions),
                                  options.on_event, options.on_delta, ""));
  if (id_out != nullptr) *id_out = id;
  return Status();
}

Status Runtime::resume_session(const std::string& id, const ResumeOptions& options) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (impl_->find(id)) return Status::busy("session " + id + " is already running in this process");
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(impl_->log->last_seq(id, &last));
  if (last == 0) return Status::not_found("no session '" + id + "' in " + impl_->options.home);
  // A damaged record anywhere refuses the resume, even one a snapshot would skip.
  Status intact = check_records(*impl_->log, id);
  if (!intact.ok()) {
    return intact.with_context("the log is damaged; `carapace verify " + id +
                               "` lists the damage, and nothing was written");
  }
  RecoveredSession r;
  CARAPACE_RETURN_IF_ERROR(recover(*impl_->log, id, RecoverOptions{}, &r));
  const SessionState& s = r.committed;
  bool finished =
      (s.status == SessionStatus::kCompleted || s.status == SessionStatus::kFailed) && r.uncommitted.empty();
  if (finished && !options.allow_finished) {
    std::string what = s.status == SessionStatus::kCompleted ? "has completed"
                                                             : "ended with an error (" + s.last_error + ")";
    return Status::invalid_argument(
        "session " + id + " " + what + "; there is nothing to resume. Send it a new message " +
        "(carapace chat, then /resume " + id + ") or fork it (carapace fork " + id + " --at-turn N)");
  }
  std::string workspace;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(s.workspace, &workspace));
  SessionSettings settings = impl_->settings_for(workspace, s.max_turns, s.instructions);
  uint64_t checkpoint_seq = s.committed_seq, checkpoint_turn = s.committed_turn;
  auto journal = std::shared_ptr<SessionJournal>(SessionJournal::attach(
      impl_->log.get(), id, r.committed, std::move(r.uncommitted), r.last_seq, impl_->journal_options()));
  const bool step = options.mode == ResumeMode::kStep;
  if (step) {
    CARAPACE_RETURN_IF_ERROR(journal->adopt_uncommitted());
  } else {
    CARAPACE_RETURN_IF_ERROR(
        journal->roll_back_uncommitted("resumed in turn mode: the interrupted turn runs again"));
  }
  if (!finished) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    CARAPACE_RETURN_IF_ERROR(journal->append({SessionResumed{.checkpoint_seq = checkpoint_seq,
                                                             .checkpoint_turn = checkpoint_turn,
                                                             .mode = step ? "step" : "turn",
                                                             .pid = ::getpid(),
                                                             .host = host}}));
  }
  return launch(id, std::move(journal), std::move(settings), options.on_event, options.on_delta, "");
}

Status Runtime::fork_session(const std::string& source, uint64_t at_turn, const ForkOptions& options,
                             std::string* id_out) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(source));
  std::string id = options.id.empty() ? generate_session_id() : options.id;
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
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
  // The history as the fold sees it: rolled-back events and checkpoints
  // left out (the fork writes its own checkpoints, with its own hashes).
  std::vector<std::vector<EventBody>> turns(1);
  std::vector<EventBody> since_checkpoint;
  for (auto& e : events) {
    if (std::holds_alternative<TurnRolledBack>(e.body)) {
      since_checkpoint.clear();
    } else if (std::holds_alternative<TurnCommitted>(e.body)) {
      for (auto& b : since_checkpoint) turns.back().push_back(std::move(b));
      since_checkpoint.clear();
      turns.emplace_back();
    } else {
      since_checkpoint.push_back(std::move(e.body));
    }
  }
  turns.pop_back();  // the one after the last checkpoint is empty
  if (turns.empty() || turns[0].empty() || !std::holds_alternative<SessionStarted>(turns[0][0])) {
    return Status::corruption("session " + source + " does not open with session.started");
  }
  auto& started = std::get<SessionStarted>(turns[0][0]);
  started.parent_session = source;
  started.parent_turn = at_turn;
  started.parent_seq = at->seq;
  std::unique_ptr<SessionJournal> journal;
  CARAPACE_RETURN_IF_ERROR(
      SessionJournal::create(impl_->log.get(), id, std::move(turns[0]), impl_->journal_options(), &journal));
  for (size_t t = 1; t < turns.size(); ++t) CARAPACE_RETURN_IF_ERROR(journal->commit(std::move(turns[t])));
  const SessionState& forked = journal->state();
  std::string workspace;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(forked.workspace, &workspace));
  SessionSettings settings = impl_->settings_for(workspace, forked.max_turns, forked.instructions);
  CARAPACE_RETURN_IF_ERROR(launch(id, std::shared_ptr<SessionJournal>(std::move(journal)), std::move(settings),
                                  options.on_event, options.on_delta, options.task));
  if (id_out != nullptr) *id_out = id;
  return Status();
}

Status Runtime::send_message(const std::string& id, const std::string& text) {
  SessionActor session = impl_->find(id);
  if (!session) return Status::not_found("no session '" + id + "' runs in this runtime");
  if (text.empty()) return Status::invalid_argument("the message is empty");
  caf::scoped_actor self{*impl_->system};
  Status result;
  self->request(session, std::chrono::minutes(1), UserInput{text})
      .receive(
          [&](InputAck& ack) {
            if (!ack.ok) result = Status::aborted("session " + id + " did not take the message: " + ack.error);
          },
          [&](caf::error& e) {
            result = Status::aborted("session " + id + " did not take the message: " + caf::to_string(e));
          });
  return result;
}

Status Runtime::wait(const std::string& id, std::chrono::milliseconds timeout, SessionOutcome* out) {
  SessionActor session = impl_->find(id);
  if (!session) return Status::not_found("no session '" + id + "' runs in this runtime");
  caf::scoped_actor self{*impl_->system};
  Status result;
  self->request(session, timeout, wait_atom::value)
      .receive([&](SessionOutcome& outcome) { *out = std::move(outcome); },
               [&](caf::error& e) {
                 result = e == caf::sec::request_timeout
                              ? Status::busy("session " + id + " is still running after " +
                                             std::to_string(timeout.count()) + " ms")
                              : Status::aborted("waiting for session " + id + ": " + caf::to_string(e));
               });
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

Status Runtime::subscribe(const std::string& id, std::function<void(const Event&)> on_event,
                          std::function<void(const StreamDelta&)> on_delta, uint64_t* subscription) {
  SessionActor session = impl_->find(id);
  if (!session) return Status::not_found("no session '" + id + "' runs in this runtime");
  SubscriberActor sub = impl_->system->spawn(subscriber, std::move(on_event), std::move(on_delta));
  {
    std::lock_guard lock(impl_->mu);
    *subscription = ++impl_->next_subscription;
    impl_->subscriptions.emplace(*subscription, Impl::Subscription{id, sub});
  }
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
  caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
}

EventLog& Runtime::log() { return *impl_->log; }
const Config& Runtime::config() const { return impl_->options.config; }
caf::actor_system& Runtime::system() { return *impl_->system; }
const std::string& Runtime::home() const { return impl_->options.home; }

std::string generate_session_id() { return keys::generate_session_id("s"); }

}  // namespace carapace
