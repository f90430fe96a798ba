#include <boost/test/unit_test.hpp>

#include "events/fold.h"
#include "events/synthetic.h"
#include "tests/support/printing.h"

using namespace carapace;

namespace {

struct Written {
  std::vector<Event> events;
  size_t checkpoints = 0;
};

// Numbers the steps and adds checkpoints as the journal would.
Written write(const SyntheticOptions& options) {
  Written w;
  SessionState state;
  SyntheticSession synth(options);
  SyntheticStep step;
  uint64_t seq = 0;
  while (synth.next(&step)) {
    for (auto& body : step.events) {
      Event e{++seq, 0, std::move(body)};
      CHECK_OK(apply(state, e));
      w.events.push_back(std::move(e));
    }
    if (step.checkpoint) {
      Event c{++seq, 0, TurnCommitted{state.turn, seq - 1, state_hash(state), kStateHashVersion}};
      CHECK_OK(apply(state, c));
      w.events.push_back(std::move(c));
      ++w.checkpoints;
    }
  }
  return w;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synthetic_tests)

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_session) {
  SyntheticOptions options{.turns = 30, .seed = 9};
  BOOST_TEST((write(options).events == write(options).events));
  SyntheticOptions other = options;
  other.seed = 10;
  BOOST_TEST(!(write(options).events == write(other).events));
}

BOOST_AUTO_TEST_CASE(a_synthetic_session_folds_and_completes) {
  Written w = write(SyntheticOptions{.turns = 40, .tool_calls_per_turn = 3, .seed = 2, .failure_rate = 0.5});
  SessionState s;
  CHECK_OK(fold(w.events, &s));
  BOOST_TEST((s.status == SessionStatus::kCompleted));
  BOOST_TEST(s.committed_turn == 40u);
  BOOST_TEST(w.checkpoints == 41u);
  BOOST_TEST(s.tool_calls == 39u * 3);
  BOOST_TEST(s.llm_failures > 5u);
  BOOST_TEST(s.llm_attempts == s.llm_calls + s.llm_failures);
  BOOST_TEST(s.pending.empty());
}

BOOST_AUTO_TEST_CASE(the_context_is_trimmed_past_its_budget) {
  Written w = write(SyntheticOptions{.turns = 60, .seed = 4, .context_budget_chars = 8000});
  SessionState s;
  CHECK_OK(fold(w.events, &s));
  BOOST_TEST(s.context_trims > 0u);
  uint64_t chars = 0;
  for (const auto& m : s.messages) chars += m.text.size();
  BOOST_TEST(chars < 8000u + 4000u);
  BOOST_TEST((s.messages.front().role == Role::kUser));  // the task stays
}

BOOST_AUTO_TEST_SUITE_END()
