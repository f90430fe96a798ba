// Trace export: a session's spans (or many sessions') turned into a file
// another program opens — OTLP/JSON for OpenTelemetry back ends, Chrome
// trace-event JSON for Perfetto, one self-contained HTML page, Markdown for
// an issue, and plain JSON / NDJSON (docs/trace.md, "Export").
//
// Each format is a pure function ExportInput → text (export_otlp.h,
// export_perfetto.h, export_html.h, export_markdown.h, export_json.h). What
// was recorded (span names, attribute values, bodies, message content) is
// passed through `redact` before it is written; the ids Carapace derived
// itself (trace, span and body references) are not, since the redactor
// would take their hex digits for a secret.
//
// Plain values; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "actors/collector/span.h"
#include "base/status.h"

namespace carapace {

struct ExportInput {
  // One entry per session, its spans as SpanBuilder gives them (root first).
  std::vector<std::vector<Span>> traces;
  // Where a trace entry holds some of a session's spans but not its root
  // (`collector --otlp-endpoint` streams spans as they close): the root, by
  // session, for what the others take from it (agent, provider, model).
  std::map<std::string, Span> roots;
  // Verbatim provider bodies by reference (the request_body / response_body
  // attributes of LLM spans); the response's id and model are read from
  // them. Content is exported only with `with_content`.
  std::map<std::string, std::string> bodies;
  bool with_content = false;
  // With `with_content`: per span id, the message content of that span in the
  // GenAI conventions' shape (export_content.h): "input" / "output" (arrays of
  // messages) for a model call, "arguments" / "result" (strings) for a tool call.
  std::map<std::string, nlohmann::json> content;
  std::string service_version;
  // Applied to every recorded string written out; identity when empty.
  std::function<std::string(std::string)> redact;

  std::string clean(std::string text) const { return redact ? redact(std::move(text)) : text; }
};

// The formats, as `--format` names them.
inline constexpr std::string_view kExportFormats[] = {"otlp", "perfetto", "html", "md", "json", "ndjson"};

// Whether an attribute or field of that name holds one of Carapace's own
// ids, digests or body references (never redacted).
bool export_reference_key(std::string_view key);

// Masks every string in `j` with input.redact, except the values of
// reference keys.
void export_redact_json(nlohmann::json& j, const ExportInput& input);

// The end of a span for a timeline: its close time, or for an open span the
// last event of its session (`last_us`), never before its start.
int64_t export_end_us(const Span& span, int64_t last_us);

// The time of the last event of a trace (root attribute last_ts_us, else the
// latest span time).
int64_t export_last_us(const std::vector<Span>& spans);

// The root span of `trace`'s session: its first span when that is the
// session span, else input.roots' entry, else an empty span.
const Span& export_root(const ExportInput& input, const std::vector<Span>& trace);

// Dispatches on `format` (one of kExportFormats); invalid_argument otherwise.
Status export_trace(std::string_view format, const ExportInput& input, std::string* out);

}  // namespace carapace
