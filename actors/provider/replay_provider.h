// ReplayProvider: answers every attempt from a recorded session
// (actors/replay_tape.h), at once, with the recorded latency (the provider
// actor waits it out in the replay's virtual time). It never opens a
// connection. Thread-safe.
#pragma once

#include <memory>

#include "actors/provider/provider.h"
#include "actors/replay_tape.h"

namespace carapace {

class ReplayProvider : public Provider {
 public:
  explicit ReplayProvider(std::shared_ptr<const ReplayTape> tape) : tape_(std::move(tape)) {}

  std::string name() const override { return "replay"; }
  bool blocking() const override { return false; }
  bool reports_answered() const override { return true; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override;

 private:
  std::shared_ptr<const ReplayTape> tape_;
};

}  // namespace carapace
