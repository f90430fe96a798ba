// Prompt assembly: the system prompt of one turn, built from five layers.
//
//   1. identity              who the agent is (config text, or a file read each turn)
//   2. tools                 generated from the tools registered right now
//   3. workflows             the configured workflow/skill catalog, if any
//   4. session instructions  this session's own, plus system messages from hooks
//   5. custom instructions   a user-editable file, skipped when missing
//
// The prompt is rebuilt every turn and never stored as a message; the
// prompt.assembled event records each layer's contributor and size and the
// digest of the text. Reads the identity and custom instructions files; no
// other side effects. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "actors/tool/tool.h"
#include "events/events.h"

namespace carapace {

struct WorkflowEntry {
  std::string name;
  std::string description;
};

struct PromptConfig {
  std::string identity;                  // used when identity_file is empty
  std::string identity_file;             // read every turn when set
  std::string custom_instructions_file;  // appended last; a missing file is skipped
  std::vector<WorkflowEntry> workflows;
};

// The built-in identity block.
const std::string& default_identity();

struct PromptInputs {
  const PromptConfig* config = nullptr;
  std::vector<ToolSpec> tools;
  std::string session_instructions;
  std::vector<std::string> hook_messages;  // system messages hooks added for this turn
};

struct AssembledPrompt {
  std::string text;
  std::vector<PromptSegment> segments;
  Digest128 digest;
};

AssembledPrompt assemble_prompt(const PromptInputs& inputs);

}  // namespace carapace
