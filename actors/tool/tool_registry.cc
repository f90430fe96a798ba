#include "actors/tool/tool_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "base/bounded_json.h"

namespace carapace {

Status ToolRegistry::add(ToolDefinition tool) {
  const std::string& name = tool.spec.name;
  if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      })) {
    return Status::invalid_argument("tool name '" + name + "' must be 1 to 64 letters, digits, '_' or '-'");
  }
  if (!tool.run) return Status::invalid_argument("tool " + name + " has no function");
  if (!tool.spec.schema.text.empty()) {
    nlohmann::json schema;
    Status parsed = parse_bounded_json(tool.spec.schema.text, "tool " + name + ": its schema", &schema);
    if (!parsed.ok()) return parsed;
    if (!schema.is_object())
      return Status::invalid_argument("tool " + name + ": its schema is not a JSON object");
  }
  std::lock_guard lock(mu_);
  for (const auto& t : tools_) {
    if (t->spec.name == name)
      return Status::invalid_argument("a tool named " + name + " is already registered");
  }
  tools_.push_back(std::make_shared<const ToolDefinition>(std::move(tool)));
  return Status();
}

bool ToolRegistry::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(tools_.begin(), tools_.end(), [&](const auto& t) { return t->spec.name == name; });
  if (it == tools_.end()) return false;
  tools_.erase(it);
  return true;
}

std::shared_ptr<const ToolDefinition> ToolRegistry::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& t : tools_) {
    if (t->spec.name == name) return t;
  }
  return nullptr;
}

std::vector<ToolSpec> ToolRegistry::specs() const {
  std::lock_guard lock(mu_);
  std::vector<ToolSpec> out;
  out.reserve(tools_.size());
  for (const auto& t : tools_) out.push_back(t->spec);
  return out;
}

std::vector<std::string> ToolRegistry::names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& t : tools_) out.push_back(t->spec.name);
  return out;
}

}  // namespace carapace
