// Trace export as plain JSON (one array of spans, in span_to_json's shape)
// and NDJSON (one span per line), for scripts (export.h).
#pragma once

#include <string>

#include "actors/collector/export.h"

namespace carapace {

std::string export_json(const ExportInput& input);
std::string export_ndjson(const ExportInput& input);

}  // namespace carapace
