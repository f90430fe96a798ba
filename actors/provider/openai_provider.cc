#include "actors/provider/openai_provider.h"

#include <nlohmann/json.hpp>

#include <map>

#include "actors/provider/event_json.h"
#include "actors/provider/json_fields.h"
#include "base/bounded_json.h"

namespace carapace {
namespace {

using json = nlohmann::json;

using json_fields::num;
using json_fields::str;

TokenUsage read_usage(const json& u) {
  TokenUsage usage;
  uint64_t prompt = num(u, "prompt_tokens");
  uint64_t cached = u.contains("prompt_tokens_details") ? num(u["prompt_tokens_details"], "cached_tokens") : 0;
  usage.cache_read = cached;
  usage.input = prompt >= cached ? prompt - cached : 0;
  usage.output = num(u, "completion_tokens");  // reasoning tokens are part of it
  return usage;
}

// The same, from a streamed event's usage.
TokenUsage read_usage(const event_json::Value& u) {
  TokenUsage usage;
  uint64_t prompt = event_json::num(u, "prompt_tokens");
  uint64_t cached = event_json::num(event_json::field(u, "prompt_tokens_details"), "cached_tokens");
  usage.cache_read = cached;
  usage.input = prompt >= cached ? prompt - cached : 0;
  usage.output = event_json::num(u, "completion_tokens");
  return usage;
}

std::string settle_finish_reason(std::string reason, bool has_tool_calls) {
  if (has_tool_calls && (reason.empty() || reason == "stop")) return "tool_calls";
  if (reason.empty()) return "stop";
  return reason;
}

class OpenAiDecoder : public StreamDecoder {
 public:
  explicit OpenAiDecoder(std::string request_body) : request_body_(std::move(request_body)) {}

  bool on_event(const SseEvent& e, const DeltaSink& on_delta, ProviderFailure* failure) override {
    namespace ej = event_json;
    if (e.data == "[DONE]") {
      done_ = true;
      return true;
    }
    ej::Value j = parser_.parse(e.data);
    if (!ej::is_object(j)) {
      failure->transport = true;
      failure->error = "malformed stream event (not JSON): " + e.raw.substr(0, 2000);
      return false;
    }
    if (ej::has(j, "error")) {
      failure->transport = true;  // a server error in the middle of the stream
      failure->error = "error in the response stream: " + e.data.substr(0, 2000);
      return false;
    }
    if (ej::Value usage = ej::field(j, "usage"); ej::is_object(usage)) usage_ = read_usage(usage);
    simdjson::dom::array choices;
    if (!ej::array(ej::field(j, "choices"), &choices)) return true;
    for (ej::Element choice : choices) {
      if (!choice.is_object()) continue;
      std::string_view reason;
      if (ej::Value r = ej::field(choice, "finish_reason"); r && r->get_string().get(reason) == simdjson::SUCCESS) {
        finish_reason_ = std::string(reason);  // "" too: settle_finish_reason decides then
      }
      ej::Value d = ej::field(choice, "delta");
      if (!ej::is_object(d)) continue;
      std::string_view content = ej::str(d, "content");
      if (!content.empty()) {
        text_ += content;
        if (on_delta) on_delta(StreamDelta{.text = std::string(content)});
      }
      simdjson::dom::array calls;
      if (!ej::array(ej::field(d, "tool_calls"), &calls)) continue;
      for (ej::Element tc : calls) {
        int32_t index = ej::integer(tc, "index").value_or(static_cast<int32_t>(calls_.size()));
        ToolCall& call = calls_[index];
        std::string_view id = ej::str(tc, "id");
        if (!id.empty() && call.id.empty()) call.id = std::string(id);
        ej::Value function = ej::field(tc, "function");
        std::string_view name = ej::str(function, "name");
        std::string_view args = ej::str(function, "arguments");
        if (!name.empty() && call.name.empty()) call.name = std::string(name);
        call.args.text += args;
        if (on_delta) {
          on_delta(StreamDelta{.tool_index = index,
                               .tool_id = std::string(id),
                               .tool_name = std::string(name),
                               .args_fragment = std::string(args)});
        }
      }
    }
    return true;
  }

  bool complete() const override { return done_; }
  size_t tool_call_count() const override { return calls_.size(); }
  std::string terminator() const override { return "data: [DONE]"; }

