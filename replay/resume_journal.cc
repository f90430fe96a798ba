#include "replay/resume_journal.h"

namespace carapace {

bool recovered_finished(const RecoveredSession& r) {
  const SessionState& s = r.committed;
  // A message that came while it ran, or a follow-up, would have started the
  // next run had the process lived: such a session is not finished.
  const bool waiting = (!s.queued_inputs.empty() || !s.follow_ups.empty()) &&
                       (s.max_turns == 0 || s.committed_turn < s.max_turns);
  return (s.status == SessionStatus::kCompleted || s.status == SessionStatus::kFailed) &&
         r.uncommitted.empty() && !waiting;
}

Status reopen_journal(EventLog* log, const std::string& id, RecoveredSession r, const ResumeRecord& how,
                      const JournalOptions& options, std::shared_ptr<SessionJournal>* out) {
  const bool finished = recovered_finished(r);
  const uint64_t checkpoint_seq = r.committed.committed_seq, checkpoint_turn = r.committed.committed_turn;
  auto journal = std::shared_ptr<SessionJournal>(
      SessionJournal::attach(log, id, std::move(r.committed), std::move(r.uncommitted), r.last_seq, options));
  if (how.verified_seq > 0) CARAPACE_RETURN_IF_ERROR(journal->note_verified(how.verified_seq));
  if (how.step) {
    CARAPACE_RETURN_IF_ERROR(journal->adopt_uncommitted());
  } else {
    CARAPACE_RETURN_IF_ERROR(journal->roll_back_uncommitted("resumed in turn mode: the interrupted turn runs again"));
  }
  if (!finished) {
    CARAPACE_RETURN_IF_ERROR(journal->append({SessionResumed{.checkpoint_seq = checkpoint_seq,
                                                             .checkpoint_turn = checkpoint_turn,
                                                             .mode = how.step ? "step" : "turn",
                                                             .pid = how.pid,
                                                             .host = how.host,
                                                             .max_turns = how.max_turns}}));
  }
  *out = std::move(journal);
  return Status();
}

}  // namespace carapace
