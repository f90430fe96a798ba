#include "storage/session_journal.h"

#include <chrono>
#include <future>
#include <thread>

#include "events/fold.h"
#include "storage/keys.h"

namespace carapace {

int64_t system_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

SessionJournal::SessionJournal(EventLog* log, std::string id, JournalOptions options)
    : log_(log), id_(std::move(id)), options_(std::move(options)) {
  meta_.id = id_;
}

Status SessionJournal::create(EventLog* log, std::string id, std::vector<EventBody> opening,
                              JournalOptions options, std::unique_ptr<SessionJournal>* out) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (opening.empty() || !std::holds_alternative<SessionStarted>(opening.front())) {
    return Status::invalid_argument("a session opens with session.started");
  }
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log->last_seq(id, &last));
  if (last != 0) {
    return Status::invalid_argument("session '" + id + "' already exists (" + std::to_string(last) +
                                    " events); resume it or choose another id");
  }
  std::unique_ptr<SessionJournal> journal(new SessionJournal(log, std::move(id), std::move(options)));
  for (size_t i = 0; i < opening.size(); ++i) {
    if (std::holds_alternative<SessionConfigured>(opening[i])) journal->meta_.configured_seq = i + 1;
  }
  CARAPACE_RETURN_IF_ERROR(journal->commit(std::move(opening)));
  *out = std::move(journal);
  return Status();
}

std::unique_ptr<SessionJournal> SessionJournal::attach(EventLog* log, std::string id, SessionState committed,
                                                       std::vector<Event> uncommitted, uint64_t last_seq,
                                                       JournalOptions options) {
  std::unique_ptr<SessionJournal> journal(new SessionJournal(log, std::move(id), std::move(options)));
  journal->state_ = std::move(committed);
  journal->uncommitted_ = std::move(uncommitted);
  journal->last_seq_ = last_seq;
  journal->last_snapshot_turn_ = journal->state_.committed_turn;
  SessionMeta previous;
  if (log->get_meta(journal->id_, &previous).ok()) journal->meta_ = previous;
  return journal;
}

bool SessionJournal::broken() const {
  std::lock_guard lock(shared_->mu);
  return !shared_->broken_reason.empty();
}

void SessionJournal::mark_broken(const Status& why) {
  std::lock_guard lock(shared_->mu);
  if (shared_->broken_reason.empty()) shared_->broken_reason = why.to_string();
}

Status SessionJournal::check_writable() const {
  {
    std::lock_guard lock(shared_->mu);
    if (!shared_->broken_reason.empty()) {
      return Status::aborted("session " + id_ + " stopped writing after: " + shared_->broken_reason +
                             "; recover the session to continue");
    }
  }
  if (!uncommitted_.empty()) {
    return Status::invalid_argument("session " + id_ + " has " + std::to_string(uncommitted_.size()) +
                                    " events of an interrupted turn; roll them back or adopt them first");
  }
  return Status();
}

Status SessionJournal::stage(std::vector<EventBody>&& bodies, std::vector<Event>* events) {
  const uint64_t first_seq = last_seq_ + 1;
  for (auto& body : bodies) {
    Event e{last_seq_ + 1, options_.clock(), std::move(body)};
    Status s = apply(state_, e);
    if (!s.ok()) {
      if (e.seq == first_seq) {
        events->clear();  // nothing applied: the journal is still whole
      } else {
        mark_broken(s);
      }
      last_seq_ = first_seq - 1;
      return s.with_context("session " + id_);
    }
    ++last_seq_;
    events->push_back(std::move(e));
  }
  return Status();
}

Status SessionJournal::stage_commit(std::vector<EventBody>&& step, std::vector<Event>* events,
                                    CheckpointEntry* checkpoint, SessionMeta* meta,
                                    std::string* snapshot_state) {
  CARAPACE_RETURN_IF_ERROR(stage(std::move(step), events));
  // A snapshot holds the state just before its turn.committed, so that
  // recovery re-checks the checkpoint's hash against it before trusting it.
  uint64_t every = options_.snapshot_every_turns;
  if (every > 0 && state_.turn > 0 && state_.turn % every == 0 && state_.turn != last_snapshot_turn_ &&
      event_bytes_since_snapshot_ >= last_snapshot_bytes_ / 2) {
    *snapshot_state = encode_state(state_);
  }
  TurnCommitted c{.turn = state_.turn,
                  .last_seq = last_seq_,
                  .state_hash = state_hash(state_),
                  .hash_version = kStateHashVersion};
  Event e{last_seq_ + 1, options_.clock(), c};
  Status s = apply(state_, e);
  if (!s.ok()) {
    if (!events->empty()) mark_broken(s);
    last_seq_ -= events->size();
    return s.with_context("session " + id_);
  }
  ++last_seq_;
  *checkpoint = CheckpointEntry{.seq = e.seq, .turn = c.turn, .state_hash = c.state_hash};
  *meta = meta_from_state(id_, state_, e.ts_us, &meta_);
  meta_ = *meta;
  events->push_back(std::move(e));
  return Status();
}

