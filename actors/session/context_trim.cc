#include "actors/session/context_trim.h"

namespace carapace {
namespace {

uint64_t message_chars(const Message& m) {
  uint64_t n = m.text.size();
  for (const auto& c : m.tool_calls) n += c.args.text.size() + c.name.size();
  return n;
}

}  // namespace

uint64_t context_chars(const std::vector<Message>& messages) {
  uint64_t n = 0;
  for (const auto& m : messages) n += message_chars(m);
  return n;
}

std::optional<ContextTrimmed> plan_trim(const std::vector<Message>& messages, uint64_t max_chars) {
  return plan_trim(messages, max_chars, context_chars(messages));
}

std::optional<ContextTrimmed> plan_trim(const std::vector<Message>& messages, uint64_t max_chars,
                                        uint64_t chars) {
  const uint64_t before = chars;
  if (max_chars == 0 || before <= max_chars || messages.size() < 3) return std::nullopt;
  const uint64_t target = max_chars / 4 * 3;
  // The latest turn stays whole: it starts at the last message that is not a
  // tool result (the assistant message those results answer, or a user message).
  size_t limit = messages.size() - 1;
  while (limit > 1 && messages[limit].role == Role::kTool) --limit;
  uint64_t now = before;
  size_t end = 1;  // messages [1, end) leave
  while (end < limit && now > target) {
    now -= message_chars(messages[end]);
    ++end;
    while (end < limit && messages[end].role == Role::kTool) {  // with the call they answer
      now -= message_chars(messages[end]);
      ++end;
    }
  }
  if (end == 1) return std::nullopt;
  return ContextTrimmed{
      .first_index = 1, .messages_removed = end - 1, .chars_before = before, .chars_after = now};
}

uint64_t ContextSize::of(const SessionState& state) {
  const std::vector<Message>& messages = state.messages;
  if (counted_ <= messages.size() && state.message_digests.size() == messages.size()) {
    Digest128 d = digest_;
    for (size_t i = counted_; i < messages.size(); ++i) d = chain_digest(d, state.message_digests[i]);
    if (d == state.messages_digest) {
      for (size_t i = counted_; i < messages.size(); ++i) chars_ += message_chars(messages[i]);
      counted_ = messages.size();
      digest_ = d;
      return chars_;
    }
  }
  chars_ = context_chars(messages);
  counted_ = messages.size();
  digest_ = state.messages_digest;
  return chars_;
}

}  // namespace carapace
