// Context trimming: which messages leave the conversation when it outgrows
// its budget.
//
// The first message (the task) always stays. Past `max_chars`, whole turns
// leave from the oldest on until three quarters of the budget remain (so that
// trimming does not recur every turn); a tool result never stays without the
// assistant message that asked for it. The plan is recorded as a
// context.trimmed event, which the fold applies. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "events/events.h"
#include "events/session_state.h"

namespace carapace {

// Characters the messages put in a request: texts and tool call arguments.
uint64_t context_chars(const std::vector<Message>& messages);

// The trim that brings `messages` back under budget, or nothing when they fit
// (or when nothing can leave without breaking a turn apart). `chars`, when
// given, is context_chars(messages), already known.
std::optional<ContextTrimmed> plan_trim(const std::vector<Message>& messages, uint64_t max_chars);
std::optional<ContextTrimmed> plan_trim(const std::vector<Message>& messages, uint64_t max_chars,
                                        uint64_t chars);

// context_chars of a session's conversation, kept as it grows, so that a
// turn costs what it adds and not what the conversation holds. Between two
// looks the fold only appends messages (a trim is the exception), so a look
// counts the messages added since the last one, after checking that the
// ones it had counted are still there: their digests must chain, with the
// new messages', to the state's messages_digest. Any other change (a trim,
// another state) fails the check, and the whole conversation is counted
// again. Not thread-safe: one per session loop.
class ContextSize {
 public:
  uint64_t of(const SessionState& state);

 private:
  size_t counted_ = 0;
  Digest128 digest_;  // the chain digest of the first counted_ messages
  uint64_t chars_ = 0;
};

}  // namespace carapace
