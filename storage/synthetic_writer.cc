#include "storage/synthetic_writer.h"

namespace carapace {

Status write_synthetic_session(EventLog* log, const std::string& id, const SyntheticOptions& options,
                               const JournalOptions& journal_options, SyntheticWriteStats* stats,
                               const std::function<void(const SyntheticWriteStats&)>& progress) {
  SyntheticSession synth(options);
  SyntheticStep step;
  if (!synth.next(&step)) return Status::invalid_argument("the synthetic session is empty");
  std::unique_ptr<SessionJournal> journal;
  stats->events += step.events.size() + 1;
  CARAPACE_RETURN_IF_ERROR(
      SessionJournal::create(log, id, std::move(step.events), journal_options, &journal));
  ++stats->steps;
  ++stats->checkpoints;
  while (synth.next(&step)) {
    stats->events += step.events.size() + (step.checkpoint ? 1 : 0);
    ++stats->steps;
    if (step.checkpoint) {
      CARAPACE_RETURN_IF_ERROR(journal->commit(std::move(step.events)));
      ++stats->checkpoints;
      stats->turns = journal->state().committed_turn;
      if (progress) progress(*stats);
    } else {
      CARAPACE_RETURN_IF_ERROR(journal->append(std::move(step.events)));
    }
  }
  return Status();
}

}  // namespace carapace
