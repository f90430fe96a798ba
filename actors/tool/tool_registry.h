// ToolRegistry: the tools a runtime offers, by name, in registration order.
//
// Thread-safe: tools can be registered and removed while sessions run; each
// turn's prompt and each call see the registry as it is at that moment.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/tool/tool.h"
#include "base/status.h"

namespace carapace {

class ToolRegistry {
 public:
  // invalid_argument if the name is taken or malformed, the function is
  // missing, or the schema is not a JSON object.
  Status add(ToolDefinition tool);
  bool remove(const std::string& name);

  std::shared_ptr<const ToolDefinition> find(const std::string& name) const;
  std::vector<ToolSpec> specs() const;
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const ToolDefinition>> tools_;
};

}  // namespace carapace
