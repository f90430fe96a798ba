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
  uint64_t before = context_chars(messages);
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

}  // namespace carapace