Status SessionJournal::inject_before(FaultPoint point, std::vector<EventBody>& step) {
  if (!options_.faults) return Status();
  // The first event written: a commit's is its turn.committed.
  std::string type(point == FaultPoint::kCommitBefore || step.empty()
                       ? wire_name(EventType::kTurnCommitted)
                       : wire_name(event_type_number(step.front())));
  Fault f = check_fault(options_.faults.get(),
                        FaultSite{.point = point, .session = id_, .event_type = type, .turn = state_.turn});
  if (f.action == FaultAction::kError) {
    return Status::io_error("injected fault at " + std::string(fault_point_name(point)) + ": " +
                            f.describe());
  }
  if (f.action == FaultAction::kDelay) {
    std::this_thread::sleep_for(std::chrono::milliseconds(f.delay_ms));
    // Recorded with the step it delayed, after the session.started that
    // opens a session (nothing of a session comes before it).
    auto at = step.begin();
    if (std::holds_alternative<SessionStarted>(step.front())) ++at;
    step.insert(at, FaultInjected{.point = std::string(fault_point_name(point)),
                                  .action = "delay",
                                  .detail = f.describe(),
                                  .turn = state_.turn});
  }
  return Status();
}

void SessionJournal::inject_after(FaultInjector* faults, const std::string& id,
                                  const std::vector<Event>& events,
                                  const std::vector<std::pair<size_t, uint64_t>>& steps) {
  if (faults == nullptr) return;
  for (const auto& [at, turn] : steps) {
    Fault after = check_fault(faults, FaultSite{.point = FaultPoint::kLogAfterAppend,
                                                .session = id,
                                                .event_type = std::string(events[at].type_name()),
                                                .turn = turn});
    if (after.action == FaultAction::kDelay)
      std::this_thread::sleep_for(std::chrono::milliseconds(after.delay_ms));
  }
}

void SessionJournal::take_staged(std::vector<Event>* events, std::vector<Event>* earlier) {
  if (earlier != nullptr) *earlier = staged_;
  events->insert(events->begin(), std::make_move_iterator(staged_.begin()),
                 std::make_move_iterator(staged_.end()));
  staged_.clear();
  staged_steps_.clear();
}

Status SessionJournal::stage_append(std::vector<EventBody> step, std::vector<Event>* written) {
  CARAPACE_RETURN_IF_ERROR(check_writable());
  if (step.empty()) return Status();
  const size_t at = staged_.size();
  std::vector<Event> events;
  Status s = inject_before(FaultPoint::kLogBeforeAppend, step);
  if (s.ok()) s = stage(std::move(step), &events);
  if (!s.ok()) return refused(s, written);
  staged_.insert(staged_.end(), std::make_move_iterator(events.begin()),
                 std::make_move_iterator(events.end()));
  staged_steps_.emplace_back(at, state_.turn);
  return Status();
}

// A step refused before anything of it was written (an injected error, a
// step the fold rejects): the steps staged before it are written, as they
// would have been had each been written when it was made.
Status SessionJournal::refused(const Status& why, std::vector<Event>* written) {
  if (!staged_.empty() && !broken()) flush(written).ok();
  return why;
}

Status SessionJournal::flush(std::vector<Event>* written) {
  if (staged_.empty()) return Status();
  CARAPACE_RETURN_IF_ERROR(check_writable());
  std::vector<Event> events = std::move(staged_);
  std::vector<std::pair<size_t, uint64_t>> steps = std::move(staged_steps_);
  staged_.clear();
  staged_steps_.clear();
  Status s = log_->append(
      AppendRequest{.session = id_, .events = events, .event_bytes = &event_bytes_since_snapshot_});
  if (!s.ok()) {
    mark_broken(s);
    return s;
  }
  inject_after(options_.faults.get(), id_, events, steps);
  if (written != nullptr) *written = std::move(events);
  return s;
}