  ProviderResponse finish() override {
    ProviderResponse r;
    r.text = std::move(text_);
    size_t n = 0;
    for (auto& [index, call] : calls_) {
      if (call.id.empty()) call.id = generated_call_id(request_body_, n);
      r.tool_calls.push_back(std::move(call));
      ++n;
    }
    r.finish_reason = settle_finish_reason(finish_reason_, !r.tool_calls.empty());
    r.usage = usage_;
    return r;
  }

  bool parse_whole(std::string_view body, ProviderResponse* out, std::string* error) override {
    json j = parse_stored_json(body);
    if (j.is_discarded() || !j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
        j["choices"].empty()) {
      *error = "expected a chat completion object: " + std::string(body.substr(0, 500));
      return false;
    }
    const json& choice = j["choices"][0];
    const json& m = choice.contains("message") ? choice["message"] : json::object();
    out->text = str(m, "content");
    if (m.is_object() && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      size_t n = 0;
      for (const json& tc : m["tool_calls"]) {
        ToolCall c;
        c.id = str(tc, "id");
        if (c.id.empty()) c.id = generated_call_id(request_body_, n);
        if (tc.contains("function")) {
          c.name = str(tc["function"], "name");
          c.args.text = str(tc["function"], "arguments");
        }
        out->tool_calls.push_back(std::move(c));
        ++n;
      }
    }
    out->finish_reason = settle_finish_reason(str(choice, "finish_reason"), !out->tool_calls.empty());
    if (j.contains("usage") && j["usage"].is_object()) out->usage = read_usage(j["usage"]);
    return true;
  }

 private:
  std::string request_body_;
  event_json::Parser parser_;
  std::string text_;
  std::map<int32_t, ToolCall> calls_;  // by index
  std::string finish_reason_;
  TokenUsage usage_;
  bool done_ = false;
};

}  // namespace

std::string OpenAiProvider::url() const { return options().base_url + "/chat/completions"; }

std::vector<std::string> OpenAiProvider::auth_headers() const {
  if (options().api_key.empty()) return {};
  return {"Authorization: Bearer " + options().api_key};
}

std::string OpenAiProvider::render_request(const ProviderRequest& request) const {
  json messages = json::array();
  if (!request.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", request.system_prompt}});
  for (const Message& m : request.messages) {
    switch (m.role) {
      case Role::kUser:
        messages.push_back({{"role", "user"}, {"content", m.text}});
        break;
      case Role::kAssistant: {
        json a = {{"role", "assistant"}};
        a["content"] = m.text.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.text);
        if (!m.tool_calls.empty()) {
          json calls = json::array();
          for (const ToolCall& c : m.tool_calls) {
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.args.text.empty() ? "{}" : c.args.text}}}});
          }
          a["tool_calls"] = std::move(calls);
        }
        messages.push_back(std::move(a));
        break;
      }
      case Role::kTool:
        messages.push_back({{"role", "tool"}, {"tool_call_id", m.tool_call_id}, {"content", m.text}});
        break;
    }
  }
  json body = {{"model", request.model}, {"messages", std::move(messages)}};
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSpec& t : request.tools) {
      json params = parse_stored_json(t.schema.text.empty() ? "{}" : t.schema.text);
      if (params.is_discarded()) params = json::object();
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t.name}, {"description", t.description}, {"parameters", params}}}});
    }
    body["tools"] = std::move(tools);
  }
  if (!options().cache.prompt_cache_key.empty()) body["prompt_cache_key"] = options().cache.prompt_cache_key;
  if (options().max_tokens > 0) body["max_tokens"] = options().max_tokens;
  if (options().has_temperature) body["temperature"] = options().temperature;
  body["stream"] = options().stream;
  if (options().stream) body["stream_options"] = {{"include_usage", true}};
  // A tool's output, or a task from the command line, may hold bytes that
  // are not UTF-8: sent replaced (U+FFFD), since throwing here fails the
  // session for good (its log holds them; every resume renders them again).
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::unique_ptr<StreamDecoder> OpenAiProvider::decoder(const std::string& request_body) const {
  return std::make_unique<OpenAiDecoder>(request_body);
}


}  // namespace carapace
