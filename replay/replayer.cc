#include "replay/replayer.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

#include "actors/caf_types.h"
#include "actors/hook/replay_hook_actor.h"
#include "actors/provider/provider_actor.h"
#include "actors/provider/replay_provider.h"
#include "actors/replay_tape.h"
#include "actors/tool/replay_tool_actor.h"
#include "events/fold.h"
#include "replay/recovery.h"
#include "replay/resume_journal.h"
#include "storage/keys.h"
#include "storage/session_meta.h"

namespace carapace {
namespace {

// The storage faults of a replay: it refuses the replay's writes once its
// log reaches a limit (where the recorded run stopped, or where the replay
// must end), and says again the delays a fault plan put before a recorded
// step or checkpoint (a fault.injected the journal wrote), waiting for none.
class Halt : public FaultInjector {
 public:
  // `last` gives the session's last seq (its journal's); `recorded[i]` holds seq i + 1.
  Halt(std::function<uint64_t()> last, const std::vector<Event>* recorded)
      : last_(std::move(last)), recorded_(recorded) {}
  // Appends are refused while the session's last seq is >= limit (0: never).
  void limit(uint64_t seq) { limit_ = seq; }

  Fault check(const FaultSite& site) override {
    if (site.point != FaultPoint::kLogBeforeAppend && site.point != FaultPoint::kCommitBefore) return Fault{};
    const uint64_t last = last_();
    if (limit_ != 0 && last >= limit_) {
      return Fault{
          .action = FaultAction::kError, .message = "the recorded run stopped here", .rule = "replay"};
    }
    // The next recorded event, or the one after a session.started that opens the step.
    for (uint64_t i = last; i < recorded_->size() && i <= last + 1; ++i) {
      const auto* f = get_if<FaultInjected>((*recorded_)[i]);
      if (f != nullptr && f->action == "delay" && f->point == fault_point_name(site.point)) {
        return Fault{.action = FaultAction::kDelay, .recorded = f->detail};
      }
      if (!std::holds_alternative<SessionStarted>((*recorded_)[i].body)) break;
    }
    return Fault{};
  }

