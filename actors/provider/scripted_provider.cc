#include "actors/provider/scripted_provider.h"

#include <nlohmann/json.hpp>

#include <set>

#include "actors/session/context_trim.h"
#include "base/bounded_file.h"
#include "base/bounded_json.h"

namespace carapace {
namespace {

using nlohmann::json;

Status bad(const std::string& where, const std::string& what) {
  return Status::invalid_argument(where + ": " + what);
}

Status check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  for (const auto& [key, value] : obj.items()) {
    if (!allowed.count(key)) return bad(where, "unknown key \"" + key + "\"");
  }
  return Status();
}

Status get_uint(const json& obj, const char* key, const std::string& where, uint64_t* out) {
  if (!obj.contains(key)) return Status();
  const json& v = obj[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return bad(where + "." + key, "must be a whole number >= 0");
  }
  *out = v.get<uint64_t>();
  return Status();
}

Status parse_failure(const json& e, const std::string& where, ScenarioEntry* entry) {
  if (!e.is_object()) return bad(where, "must be an object");
  CARAPACE_RETURN_IF_ERROR(check_keys(e, where, {"status", "retry_after_ms", "message", "kind"}));
  entry->is_failure = true;
  ProviderFailure& f = entry->failure;
  if (e.contains("kind")) {
    if (!e["kind"].is_string()) return bad(where + ".kind", "must be a string");
    std::string kind = e["kind"];
    if (kind != "connection_reset" && kind != "timeout" && kind != "malformed_stream") {
      return bad(where + ".kind",
                 "must be connection_reset, timeout or malformed_stream, not \"" + kind + "\"");
    }
    f.transport = true;
    f.error = kind == "connection_reset" ? "connection reset by peer"
              : kind == "timeout"        ? "timed out waiting for the response"
                                         : "malformed response stream";
  }
  uint64_t status = 0;
  CARAPACE_RETURN_IF_ERROR(get_uint(e, "status", where, &status));
  if (e.contains("status") && (status < 400 || status > 599))
    return bad(where + ".status", "must be an HTTP error status, 400 to 599, not " + std::to_string(status));
  if (!f.transport && status == 0) return bad(where, "needs a \"status\" or a \"kind\"");
  f.http_status = static_cast<uint32_t>(status);
  if (e.contains("retry_after_ms")) {
    CARAPACE_RETURN_IF_ERROR(get_uint(e, "retry_after_ms", where, &f.retry_after_ms));
    f.has_retry_after = true;
  }
  if (e.contains("message")) {
    if (!e["message"].is_string()) return bad(where + ".message", "must be a string");
    f.error = e["message"];
  }
  if (f.error.empty()) f.error = "HTTP " + std::to_string(status);
  return Status();
}

Status parse_entry(const json& r, const std::string& where, ScenarioEntry* entry) {
  if (!r.is_object()) return bad(where, "must be an object");
  CARAPACE_RETURN_IF_ERROR(
      check_keys(r, where, {"text", "tool_calls", "usage", "latency_ms", "finish_reason", "error"}));
  CARAPACE_RETURN_IF_ERROR(get_uint(r, "latency_ms", where, &entry->latency_ms));
  if (r.contains("error")) {
    if (r.contains("text") || r.contains("tool_calls"))
      return bad(where, "an error entry has no text or tool_calls");
    return parse_failure(r["error"], where + ".error", entry);
  }
  ProviderResponse& resp = entry->response;
  if (r.contains("text")) {
    if (!r["text"].is_string()) return bad(where + ".text", "must be a string");
    resp.text = r["text"];
  }
  if (r.contains("tool_calls")) {
    if (!r["tool_calls"].is_array()) return bad(where + ".tool_calls", "must be an array");
    for (size_t i = 0; i < r["tool_calls"].size(); ++i) {
      const json& c = r["tool_calls"][i];
      std::string cw = where + ".tool_calls[" + std::to_string(i) + "]";
      if (!c.is_object()) return bad(cw, "must be an object");
      CARAPACE_RETURN_IF_ERROR(check_keys(c, cw, {"id", "name", "args"}));
      if (!c.contains("name") || !c["name"].is_string() || c["name"].get<std::string>().empty()) {
        return bad(cw + ".name", "must be a non-empty string");
      }
      ToolCall call;
      call.name = c["name"];
      if (c.contains("id")) {
        if (!c["id"].is_string()) return bad(cw + ".id", "must be a string");
        call.id = c["id"];
      }
      json args = c.contains("args") ? c["args"] : json::object();
      if (!args.is_object()) return bad(cw + ".args", "must be an object");
      call.args.text = args.dump();
      resp.tool_calls.push_back(std::move(call));
    }
  }
  if (!r.contains("text") && !r.contains("tool_calls"))
    return bad(where, "needs \"text\", \"tool_calls\" or \"error\"");
  if (r.contains("finish_reason")) {
    if (!r["finish_reason"].is_string()) return bad(where + ".finish_reason", "must be a string");
    resp.finish_reason = r["finish_reason"];
  } else {
    resp.finish_reason = resp.tool_calls.empty() ? "stop" : "tool_calls";
  }
  if (r.contains("usage")) {
    const json& u = r["usage"];
    std::string uw = where + ".usage";
    if (!u.is_object()) return bad(uw, "must be an object");
    CARAPACE_RETURN_IF_ERROR(check_keys(u, uw, {"input", "output", "cache_read", "cache_write"}));
    CARAPACE_RETURN_IF_ERROR(get_uint(u, "input", uw, &resp.usage.input));
    CARAPACE_RETURN_IF_ERROR(get_uint(u, "output", uw, &resp.usage.output));
    CARAPACE_RETURN_IF_ERROR(get_uint(u, "cache_read", uw, &resp.usage.cache_read));
    CARAPACE_RETURN_IF_ERROR(get_uint(u, "cache_write", uw, &resp.usage.cache_write));
    entry->has_usage = true;
  }
  return Status();
}

}  // namespace

