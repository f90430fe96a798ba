// <carapace/tools.h>: a tool the model can call (ToolDefinition: a ToolSpec
// and a function of the JSON arguments returning a ToolResult). Include
// <nlohmann/json.hpp> in the file that reads the arguments.
#pragma once

#include "actors/tool/tool.h"