 private:
  std::function<uint64_t()> last_;
  const std::vector<Event>* recorded_;
  std::atomic<uint64_t> limit_{0};
};

// A directory of the replay's own, removed with it.
class Scratch {
 public:
  Status open(const std::string& given) {
    if (!given.empty()) {
      path_ = given;
      return Status();
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "carapace-replay-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error("cannot create a scratch directory for the replay under " +
                              std::filesystem::temp_directory_path().string() + ": " + std::strerror(errno));
    }
    path_ = pattern;
    owned_ = true;
    return Status();
  }
  ~Scratch() {
    std::error_code ignored;
    if (owned_) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

uint64_t turn_at(const std::vector<Event>& recorded, uint64_t seq) {
  uint64_t turn = 0;
  for (uint64_t i = 0; i < seq && i < recorded.size(); ++i) {
    if (const auto* t = get_if<TurnStarted>(recorded[i])) turn = t->turn;
  }
  return turn;
}

// What happened around one replay: the actors, the logs and where it stands.
class Replay {
 public:
  Replay(const ReplayOptions& options, std::string id, std::vector<Event> recorded, size_t history, bool cut)
      : options_(options), id_(std::move(id)), recorded_(std::move(recorded)), history_(history), cut_(cut) {}

  ~Replay() {
    if (!system_) return;
    for (auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched_->run();
  }

  Status run(const std::string& scratch_dir, ReplayReport* out) {
    CARAPACE_RETURN_IF_ERROR(EventLog::open(
        EventLog::Options{.path = scratch_dir + "/log", .inline_durable_appends = true, .scratch = true}, &log_));
    CARAPACE_RETURN_IF_ERROR(write_history());
    written_ = history_;
    compared_ = history_;
    tape_ = std::make_shared<ReplayTape>(recorded_, [this] { return written_.load(); });
    halt_ = std::make_shared<Halt>([this] { return journal_ ? journal_->last_seq() : 0; }, &recorded_);

    config_.set("scheduler.policy", caf::atom("testing"));
    system_ = std::make_unique<caf::actor_system>(config_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(system_->scheduler());
    provider_ = spawn_provider_supervisor(*system_, std::make_shared<ReplayProvider>(tape_), nullptr);
    tool_host_ = spawn_replay_tool_actor(*system_, tape_);
    current_ = ReplayConfiguration{.tools = options_.tools, .hooks = options_.hooks, .settings = options_.settings};
    // A fork's history can hold records after its opening's (its parent was
    // resumed with another configuration): it goes on as the last one says.
    if (options_.reconfigure) {
      const Event* last = nullptr;
      size_t records = 0;
      for (size_t i = 0; i < history_; ++i) {
        if (std::holds_alternative<SessionConfigured>(recorded_[i].body)) last = &recorded_[i], ++records;
      }
      if (records > 1) {
        CARAPACE_RETURN_IF_ERROR(options_.reconfigure(std::get<SessionConfigured>(last->body), &current_)
                                     .with_context("the configuration session " + id_ + " recorded at seq " +
                                                   std::to_string(last->seq)));
      }
    }
    hook_host_ = spawn_replay_hook_actor(*system_, current_.hooks, tape_);
    actors_ = {caf::actor_cast<caf::actor>(provider_), caf::actor_cast<caf::actor>(tool_host_),
               caf::actor_cast<caf::actor>(hook_host_)};

    // The history as the session was created (or forked) with it.
    halt_->limit(limit_after(history_));
    RecoveredSession r;
    CARAPACE_RETURN_IF_ERROR(recover(*log_, id_, RecoverOptions{}, &r));
    auto journal = std::shared_ptr<SessionJournal>(SessionJournal::attach(
        log_.get(), id_, std::move(r.committed), std::move(r.uncommitted), r.last_seq, journal_options()));
    // A fork that changed the configuration recorded it right after its history.
    bool reconfigured = false;
    CARAPACE_RETURN_IF_ERROR(reenact_configuration(journal.get(), &reconfigured));
    if (reconfigured) written_ = compared_ = journal->last_seq();
    const auto* first = written_ < recorded_.size() ? get_if<UserMessage>(recorded_[written_]) : nullptr;
    launch(std::move(journal), first != nullptr && !first->queued);

    CARAPACE_RETURN_IF_ERROR(drive());
    out->events = compared_;
    out->history = history_;
    out->resumes = resumes_;
    out->turns = turns_;
    out->divergence = std::move(divergence_);
    return Status();
  }

 private:
  JournalOptions journal_options() const { return JournalOptions{.snapshot_every_turns = 0, .faults = halt_}; }

  // The limit for the segment starting at recorded index `from`: the seq
  // before its resume boundary; past the end, one event more (so that an
  // extra event shows), or none if the replay stops at a turn.
  uint64_t limit_after(size_t from) const {
    for (size_t i = from; i < recorded_.size(); ++i) {
      if (ReplayTape::is_resume_boundary(recorded_[i])) return i;
    }
    return cut_ ? recorded_.size() : recorded_.size() + 1;
  }

  Status write_history() {
    std::vector<CheckpointEntry> checkpoints;
    Folder folder;
    for (size_t i = 0; i < history_; ++i) {
      const Event& e = recorded_[i];
      CARAPACE_RETURN_IF_ERROR(folder.add(e));
      if (const auto* c = get_if<TurnCommitted>(e)) {
        checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c->turn, .state_hash = c->state_hash});
      }
    }
    SessionMeta meta = meta_from_state(id_, folder.committed(), recorded_[history_ - 1].ts_us, nullptr);
    meta.configured_seq = last_configured_seq(std::span<const Event>(recorded_.data(), history_));
    return log_->append(AppendRequest{.session = id_,
                                      .events = std::span<const Event>(recorded_.data(), history_),
                                      .meta = &meta,
                                      .checkpoints = checkpoints});
  }

  // The recording changed how the session runs at the replay's next seq (a
  // session.configured a resume or fork wrote): writes the same record and
  // goes on with what ReplayOptions::reconfigure makes of it.
  Status reenact_configuration(SessionJournal* journal, bool* reconfigured) {
    *reconfigured = false;
    const uint64_t next = journal->last_seq();  // the recorded index of the next event
    const auto* recorded = next < recorded_.size() ? get_if<SessionConfigured>(recorded_[next]) : nullptr;
    if (recorded == nullptr) return Status();
    CARAPACE_RETURN_IF_ERROR(journal->reconfigure(*recorded));
    *reconfigured = true;
    if (!options_.reconfigure) return Status();
    ReplayConfiguration changed = current_;
    CARAPACE_RETURN_IF_ERROR(options_.reconfigure(*recorded, &changed).with_context(
        "the configuration session " + id_ + " recorded at seq " + std::to_string(next + 1)));
    if (!changed.tools || !changed.hooks || !changed.settings) {
      return Status::invalid_argument("a replay's new configuration needs the tools, the hooks and the settings");
    }
    if (changed.hooks != current_.hooks) {
      hook_host_ = spawn_replay_hook_actor(*system_, changed.hooks, tape_);
      actors_.push_back(caf::actor_cast<caf::actor>(hook_host_));
    }
    current_ = std::move(changed);
    if (context_ && context_->journal.get() == journal) {
      // The session waits, idle, for what comes next: it goes on as reconfigured.
      context_->settings = current_.settings(journal->state());
      context_->tools = current_.tools;
      context_->hooks = current_.hooks;
      context_->hook_host = hook_host_;
    }
    return Status();
  }

  void launch(std::shared_ptr<SessionJournal> journal, bool with_user_message) {
    journal_ = journal;
    SessionSettings settings = current_.settings(journal->state());
    auto context = std::make_shared<SessionContext>(SessionContext{
        .id = id_,
        .journal = std::move(journal),
        .settings = std::move(settings),
        .tools = current_.tools,
        .hooks = current_.hooks,
        .provider = caf::actor_cast<ProviderActor>(provider_),
        .tool_host = tool_host_,
        // Where each call ran is read from the log: a replay needs no node.
        .nodes = std::make_shared<NodeDirectory>(
            [tape = tape_](const std::string& call_id, std::string* node) { return tape->tool_node(call_id, node); }),
        .hook_host = hook_host_,
        // The recording answers by turn and attempt: no conversation to copy.
        .provider_reads_messages = false,
    });
    context->on_written = [this](const std::string&, const Event& e) {
      std::lock_guard lock(told_mu_);
      told_.push_back(e);
    };
    context_ = context;
    session_ = spawn_session(*system_, context);
    actors_.push_back(caf::actor_cast<caf::actor>(session_));
    if (with_user_message) {
      sent_ = written_;
      caf::anon_send(session_, UserInput{get_if<UserMessage>(recorded_[written_])->text});
    } else {
      caf::anon_send(session_, start_atom::value);
    }
  }

  // Compares what the replay wrote since the last look; *diverged at the first divergence.
  // The events as the session wrote them, when it told them all and they
  // match the recording; else (events the replay wrote itself: a resume's
  // stop, follow-up messages or configuration), or to confirm
  // a difference, as the scratch log stores them: a divergence is reported
  // from the stored records.
  Status compare_new(bool* diverged) {
    uint64_t last = journal_->last_seq();
    if (last <= compared_) return Status();
    std::vector<Event> produced;
    if (!take_told(last, &produced) || !compare(produced, nullptr)) {
      produced.clear();
      CARAPACE_RETURN_IF_ERROR(log_->read(id_, compared_ + 1, last, &produced));
      if (!compare(produced, diverged)) return Status();
    }
    written_ = compared_;
    return Status();
  }

  // Compares `produced` (the events after compared_) with the recording,
  // moving compared_ on; false at the first difference, which is reported
  // (*diverged set) unless `diverged` is null.
  bool compare(std::vector<Event>& produced, bool* diverged) {
    for (Event& e : produced) {
      const Event* expected = e.seq <= recorded_.size() ? &recorded_[e.seq - 1] : nullptr;
      std::vector<FieldDiff> fields;
      if (expected == nullptr || !(fields = diff_events(*expected, e)).empty()) {
        if (diverged == nullptr) return false;
        if (expected == nullptr) {
          diverge(e.seq, std::nullopt, std::move(e), {});
        } else {
          diverge(e.seq, *expected, std::move(e), std::move(fields));
        }
        *diverged = true;
        return false;
      }
      if (const auto* c = get_if<TurnCommitted>(e)) turns_ = c->turn;
      compared_ = e.seq;
    }
    return true;
  }

  // The events after compared_ up to `last` as the session told them, false
  // unless they are all there, in order (the replay wrote one itself):
  // then the scratch log has them.
  bool take_told(uint64_t last, std::vector<Event>* out) {
    std::lock_guard lock(told_mu_);
    auto first =
        std::find_if(told_.begin(), told_.end(), [this](const Event& e) { return e.seq > compared_; });
    told_.erase(told_.begin(), first);
    uint64_t want = compared_ + 1;
    size_t n = 0;
    while (n < told_.size() && told_[n].seq == want && want <= last) ++n, ++want;
    if (want != last + 1) return false;
    out->assign(std::make_move_iterator(told_.begin()),
                std::make_move_iterator(told_.begin() + static_cast<std::ptrdiff_t>(n)));
    told_.erase(told_.begin(), told_.begin() + static_cast<std::ptrdiff_t>(n));
    return true;
  }

  void diverge(uint64_t seq, std::optional<Event> expected, std::optional<Event> actual,
               std::vector<FieldDiff> fields) {
    ReplayDivergence d{.seq = seq,
                       .turn = turn_at(recorded_, seq),
                       .expected = std::move(expected),
                       .actual = std::move(actual),
                       .fields = std::move(fields)};
    uint64_t from = seq > options_.context_events + 1 ? seq - 1 - options_.context_events : 0;
    for (uint64_t i = from; i + 1 < seq && i < recorded_.size(); ++i) d.before.push_back(recorded_[i]);
    divergence_ = std::move(d);
  }

  // Runs the session one message at a time, putting in what came from
  // outside its loop at the recorded seq, until it has nothing more to do.
  Status drive() {
    for (;;) {
      bool diverged = false;
      CARAPACE_RETURN_IF_ERROR(compare_new(&diverged));
      if (diverged) return Status();
      const Event* next = written_ < recorded_.size() ? &recorded_[written_] : nullptr;
      const auto* message = next ? get_if<UserMessage>(*next) : nullptr;
      // A message sent while the session ran: it reaches the session before
      // anything else it has waiting, as it did then.
      if (message != nullptr && message->queued && sent_ != written_) {
        sent_ = written_;
        caf::anon_send<caf::message_priority::high>(session_, UserInput{message->text});
      }
      if (sched_->try_run_once()) continue;
      if (sched_->has_pending_timeout()) {
        sched_->trigger_timeout();
        continue;
      }
      // Nothing happens any more by itself.
      if (next == nullptr) return Status();
      if (message != nullptr && message->follow_up && sent_ != written_) {
        // A finished session woken with follow-ups (chat's next message):
        // they were written from outside its loop, then it started again.
        sent_ = written_;
        CARAPACE_RETURN_IF_ERROR(reenact_follow_ups(journal_.get()));
        caf::anon_send(session_, start_atom::value);
        continue;
      }
      if (message != nullptr && !message->queued && sent_ != written_) {
        sent_ = written_;
        caf::anon_send(session_, UserInput{message->text});
        continue;
      }
      if (const auto* decided = get_if<ApprovalDecided>(*next); decided != nullptr && sent_ != written_) {
        // A person's decision (or the clock's) came from outside the loop
        // while it was parked: given as recorded, bound to the recorded
        // arguments, so that a call that changed does not ride it.
        sent_ = written_;
        ApprovalAnswer answer{.call_id = decided->call_id,
                              .kind = decided->decision == "approved"   ? ApprovalAnswer::Kind::kApprove
                                      : decided->decision == "answered" ? ApprovalAnswer::Kind::kAnswer
                                                                        : ApprovalAnswer::Kind::kDeny,
                              .reason = decided->reason,
                              .text = decided->answer,
                              .args_digest = decided->args_digest.hex(),
                              .by = decided->by,
                              .who = decided->who,
                              .expiry = decided->expired};
        caf::anon_send(session_, std::move(answer));
        continue;
      }
      if (ReplayTape::is_resume_boundary(*next)) {
        bool go_on = false;
        CARAPACE_RETURN_IF_ERROR(resume(&go_on));
        if (!go_on) return Status();
        continue;
      }
      if (std::holds_alternative<SessionConfigured>(next->body) && journal_->last_seq() == written_) {
        // A finished session woken with another configuration (a message sent to it later).
        bool reconfigured = false;
        CARAPACE_RETURN_IF_ERROR(reenact_configuration(journal_.get(), &reconfigured));
        if (reconfigured) continue;
      }
      diverge(next->seq, *next, std::nullopt, {});
      return Status();
    }
  }

  // The recorded run stopped before written_ + 1 (crashed, or was stopped:
  // session.stopped) and was resumed: end the halted actor, record the stop as
  // it was recorded, and resume as it was resumed. `go_on` is false when the
  // recorded run ends with the stop, or the replay diverged there.
  Status resume(bool* go_on) {
    caf::anon_send_exit(session_, caf::exit_reason::kill);
    sched_->run();
    if (const auto* stopped = get_if<SessionStopped>(recorded_[written_])) {
      halt_->limit(0);
      CARAPACE_RETURN_IF_ERROR(journal_->append({*stopped}));
      bool diverged = false;
      CARAPACE_RETURN_IF_ERROR(compare_new(&diverged));
      if (diverged || written_ >= recorded_.size()) return Status();
    }
    log_->forget_writer(id_);
    *go_on = true;
    ResumeRecord how{.step = true};
    size_t resumed_at = written_;
    while (resumed_at < recorded_.size() && !std::holds_alternative<SessionResumed>(recorded_[resumed_at].body)) {
      ++resumed_at;
    }
    if (resumed_at < recorded_.size()) {
      const auto& r = std::get<SessionResumed>(recorded_[resumed_at].body);
      how = ResumeRecord{.step = r.mode == "step", .pid = r.pid, .host = r.host, .max_turns = r.max_turns};
    } else {
      how.step = false;  // a roll-back with no session.resumed after it
    }
    halt_->limit(limit_after(resumed_at + 1));
    RecoveredSession r;
    CARAPACE_RETURN_IF_ERROR(recover(*log_, id_, RecoverOptions{}, &r));
    std::shared_ptr<SessionJournal> journal;
    CARAPACE_RETURN_IF_ERROR(reopen_journal(log_.get(), id_, std::move(r), how, journal_options(), &journal));
    bool reconfigured = false;
    CARAPACE_RETURN_IF_ERROR(reenact_configuration(journal.get(), &reconfigured));
    CARAPACE_RETURN_IF_ERROR(reenact_follow_ups(journal.get()));
    ++resumes_;
    launch(std::move(journal), false);
    return Status();
  }

  // The follow-up messages a resume recorded (`resume --then`) came from
  // outside the loop: they are written as they were, before it goes on.
  Status reenact_follow_ups(SessionJournal* journal) {
    std::vector<EventBody> step;
    for (uint64_t i = journal->last_seq(); i < recorded_.size(); ++i) {
      const auto* m = get_if<UserMessage>(recorded_[i]);
      if (m == nullptr || !m->follow_up) break;
      step.emplace_back(*m);
    }
    return journal->append_synced(std::move(step));
  }

  const ReplayOptions& options_;
  const std::string id_;
  const std::vector<Event> recorded_;
  const size_t history_;
  const bool cut_;

  std::unique_ptr<EventLog> log_;
  std::shared_ptr<ReplayTape> tape_;
  std::shared_ptr<Halt> halt_;
  std::shared_ptr<SessionJournal> journal_;  // the running actor's
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  ProviderSupervisorActor provider_;
  ToolActor tool_host_;
  HookActor hook_host_;
  SessionActor session_;
  std::shared_ptr<SessionContext> context_;  // the running actor's
  ReplayConfiguration current_;
  std::vector<caf::actor> actors_;

  // What the session wrote (SessionContext::on_written), not compared yet:
  // compare_new takes them rather than reading the scratch log back.
  std::mutex told_mu_;
  std::vector<Event> told_;           // under told_mu_
  std::atomic<uint64_t> written_{0};  // the replay's last seq, as compared
  uint64_t compared_ = 0;
  uint64_t sent_ = UINT64_MAX;  // the recorded index of the last user message sent
  uint64_t resumes_ = 0;
  uint64_t turns_ = 0;
  std::optional<ReplayDivergence> divergence_;
};

}  // namespace

Status replay_session(const EventLog& log, const std::string& id, const ReplayOptions& options,
                      ReplayReport* out) {
  *out = ReplayReport{.session = id};
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (!options.tools || !options.hooks || !options.settings) {
    return Status::invalid_argument("a replay needs the tools, the hooks and the settings");
  }
  Status intact = check_records(log, id);
  if (!intact.ok()) {
    if (intact.is_not_found()) return intact;
    return intact.with_context("session " + id + " cannot be replayed (`carapace verify " + id +
                               "` lists the damage)");
  }
  std::vector<Event> recorded;
  CARAPACE_RETURN_IF_ERROR(log.read(id, 1, UINT64_MAX, &recorded));
  if (recorded.empty()) return Status::not_found("no session '" + id + "'");
  const auto* started = get_if<SessionStarted>(recorded[0]);
  if (started == nullptr) return Status::corruption("session " + id + " does not open with session.started");
  // What the loop did not write: the opening (or a fork's copied history),
  // up to the checkpoint of the turn the session started from.
  size_t history = 0;
  for (size_t i = 0; i < recorded.size(); ++i) {
    if (const auto* c = get_if<TurnCommitted>(recorded[i]); c && c->turn == started->parent_turn) {
      history = i + 1;
      break;
    }
  }
  if (history == 0) {
    return Status::corruption("session " + id + " has no checkpoint of its opening (turn " +
                              std::to_string(started->parent_turn) + "); it cannot be replayed");
  }
  bool cut = false;
  if (options.until_turn > 0) {
    for (size_t i = history; i < recorded.size(); ++i) {
      if (const auto* c = get_if<TurnCommitted>(recorded[i]); c && c->turn == options.until_turn) {
        recorded.resize(i + 1);
        cut = true;
        break;
      }
    }
  }
  Scratch scratch;
  CARAPACE_RETURN_IF_ERROR(scratch.open(options.scratch_dir));
  Replay replay(options, id, std::move(recorded), history, cut);
  return replay.run(scratch.path(), out);
}

}  // namespace carapace