Status parse_scenario(std::string_view json_text, const std::string& source, Scenario* out) {
  json doc;
  CARAPACE_RETURN_IF_ERROR(parse_bounded_json(json_text, source, &doc));
  if (!doc.is_object()) return bad(source, "must be a JSON object with a \"replies\" array");
  CARAPACE_RETURN_IF_ERROR(check_keys(doc, source, {"model", "replies", "description", "user_messages"}));
  if (!doc.contains("replies") || !doc["replies"].is_array()) return bad(source, "needs a \"replies\" array");
  Scenario s;
  s.source = source;
  s.text = std::string(json_text);
  if (doc.contains("model")) {
    if (!doc["model"].is_string()) return bad(source + ": model", "must be a string");
    s.model = doc["model"];
  }
  if (doc.contains("user_messages")) {
    const json& m = doc["user_messages"];
    if (!m.is_array()) return bad(source + ": user_messages", "must be an array of strings");
    for (size_t i = 0; i < m.size(); ++i) {
      if (!m[i].is_string() || m[i].get<std::string>().empty())
        return bad(source + ": user_messages[" + std::to_string(i) + "]", "must be a non-empty string");
      s.user_messages.push_back(m[i]);
    }
  }
  const json& replies = doc["replies"];
  if (replies.empty()) return bad(source, "\"replies\" is empty");
  for (size_t i = 0; i < replies.size(); ++i) {
    ScenarioEntry entry;
    CARAPACE_RETURN_IF_ERROR(
        parse_entry(replies[i], source + ": replies[" + std::to_string(i) + "]", &entry));
    s.entries.push_back(std::move(entry));
  }
  *out = std::move(s);
  return Status();
}

Status load_scenario(const std::string& path, Scenario* out) {
  std::string text;
  Status read = read_bounded_file(path, limits::kScenarioFileBytes, "the scenario file", &text);
  if (!read.ok()) return read;
  return parse_scenario(text, path, out);
}

ScriptedProvider::ScriptedProvider(Scenario scenario) : scenario_(std::move(scenario)) {}

ProviderReply ScriptedProvider::call(const ProviderRequest& request, const DeltaSink& on_delta) {
  ProviderReply reply;
  if (request.attempt_index >= scenario_.entries.size()) {
    reply.failure.error = "scenario " + scenario_.source + " has " +
                          std::to_string(scenario_.entries.size()) + " replies; turn " +
                          std::to_string(request.turn) + " attempt " + std::to_string(request.attempt) +
                          " asked for reply " + std::to_string(request.attempt_index + 1);
    return reply;  // permanent: no status, not a transport error
  }
  const ScenarioEntry& entry = scenario_.entries[request.attempt_index];
  reply.latency_ms = entry.latency_ms;
  if (entry.is_failure) {
    reply.failure = entry.failure;
    return reply;
  }
  reply.ok = true;
  reply.response = entry.response;
  for (size_t i = 0; i < reply.response.tool_calls.size(); ++i) {
    ToolCall& call = reply.response.tool_calls[i];
    if (call.id.empty())
      call.id = "call_" + std::to_string(request.attempt_index + 1) + "_" + std::to_string(i + 1);
  }
  if (!entry.has_usage) {
    // About four characters a token, as real tokenizers average on English.
    // The conversation's size as the session sends it; a request made
    // elsewhere may carry the messages instead.
    uint64_t in_chars = request.system_prompt.size() +
                        (request.messages.empty() ? request.message_chars : context_chars(request.messages));
    uint64_t out_chars = reply.response.text.size();
    for (const auto& c : reply.response.tool_calls) out_chars += c.name.size() + c.args.text.size();
    reply.response.usage = TokenUsage{.input = in_chars / 4 + 1, .output = out_chars / 4 + 1};
  }
  if (on_delta) {
    const std::string& text = reply.response.text;
    for (size_t pos = 0; pos < text.size(); pos += 24) {
      on_delta(StreamDelta{.session_id = request.session_id,
                           .turn = request.turn,
                           .attempt = request.attempt,
                           .text = text.substr(pos, 24)});
    }
    for (size_t i = 0; i < reply.response.tool_calls.size(); ++i) {
      const ToolCall& c = reply.response.tool_calls[i];
      on_delta(StreamDelta{.session_id = request.session_id,
                           .turn = request.turn,
                           .attempt = request.attempt,
                           .tool_index = static_cast<int32_t>(i),
                           .tool_id = c.id,
                           .tool_name = c.name,
                           .args_fragment = c.args.text});
    }
  }
  return reply;
}

}  // namespace carapace
