#include "actors/collector/export.h"

#include <algorithm>

#include "actors/collector/export_html.h"
#include "actors/collector/export_json.h"
#include "actors/collector/export_markdown.h"
#include "actors/collector/export_otlp.h"
#include "actors/collector/export_perfetto.h"

namespace carapace {

bool export_reference_key(std::string_view key) {
  return key == "ref" || key.ends_with("_id") || key.ends_with("digest") || key.ends_with("hash") ||
         key.ends_with("fingerprint") ||
         key.ends_with("_ref") || key == "request_body" || key == "response_body" || key == "traceId" ||
         key == "spanId" || key == "parentSpanId";
}

void export_redact_json(nlohmann::json& j, const ExportInput& input) {
  if (!input.redact) return;
  if (j.is_string()) {
    j = input.redact(j.get<std::string>());
  } else if (j.is_array()) {
    for (auto& v : j) export_redact_json(v, input);
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_string() && export_reference_key(it.key())) continue;
      export_redact_json(it.value(), input);
    }
  }
}

int64_t export_end_us(const Span& span, int64_t last_us) {
  int64_t end = span.open() ? last_us : span.end_us;
  return std::max(end, span.start_us);
}

int64_t export_last_us(const std::vector<Span>& spans) {
  int64_t last = 0;
  if (!spans.empty()) last = spans[0].attrs.value("last_ts_us", int64_t{0});
  for (const auto& sp : spans) last = std::max({last, sp.start_us, sp.end_us});
  return last;
}

const Span& export_root(const ExportInput& input, const std::vector<Span>& trace) {
  static const Span kNone;
  if (!trace.empty() && trace[0].kind == kSpanSession) return trace[0];
  if (!trace.empty()) {
    auto it = input.roots.find(trace[0].session);
    if (it != input.roots.end()) return it->second;
  }
  return kNone;
}

Status export_trace(std::string_view format, const ExportInput& input, std::string* out) {
  if (format == "otlp") {
    *out = export_otlp(input);
  } else if (format == "perfetto") {
    *out = export_perfetto(input);
  } else if (format == "html") {
    *out = export_html(input);
  } else if (format == "md") {
    *out = export_markdown(input);
  } else if (format == "json") {
    *out = export_json(input);
  } else if (format == "ndjson") {
    *out = export_ndjson(input);
  } else {
    return Status::invalid_argument("unknown export format '" + std::string(format) +
                                    "': otlp, perfetto, html, md, json or ndjson");
  }
  return Status();
}

}  // namespace carapace
