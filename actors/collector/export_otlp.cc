#include "actors/collector/export_otlp.h"

#include "actors/collector/export_content.h"

namespace carapace {
namespace {

using nlohmann::json;

std::string nanos(int64_t us) { return std::to_string(us < 0 ? 0 : us) + "000"; }

// An OTLP AnyValue from a JSON scalar or array.
json any_value(const json& v) {
  if (v.is_boolean()) return {{"boolValue", v.get<bool>()}};
  if (v.is_number_unsigned()) return {{"intValue", std::to_string(v.get<uint64_t>())}};
  if (v.is_number_integer()) return {{"intValue", std::to_string(v.get<int64_t>())}};
  if (v.is_number_float()) return {{"doubleValue", v.get<double>()}};
  if (v.is_array()) {
    json values = json::array();
    for (const auto& e : v) values.push_back(any_value(e));
    return {{"arrayValue", {{"values", values}}}};
  }
  if (v.is_string()) return {{"stringValue", v.get<std::string>()}};
  return {{"stringValue", v.dump()}};
}

struct Attributes {
  const ExportInput& input;
  json list = json::array();

  // Recorded strings are redacted, except Carapace's own references.
  void add(const std::string& key, json value, bool reference = false) {
    if (!reference) export_redact_json(value, input);
    list.push_back({{"key", key}, {"value", any_value(value)}});
  }
};

std::string status_message(const Span& sp) {
  std::string why = sp.attrs.value("error", std::string());
  if (sp.attrs.contains("http_status"))
    why = "HTTP " + sp.attrs.get("http_status")->dump() + (why.empty() ? "" : ": " + why);
  if (sp.status == "denied" && sp.attrs.contains("denied_by")) why = "denied by hook " + sp.attrs.value("denied_by", "");
  return why.empty() ? sp.status : sp.status + ": " + why;
}

bool is_error_status(const std::string& status) {
  return status == "error" || status == "failed" || status == "crashed" || status == "timed_out" ||
         status == "interrupted" || status == "denied" || status == "stopped";
}

// A span that ended in error. A session its runtime stopped (session.stopped)
// did not fail: it stays resumable, and its status is left unset; a model
// call the stop cut short, or a hook's stop decision, is an error.
bool is_error(const Span& sp) {
  return is_error_status(sp.status) && !(sp.kind == kSpanSession && sp.status == "stopped");
}

// error.type: low cardinality, as the conventions ask: the HTTP status, else
// what happened.
std::string error_type(const Span& sp) {
  if (sp.attrs.contains("http_status")) return sp.attrs.get("http_status")->dump();
  if (sp.status == "error" && sp.kind == kSpanLlm) return sp.attrs.value("category", std::string("error"));
  if (sp.status == "error" && sp.kind == kSpanTool) return "tool_error";
  return sp.status;
}

json span_json(const Span& sp, const Span& root, int64_t last_us, const ExportInput& input) {
  const std::string agent = root.attrs.value("agent", std::string());
  const std::string provider = root.attrs.value("provider", std::string());
  Attributes a{input};
  std::string name = sp.name;
  int kind = kOtlpKindInternal;
  a.add("gen_ai.conversation.id", sp.session);
  if (sp.kind == kSpanSession) {
    name = agent.empty() ? "invoke_agent" : "invoke_agent " + agent;
    a.add("gen_ai.operation.name", "invoke_agent");
    if (!agent.empty()) a.add("gen_ai.agent.name", agent);
    if (!provider.empty()) a.add("gen_ai.provider.name", provider);
    if (sp.attrs.contains("model")) a.add("gen_ai.request.model", *sp.attrs.get("model"));
  } else if (sp.kind == kSpanLlm) {
    std::string model = sp.attrs.value("model", root.attrs.value("model", std::string()));
    name = model.empty() ? "chat" : "chat " + model;
    kind = kOtlpKindClient;
    a.add("gen_ai.operation.name", "chat");
    if (!provider.empty()) a.add("gen_ai.provider.name", provider);
    if (!model.empty()) a.add("gen_ai.request.model", model);
    auto body = input.bodies.find(sp.attrs.value("response_body", std::string()));
    if (body != input.bodies.end()) {
      ResponseIdentity id = response_identity(body->second);
      if (!id.id.empty()) a.add("gen_ai.response.id", id.id);
      if (!id.model.empty()) a.add("gen_ai.response.model", id.model);
    }
    if (sp.attrs.contains("finish_reason"))
      a.add("gen_ai.response.finish_reasons", json::array({*sp.attrs.get("finish_reason")}));
  } else if (sp.kind == kSpanTool) {
    std::string tool = sp.attrs.value("tool", std::string());
    name = tool.empty() ? "execute_tool" : "execute_tool " + tool;
    a.add("gen_ai.operation.name", "execute_tool");
    if (!tool.empty()) a.add("gen_ai.tool.name", tool);
    a.add("gen_ai.tool.type", "function");
    if (sp.attrs.contains("call_id")) a.add("gen_ai.tool.call.id", *sp.attrs.get("call_id"), true);
  }
  if (sp.kind == kSpanApproval) {
    // Marked as a wait for a person: its time is neither the model's nor the tool's.
    name = sp.name;
    kind = kOtlpKindInternal;
    a.add("carapace.approval.kind", sp.attrs.value("kind", std::string()));
    if (sp.attrs.contains("decision")) a.add("carapace.approval.decision", *sp.attrs.get("decision"));
    if (sp.attrs.contains("by")) a.add("carapace.approval.by", *sp.attrs.get("by"));
    if (sp.attrs.contains("wait_ms")) a.add("carapace.approval.wait_ms", *sp.attrs.get("wait_ms"));
    if (sp.attrs.contains("call_id")) a.add("gen_ai.tool.call.id", *sp.attrs.get("call_id"), true);
  }
  if (sp.kind == kSpanSession || sp.kind == kSpanLlm) {
    static const std::pair<const char*, const char*> kUsage[] = {
        {"tokens_in", "gen_ai.usage.input_tokens"},
        {"tokens_out", "gen_ai.usage.output_tokens"},
        {"cache_read", "gen_ai.usage.cache_read.input_tokens"},
        {"cache_write", "gen_ai.usage.cache_creation.input_tokens"}};
    for (const auto& [ours, theirs] : kUsage) {
      if (sp.attrs.contains(ours)) a.add(theirs, *sp.attrs.get(ours));
    }
  }
  if (is_error(sp)) a.add("error.type", error_type(sp));
  if (input.with_content) {
    auto c = input.content.find(sp.span_id);
    if (c != input.content.end()) {
      json content = c->second;
      export_redact_json(content, input);
      if (content.contains("input")) a.add("gen_ai.input.messages", content["input"].dump());
      if (content.contains("output")) a.add("gen_ai.output.messages", content["output"].dump());
      if (content.contains("arguments")) a.add("gen_ai.tool.call.arguments", content["arguments"]);
      if (content.contains("result")) a.add("gen_ai.tool.call.result", content["result"]);
    }
  }
  a.add("carapace.kind", sp.kind);
  a.add("carapace.status", sp.status);
  a.add("carapace.open_seq", sp.open_seq);
  if (!sp.open()) a.add("carapace.close_seq", sp.close_seq);
  for (const auto& [key, value] : sp.attrs) a.add("carapace." + key, value, export_reference_key(key));

  json events = json::array();
  for (const auto& e : sp.events) {
    Attributes ea{input};
    ea.add("carapace.seq", e.seq);
    for (const auto& [key, value] : e.attrs) ea.add("carapace." + key, value, export_reference_key(key));
    events.push_back({{"timeUnixNano", nanos(e.ts_us)}, {"name", input.clean(e.name)}, {"attributes", ea.list}});
  }
  json links = json::array();
  for (const auto& l : sp.links) {
    Attributes la{input};
    la.add("carapace.reason", l.reason);
    la.add("carapace.session", l.session);
    la.add("carapace.seq", l.seq);
    links.push_back({{"traceId", l.trace_id}, {"spanId", l.span_id}, {"attributes", la.list}});
  }
  json status = {{"code", kOtlpStatusUnset}};
  if (sp.status == "ok" || sp.status == "completed") {
    status = {{"code", kOtlpStatusOk}};
  } else if (is_error(sp)) {
    status = {{"code", kOtlpStatusError}, {"message", input.clean(status_message(sp))}};
  }
  json out = {{"traceId", sp.trace_id},
              {"spanId", sp.span_id},
              {"name", input.clean(name)},
              {"kind", kind},
              {"startTimeUnixNano", nanos(sp.start_us)},
              {"endTimeUnixNano", nanos(export_end_us(sp, last_us))},
              {"attributes", a.list},
              {"events", events},
              {"links", links},
              {"status", status}};
  if (!sp.parent_id.empty()) out["parentSpanId"] = sp.parent_id;
  return out;
}

}  // namespace

json otlp_request(const ExportInput& input) {
  json spans = json::array();
  for (const auto& trace : input.traces) {
    if (trace.empty()) continue;
    const int64_t last_us = export_last_us(trace);
    const Span& root = export_root(input, trace);
    for (const auto& sp : trace) spans.push_back(span_json(sp, root, last_us, input));
  }
  json resource = {{"attributes", json::array({{{"key", "service.name"}, {"value", {{"stringValue", "carapace"}}}},
                                               {{"key", "service.version"},
                                                {"value", {{"stringValue", input.service_version}}}}})}};
  json scope = {{"name", "carapace"}, {"version", input.service_version}};
  return {{"resourceSpans", json::array({{{"resource", resource},
                                          {"scopeSpans", json::array({{{"scope", scope}, {"spans", spans}}})}}})}};
}

std::string export_otlp(const ExportInput& input) {
  return otlp_request(input).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace carapace
