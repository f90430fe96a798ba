// ask_user: the built-in tool with which the model asks the user a question
// (docs/approvals.md). It never runs anywhere: the session loop records the
// question as an approval.requested of kind "question", parks, and records
// the person's answer as the call's result. Offered only where a person can
// answer: `carapace chat`, `carapace serve`, a program that registers
// Runtime::Options::on_approval, or a config whose tools.enabled names it.
#pragma once

#include "actors/tool/tool.h"

namespace carapace {

inline constexpr const char* kAskUserTool = "ask_user";

ToolDefinition ask_user_tool();

}  // namespace carapace