Status SessionJournal::append(std::vector<EventBody> step, std::vector<Event>* written) {
  CARAPACE_RETURN_IF_ERROR(stage_append(std::move(step), written));
  return flush(written);
}

Status SessionJournal::append_synced(std::vector<EventBody> step) {
  CARAPACE_RETURN_IF_ERROR(flush());
  CARAPACE_RETURN_IF_ERROR(check_writable());
  if (step.empty()) return Status();
  CARAPACE_RETURN_IF_ERROR(inject_before(FaultPoint::kLogBeforeAppend, step));
  std::vector<Event> events;
  CARAPACE_RETURN_IF_ERROR(stage(std::move(step), &events));
  Status s = log_->append(AppendRequest{.session = id_,
                                        .events = events,
                                        .durability = Durability::kSynced,
                                        .event_bytes = &event_bytes_since_snapshot_});
  if (!s.ok()) mark_broken(s);
  return s;
}

Status SessionJournal::prepare_commit(std::vector<EventBody>&& step, PreparedCommit* out) {
  CARAPACE_RETURN_IF_ERROR(check_writable());
  CARAPACE_RETURN_IF_ERROR(inject_before(FaultPoint::kCommitBefore, step));
  std::string snapshot_state;
  CARAPACE_RETURN_IF_ERROR(
      stage_commit(std::move(step), &out->events, &out->checkpoint, &out->meta, &snapshot_state));
  if (!snapshot_state.empty()) {
    last_snapshot_bytes_ = snapshot_state.size();
    event_bytes_since_snapshot_ = 0;
    out->snapshot = std::make_shared<SnapshotEntry>(SnapshotEntry{
        .seq = out->checkpoint.seq, .turn = out->checkpoint.turn, .state = std::move(snapshot_state)});
    last_snapshot_turn_ = out->checkpoint.turn;
  }
  return Status();
}

AppendRequest SessionJournal::PreparedCommit::request(const std::string& id, uint64_t* event_bytes) const {
  return AppendRequest{.session = id,
                       .events = events,
                       .durability = Durability::kSynced,
                       .meta = &meta,
                       .checkpoints = std::span(&checkpoint, 1),
                       .event_bytes = event_bytes};
}

// Runs once the checkpoint is durable or has failed. The snapshot is written
// only after its checkpoint is durable: it must never describe a checkpoint
// the log does not have; and a lost snapshot only lengthens a later recovery,
// so its own failure never fails the turn.
void SessionJournal::finish_commit(EventLog* log, const std::string& id, Shared& shared,
                                   const std::shared_ptr<SnapshotEntry>& snapshot, const Status& s,
                                   FaultInjector* faults, uint64_t turn) {
  if (s.ok() && faults != nullptr) {
    Fault after = check_fault(
        faults,
        FaultSite{
            .point = FaultPoint::kCommitAfter, .session = id, .event_type = "turn.committed", .turn = turn});
    if (after.action == FaultAction::kDelay)
      std::this_thread::sleep_for(std::chrono::milliseconds(after.delay_ms));
  }
  if (!s.ok()) {
    std::lock_guard lock(shared.mu);
    if (shared.broken_reason.empty()) shared.broken_reason = s.to_string();
  } else if (snapshot) {
    log->put_snapshot(id, *snapshot).ok();
  }
}

void SessionJournal::append_durable_async(std::vector<EventBody> step, std::function<void(Status)> done,
                                          std::vector<Event>* staged, std::vector<Event>* earlier) {
  Status s = check_writable();
  if (s.ok() && step.empty()) {
    // Nothing to add: the staged steps alone, made durable.
    if (staged_.empty()) return done(Status());
  } else if (s.ok()) {
    s = inject_before(FaultPoint::kLogBeforeAppend, step);
  }
  auto events = std::make_shared<std::vector<Event>>();
  if (s.ok()) s = stage(std::move(step), events.get());
  if (!s.ok()) return done(refused(s, earlier));
  if (staged != nullptr) *staged = *events;
  // The steps written with it: the staged ones, then this one (if any).
  auto steps = std::make_shared<std::vector<std::pair<size_t, uint64_t>>>(std::move(staged_steps_));
  const size_t carried = staged_.size();
  if (!events->empty()) steps->emplace_back(carried, state_.turn);
  take_staged(events.get(), earlier);
  log_->append_async(AppendRequest{.session = id_,
                                   .events = *events,
                                   .durability = Durability::kSynced,
                                   .event_bytes = &event_bytes_since_snapshot_},
                     [id = id_, shared = shared_, events, steps, faults = options_.faults,
                      done = std::move(done)](Status st) {
                       if (!st.ok()) {
                         std::lock_guard lock(shared->mu);
                         if (shared->broken_reason.empty()) shared->broken_reason = st.to_string();
                       } else {
                         inject_after(faults.get(), id, *events, *steps);
                       }
                       done(std::move(st));
                     });
}

