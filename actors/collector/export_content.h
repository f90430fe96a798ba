// The message content of a trace in the shape the OpenTelemetry GenAI
// conventions give gen_ai.input.messages / gen_ai.output.messages: an array
// of {"role", "parts": [{"type": "text", "content"} | {"type": "tool_call",
// "id", "name", "arguments"} | {"type": "tool_call_response", "id",
// "response"}], "finish_reason"?}. Exported only on request
// (`trace export --with-content`), redacted by the exporter.
//
// A model call's input comes from its verbatim request body (the OpenAI
// Chat Completions and Anthropic Messages shapes; the scripted provider
// keeps none), its output from the answer recorded in llm.responded; a tool
// call's arguments and result from tool.requested / tool.completed.
//
// Pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "actors/collector/span.h"
#include "events/events.h"

namespace carapace {

// The messages of a request body; an empty array when it is neither shape.
nlohmann::json input_messages_from_request(std::string_view body);

// The one assistant message of a recorded answer.
nlohmann::json output_messages_from_answer(const LlmResponded& answer);

// The response's id and model, from a verbatim response body (one JSON
// object, or server-sent events whose data lines are JSON); "" if absent.
struct ResponseIdentity {
  std::string id;
  std::string model;
};
ResponseIdentity response_identity(std::string_view body);

// ExportInput::content for the spans of one session: per span id, "input" /
// "output" for model calls, "arguments" / "result" for tool calls.
void collect_content(const std::vector<Span>& spans, const std::vector<Event>& events,
                     const std::map<std::string, std::string>& bodies, std::map<std::string, nlohmann::json>* out);

}  // namespace carapace
