// Trace export as OTLP/JSON: an ExportTraceServiceRequest in the JSON
// mapping of the OpenTelemetry protocol (resourceSpans → scopeSpans →
// spans; lowercase hex ids; nanosecond times as decimal strings; typed
// attribute values; enums as integers), with the span names and attributes
// of the OpenTelemetry GenAI semantic conventions (docs/trace.md, "Export"):
//
//   session → "invoke_agent {agent}"  INTERNAL  gen_ai.operation.name=invoke_agent
//   llm     → "chat {model}"          CLIENT    gen_ai.operation.name=chat
//   tool    → "execute_tool {tool}"   INTERNAL  gen_ai.operation.name=execute_tool
//   turn, hook, resume keep their names (INTERNAL)
//
// Every Carapace attribute is kept under the "carapace." prefix. The body
// of an HTTP exchange names the response's id and model; message content
// (gen_ai.input.messages / gen_ai.output.messages, tool arguments and
// results) only when input.with_content.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "actors/collector/export.h"

namespace carapace {

// The request as JSON (what export_otlp dumps).
nlohmann::json otlp_request(const ExportInput& input);
std::string export_otlp(const ExportInput& input);

// OTLP's enum values (opentelemetry/proto/trace/v1/trace.proto).
inline constexpr int kOtlpKindInternal = 1;
inline constexpr int kOtlpKindClient = 3;
inline constexpr int kOtlpStatusUnset = 0;
inline constexpr int kOtlpStatusOk = 1;
inline constexpr int kOtlpStatusError = 2;

}  // namespace carapace