void SessionJournal::commit_async(std::vector<EventBody> step, std::function<void(Status)> done,
                                  std::vector<Event>* staged, std::vector<Event>* earlier) {
  auto prepared = std::make_shared<PreparedCommit>();
  Status s = prepare_commit(std::move(step), prepared.get());
  if (!s.ok()) return done(refused(s, earlier));
  if (staged != nullptr) *staged = prepared->events;
  auto steps = std::make_shared<std::vector<std::pair<size_t, uint64_t>>>(std::move(staged_steps_));
  take_staged(&prepared->events, earlier);
  log_->append_async(prepared->request(id_, &event_bytes_since_snapshot_),
                     [log = log_, id = id_, shared = shared_, prepared, steps, faults = options_.faults,
                      turn = state_.turn, done = std::move(done)](Status st) {
                       // The staged steps, written with the checkpoint ahead of it.
                       if (st.ok()) inject_after(faults.get(), id, prepared->events, *steps);
                       finish_commit(log, id, *shared, prepared->snapshot, st, faults.get(), turn);
                       done(std::move(st));
                     });
}

Status SessionJournal::commit(std::vector<EventBody> step) {
  CARAPACE_RETURN_IF_ERROR(flush());
  PreparedCommit prepared;
  CARAPACE_RETURN_IF_ERROR(prepare_commit(std::move(step), &prepared));
  Status s = log_->append(prepared.request(id_, &event_bytes_since_snapshot_));
  finish_commit(log_, id_, *shared_, prepared.snapshot, s, options_.faults.get(), state_.turn);
  return s;
}

Status SessionJournal::roll_back_uncommitted(std::string reason) {
  if (uncommitted_.empty()) return Status();
  CARAPACE_RETURN_IF_ERROR(flush());
  TurnRolledBack r{.from_seq = uncommitted_.front().seq,
                   .to_seq = uncommitted_.back().seq,
                   .turn = state_.turn + 1,
                   .reason = std::move(reason)};
  std::vector<EventBody> bodies;
  for (const Event& e : uncommitted_) {
    // The interrupted turn is the one after the last checkpoint, if it started.
    if (const auto* t = get_if<TurnStarted>(e)) r.turn = t->turn;
    if (const auto* m = get_if<UserMessage>(e)) bodies.emplace_back(UserMessage{.text = m->text, .queued = true});
  }
  bodies.insert(bodies.begin(), std::move(r));
  SessionState next = state_;
  std::vector<Event> events;
  for (auto& body : bodies) {
    Event e{last_seq_ + 1 + events.size(), options_.clock(), std::move(body)};
    Status s = apply(next, e);
    if (!s.ok()) return s.with_context("session " + id_);
    events.push_back(std::move(e));
  }
  Status s = log_->append(AppendRequest{.session = id_,
                                        .events = events,
                                        .durability = Durability::kSynced,
                                        .event_bytes = &event_bytes_since_snapshot_});
  if (!s.ok()) {
    mark_broken(s);
    return s;
  }
  state_ = std::move(next);
  last_seq_ = events.back().seq;
  uncommitted_.clear();
  return Status();
}

