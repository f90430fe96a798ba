#include "actors/tool/ask_user_tool.h"

namespace carapace {

ToolDefinition ask_user_tool() {
  return ToolDefinition{
      .spec = {.name = kAskUserTool,
               .description = "Ask the user a question and wait for the answer, which is this call's result. "
                              "Use it when you need a decision or information only the user has; the answer "
                              "may take a long time.",
               .schema = {R"({"type":"object","properties":{"question":{"type":"string","description":"The question, complete and self-contained"}},"required":["question"]})"},
               .idempotent = true},
      .blocking = false,
      // The loop answers ask_user itself; reaching here means it was bypassed.
      .run = [](const nlohmann::json&, const ToolContext&) {
        return ToolResult::error("ask_user is answered by a person through the session, not run");
      }};
}

}  // namespace carapace
