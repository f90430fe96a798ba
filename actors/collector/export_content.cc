#include "actors/collector/export_content.h"

#include "base/bounded_json.h"

namespace carapace {
namespace {

using nlohmann::json;

json text_part(std::string text) { return {{"type", "text"}, {"content", std::move(text)}}; }

// A JSON string's value parsed when it is JSON, else the string itself.
json arguments_of(const json& value) {
  if (!value.is_string()) return value;
  json parsed = parse_stored_json(value.get<std::string>());
  return parsed.is_discarded() ? value : parsed;
}

// Text of a content field: a string, or the text of its text blocks.
std::string plain_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const auto& block : content) {
      if (block.is_object() && block.value("type", "") == "text" && block.contains("text") && block["text"].is_string()) {
        if (!out.empty()) out += "\n";
        out += block["text"].get<std::string>();
      }
    }
  }
  return out;
}

// OpenAI Chat Completions: {"role", "content", "tool_calls", "tool_call_id"}.
json openai_message(const json& m) {
  std::string role = m.value("role", "user");
  json parts = json::array();
  if (role == "tool") {
    parts.push_back({{"type", "tool_call_response"},
                     {"id", m.value("tool_call_id", "")},
                     {"response", plain_text(m.value("content", json()))}});
  } else {
    std::string text = plain_text(m.value("content", json()));
    if (!text.empty()) parts.push_back(text_part(text));
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (const auto& c : m["tool_calls"]) {
        if (!c.is_object()) continue;
        json fn = c.value("function", json::object());
        parts.push_back({{"type", "tool_call"},
                         {"id", c.value("id", "")},
                         {"name", fn.is_object() ? fn.value("name", "") : ""},
                         {"arguments", fn.is_object() ? arguments_of(fn.value("arguments", json())) : json()}});
      }
    }
  }
  return {{"role", role}, {"parts", parts}};
}

// Anthropic Messages: content a string or blocks (text, tool_use, tool_result).
json anthropic_message(const json& m) {
  std::string role = m.value("role", "user");
  json parts = json::array();
  const json content = m.value("content", json());
  if (content.is_string()) {
    parts.push_back(text_part(content.get<std::string>()));
  } else if (content.is_array()) {
    bool only_results = !content.empty();
    for (const auto& b : content) {
      if (!b.is_object()) continue;
      std::string type = b.value("type", "");
      if (type == "text") {
        parts.push_back(text_part(b.value("text", "")));
      } else if (type == "tool_use") {
        parts.push_back({{"type", "tool_call"}, {"id", b.value("id", "")}, {"name", b.value("name", "")},
                         {"arguments", b.value("input", json::object())}});
      } else if (type == "tool_result") {
        parts.push_back({{"type", "tool_call_response"}, {"id", b.value("tool_use_id", "")},
                         {"response", plain_text(b.value("content", json()))}});
      }
      if (type != "tool_result") only_results = false;
    }
    if (only_results) role = "tool";
  }
  return {{"role", role}, {"parts", parts}};
}

}  // namespace

json input_messages_from_request(std::string_view body) {
  json out = json::array();
  json j = parse_stored_json(body);
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array()) return out;
  // Anthropic's system prompt is a field of its own; OpenAI's is a message.
  const bool anthropic = j.contains("system") || j.contains("anthropic_version");
  if (j.contains("system")) out.push_back({{"role", "system"}, {"parts", {text_part(plain_text(j["system"]))}}});
  for (const auto& m : j["messages"]) {
    if (!m.is_object()) continue;
    bool blocks = m.contains("content") && m["content"].is_array() && !m["content"].empty() &&
                  m["content"][0].is_object() && m["content"][0].value("type", "") != "text";
    out.push_back(anthropic || blocks ? anthropic_message(m) : openai_message(m));
  }
  return out;
}

json output_messages_from_answer(const LlmResponded& answer) {
  json parts = json::array();
  if (!answer.text.empty()) parts.push_back(text_part(answer.text));
  for (const auto& c : answer.tool_calls) {
    json args = parse_stored_json(c.args.text);
    parts.push_back({{"type", "tool_call"}, {"id", c.id}, {"name", c.name},
                     {"arguments", args.is_discarded() ? json(c.args.text) : args}});
  }
  return json::array({{{"role", "assistant"}, {"parts", parts}, {"finish_reason", answer.finish_reason}}});
}

ResponseIdentity response_identity(std::string_view body) {
  ResponseIdentity out;
  auto take = [&out](const json& j) {
    if (!j.is_object()) return;
    const json& m = j.contains("message") && j["message"].is_object() ? j["message"] : j;  // Anthropic message_start
    if (out.id.empty() && m.contains("id") && m["id"].is_string()) out.id = m["id"].get<std::string>();
    if (out.model.empty() && m.contains("model") && m["model"].is_string()) out.model = m["model"].get<std::string>();
  };
  json whole = parse_stored_json(body);
  if (!whole.is_discarded()) {
    take(whole);
    return out;
  }
  size_t at = 0;
  while (at < body.size() && (out.id.empty() || out.model.empty())) {
    size_t end = body.find('\n', at);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("data:")) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      take(parse_stored_json(line));
    }
    at = end + 1;
  }
  return out;
}

void collect_content(const std::vector<Span>& spans, const std::vector<Event>& events,
                     const std::map<std::string, std::string>& bodies, std::map<std::string, json>* out) {
  std::map<uint64_t, const Event*> by_seq;
  for (const auto& e : events) by_seq[e.seq] = &e;
  for (const auto& sp : spans) {
    if (sp.kind == kSpanLlm) {
      json c = json::object();
      auto body = bodies.find(sp.attrs.value("request_body", std::string()));
      if (body != bodies.end()) {
        json input = input_messages_from_request(body->second);
        if (!input.empty()) c["input"] = std::move(input);
      }
      auto e = by_seq.find(sp.close_seq);
      if (e != by_seq.end()) {
        if (const auto* answer = get_if<LlmResponded>(*e->second)) c["output"] = output_messages_from_answer(*answer);
      }
      if (!c.empty()) (*out)[sp.span_id] = std::move(c);
    } else if (sp.kind == kSpanTool) {
      json c = json::object();
      auto req = by_seq.find(sp.attrs.value("requested_seq", uint64_t{0}));
      if (req != by_seq.end()) {
        if (const auto* r = get_if<ToolRequested>(*req->second)) c["arguments"] = r->args.text;
      }
      auto done = by_seq.find(sp.close_seq);
      if (done != by_seq.end()) {
        if (const auto* d = get_if<ToolCompleted>(*done->second)) c["result"] = d->output;
      }
      if (!c.empty()) (*out)[sp.span_id] = std::move(c);
    }
  }
}

}  // namespace carapace
