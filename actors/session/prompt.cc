#include "actors/session/prompt.h"

#include "base/bounded_file.h"
#include "base/limits.h"

namespace carapace {
namespace {

// A prompt file is named by a configuration: a device, a FIFO or a file past
// the cap is not read (the config loader warned about it).
bool read_file(const std::string& path, std::string* out) {
  return read_bounded_file(path, limits::kPromptFileBytes, "the prompt file", out).ok();
}

void add(AssembledPrompt& p, const std::string& layer, const std::string& contributor,
         const std::string& text) {
  if (text.empty()) return;
  if (!p.text.empty()) p.text += "\n\n";
  p.text += text;
  p.segments.push_back(PromptSegment{layer, contributor, text.size()});
}

}  // namespace

const std::string& default_identity() {
  static const std::string kIdentity =
      "You are an agent working in a workspace directory with the tools listed below. Use them to "
      "do the task you are given.\n"
      "- Say briefly what you are about to do before you call a tool.\n"
      "- When a tool fails, read its error and try another way.\n"
      "- Do not run destructive commands unless the task clearly asks for them.\n"
      "- When you are done, answer with a short summary of what you did and found.";
  return kIdentity;
}

AssembledPrompt assemble_prompt(const PromptInputs& in) {
  AssembledPrompt p;
  const PromptConfig& config = *in.config;

  std::string identity = config.identity.empty() ? default_identity() : config.identity;
  std::string contributor = config.identity.empty() ? "default" : "config";
  if (!config.identity_file.empty()) {
    std::string text;
    if (read_file(config.identity_file, &text)) {
      identity = std::move(text);
      contributor = config.identity_file;
    }
  }
  add(p, "identity", contributor, identity);

  if (!in.tools.empty()) {
    std::string tools = "## Available tools\n";
    for (const auto& t : in.tools) {
      tools += "\n- **" + t.name + "**: " + t.description;
      if (!t.schema.text.empty()) tools += "\n  Arguments (JSON Schema): " + t.schema.text;
    }
    add(p, "tools", "registry", tools);
  }

  if (!config.workflows.empty()) {
    std::string workflows = "## Available workflows\n";
    for (const auto& w : config.workflows) workflows += "\n- **" + w.name + "**: " + w.description;
    add(p, "workflows", "config", workflows);
  }

  std::string session;
  if (!in.session_instructions.empty()) session = in.session_instructions;
  for (const auto& m : in.hook_messages) {
    if (!session.empty()) session += "\n\n";
    session += m;
  }
  if (!session.empty()) {
    add(p, "session",
        in.hook_messages.empty()          ? "session"
        : in.session_instructions.empty() ? "hooks"
                                          : "session+hooks",
        "## Session instructions\n" + session);
  }

  if (!config.custom_instructions_file.empty()) {
    std::string custom;
    if (read_file(config.custom_instructions_file, &custom))
      add(p, "custom", config.custom_instructions_file, custom);
  }
  p.digest = digest128(p.text);
  return p;
}

}  // namespace carapace
