#include "actors/collector/export_json.h"

namespace carapace {
namespace {

nlohmann::json span_json(const Span& sp, const ExportInput& input) {
  nlohmann::json j = span_to_json(sp);
  if (input.with_content) {
    auto c = input.content.find(sp.span_id);
    if (c != input.content.end()) j["content"] = c->second;
  }
  export_redact_json(j, input);
  return j;
}

}  // namespace

std::string export_json(const ExportInput& input) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& trace : input.traces) {
    for (const auto& sp : trace) all.push_back(span_json(sp, input));
  }
  return all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string export_ndjson(const ExportInput& input) {
  std::string out;
  for (const auto& trace : input.traces) {
    for (const auto& sp : trace) out += span_json(sp, input).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return out;
}

}  // namespace carapace