Status SessionJournal::create_with_history(EventLog* log, std::string id, std::vector<std::vector<Event>> turns,
                                           JournalOptions options, std::unique_ptr<SessionJournal>* out) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  if (turns.empty() || turns[0].empty() || !std::holds_alternative<SessionStarted>(turns[0][0].body)) {
    return Status::invalid_argument("a session opens with session.started");
  }
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log->last_seq(id, &last));
  if (last != 0) {
    return Status::invalid_argument("session '" + id + "' already exists (" + std::to_string(last) +
                                    " events); choose another id");
  }
  std::unique_ptr<SessionJournal> journal(new SessionJournal(log, std::move(id), std::move(options)));
  SessionState& state = journal->state_;
  std::vector<Event> events;
  std::vector<CheckpointEntry> checkpoints;
  for (auto& step : turns) {
    int64_t ts = step.empty() ? journal->options_.clock() : step.back().ts_us;
    for (Event& e : step) {
      e.seq = events.size() + 1;
      Status s = apply(state, e);
      if (!s.ok()) return s.with_context("session " + journal->id_ + " (the history given)");
      events.push_back(std::move(e));
    }
    TurnCommitted c{.turn = state.turn,
                    .last_seq = events.size(),
                    .state_hash = state_hash(state),
                    .hash_version = kStateHashVersion};
    Event e{events.size() + 1, ts, c};
    CARAPACE_RETURN_IF_ERROR(apply(state, e).with_context("session " + journal->id_));
    checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c.turn, .state_hash = c.state_hash});
    events.push_back(std::move(e));
  }
  SessionMeta meta = meta_from_state(journal->id_, state, journal->options_.clock(), nullptr);
  meta.configured_seq = last_configured_seq(events);
  CARAPACE_RETURN_IF_ERROR(log->append(AppendRequest{.session = journal->id_,
                                                     .events = events,
                                                     .durability = Durability::kSynced,
                                                     .meta = &meta,
                                                     .checkpoints = checkpoints}));
  journal->meta_ = meta;
  journal->last_seq_ = events.size();
  journal->last_snapshot_turn_ = state.committed_turn;
  *out = std::move(journal);
  return Status();
}

Status SessionJournal::reconfigure(SessionConfigured configured) {
  CARAPACE_RETURN_IF_ERROR(flush());
  CARAPACE_RETURN_IF_ERROR(check_writable());
  std::vector<EventBody> step;
  step.emplace_back(std::move(configured));
  CARAPACE_RETURN_IF_ERROR(inject_before(FaultPoint::kLogBeforeAppend, step));
  std::vector<Event> events;
  CARAPACE_RETURN_IF_ERROR(stage(std::move(step), &events));
  SessionMeta meta = meta_;
  meta.configured_seq = events.back().seq;
  if (meta.created_us == 0) meta = meta_from_state(id_, state_, options_.clock(), &meta);
  Status s = log_->append(AppendRequest{
      .session = id_, .events = events, .meta = &meta, .event_bytes = &event_bytes_since_snapshot_});
  if (!s.ok()) {
    mark_broken(s);
    return s;
  }
  meta_ = meta;
  return Status();
}

Status SessionJournal::note_verified(uint64_t seq) {
  if (seq <= meta_.verified_seq) return Status();
  CARAPACE_RETURN_IF_ERROR(flush());
  SessionMeta meta = meta_;
  meta.verified_seq = seq;
  if (meta.created_us == 0) meta = meta_from_state(id_, state_, options_.clock(), &meta);
  CARAPACE_RETURN_IF_ERROR(log_->append(AppendRequest{.session = id_, .meta = &meta}));
  meta_ = meta;
  return Status();
}

Status SessionJournal::adopt_uncommitted() {
  for (const Event& e : uncommitted_) {
    Status s = apply(state_, e);
    if (!s.ok()) {
      mark_broken(s);
      return s.with_context("session " + id_);
    }
  }
  // A call still without a result ended with the run it ran in: by a stop if
  // the first end of a run after its request is a session.stopped; else the
  // run crashed (a session.resumed, or nothing, follows it).
  for (size_t i = 0; i < uncommitted_.size(); ++i) {
    const auto* requested = get_if<ToolRequested>(uncommitted_[i]);
    if (requested == nullptr) continue;
    for (size_t j = i + 1; j < uncommitted_.size(); ++j) {
      if (const auto* done = get_if<ToolCompleted>(uncommitted_[j]);
          done && done->call_id == requested->call_id)
        break;
      if (const auto* stopped = get_if<SessionStopped>(uncommitted_[j])) {
        stopped_calls_[requested->call_id] = stopped->reason;
        break;
      }
      if (get_if<SessionResumed>(uncommitted_[j]) || get_if<TurnRolledBack>(uncommitted_[j])) break;
    }
  }
  uncommitted_.clear();
  return Status();
}

std::string SessionJournal::stop_reason_of_call(const std::string& call_id) const {
  auto it = stopped_calls_.find(call_id);
  return it == stopped_calls_.end() ? "" : it->second;
}

}  // namespace carapace
