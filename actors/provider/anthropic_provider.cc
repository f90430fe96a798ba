#include "actors/provider/anthropic_provider.h"

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

// A streamed event's usage (message_start, message_delta).
void read_usage(const event_json::Value& u, TokenUsage* usage) {
  namespace ej = event_json;
  if (!ej::is_object(u)) return;
  if (ej::has(u, "input_tokens")) usage->input = ej::num(u, "input_tokens");
  if (ej::has(u, "cache_read_input_tokens")) usage->cache_read = ej::num(u, "cache_read_input_tokens");
  if (ej::has(u, "cache_creation_input_tokens")) usage->cache_write = ej::num(u, "cache_creation_input_tokens");
  if (ej::has(u, "output_tokens")) usage->output = ej::num(u, "output_tokens");
}

void read_usage(const json& u, TokenUsage* usage) {
  if (!u.is_object()) return;
  if (u.contains("input_tokens")) usage->input = num(u, "input_tokens");
  if (u.contains("cache_read_input_tokens")) usage->cache_read = num(u, "cache_read_input_tokens");
  if (u.contains("cache_creation_input_tokens")) usage->cache_write = num(u, "cache_creation_input_tokens");
  if (u.contains("output_tokens")) usage->output = num(u, "output_tokens");
}

uint32_t status_of_error(const std::string& type) {
  if (type == "overloaded_error") return 529;
  if (type == "api_error") return 500;
  if (type == "rate_limit_error") return 429;
  return 400;
}

class AnthropicDecoder : public StreamDecoder {
 public:
  explicit AnthropicDecoder(std::string request_body) : request_body_(std::move(request_body)) {}

  bool on_event(const SseEvent& e, const DeltaSink& on_delta, ProviderFailure* failure) override {
    namespace ej = event_json;
    ej::Value j = parser_.parse(e.data);
    if (!ej::is_object(j)) {
      failure->transport = true;
      failure->error = "malformed stream event (not JSON): " + e.raw.substr(0, 2000);
      return false;
    }
    std::string_view type = ej::str(j, "type");
    if (type.empty()) type = e.type;
    if (type == "message_start") {
      ej::Value message = ej::field(j, "message");
      if (ej::has(message, "usage")) read_usage(ej::field(message, "usage"), &usage_);
    } else if (type == "content_block_start") {
      int32_t index = ej::integer(j, "index").value_or(0);
      ej::Value block = ej::field(j, "content_block");
      if (ej::str(block, "type") == "tool_use") {
        Tool& t = tools_[index];
        t.call.id = std::string(ej::str(block, "id"));
        t.call.name = std::string(ej::str(block, "name"));
        ej::Value input = ej::field(block, "input");
        simdjson::dom::object fields;
        if (input && input->get_object().get(fields) == simdjson::SUCCESS && fields.size() > 0) {
          t.initial_input = ej::dump_as_nlohmann(*input);
        }
        if (on_delta) {
          on_delta(StreamDelta{.tool_index = index, .tool_id = t.call.id, .tool_name = t.call.name});
        }
      } else {
        emit_text(ej::str(block, "text"), on_delta);
      }
    } else if (type == "content_block_delta") {
      int32_t index = ej::integer(j, "index").value_or(0);
      ej::Value d = ej::field(j, "delta");
      std::string_view dtype = ej::str(d, "type");
      if (dtype == "text_delta") {
        emit_text(ej::str(d, "text"), on_delta);
      } else if (dtype == "input_json_delta") {
        std::string_view part = ej::str(d, "partial_json");
        tools_[index].call.args.text += part;
        if (on_delta && !part.empty()) on_delta(StreamDelta{.tool_index = index, .args_fragment = std::string(part)});
      }
    } else if (type == "message_delta") {
      std::string_view reason = ej::str(ej::field(j, "delta"), "stop_reason");
      if (!reason.empty()) stop_reason_ = std::string(reason);
      if (ej::has(j, "usage")) read_usage(ej::field(j, "usage"), &usage_);
    } else if (type == "message_stop") {
      done_ = true;
    } else if (type == "error") {
      ej::Value err = ej::field(j, "error");
      std::string etype(ej::str(err, "type"));
      failure->http_status = status_of_error(etype);
      failure->error = "error in the response stream: " + etype + ": " + std::string(ej::str(err, "message"));
      return false;
    }
    // ping, content_block_stop and unknown events carry nothing to keep.
    return true;
  }

  bool complete() const override { return done_; }
  size_t tool_call_count() const override { return tools_.size(); }
  std::string terminator() const override { return "event: message_stop"; }

  ProviderResponse finish() override {
    ProviderResponse r;
    r.text = std::move(text_);
    size_t n = 0;
    for (auto& [index, t] : tools_) {
      if (t.call.args.text.empty()) t.call.args.text = t.initial_input.empty() ? "{}" : t.initial_input;
      if (t.call.id.empty()) t.call.id = generated_call_id(request_body_, n);
      r.tool_calls.push_back(std::move(t.call));
      ++n;
    }
    r.finish_reason = stop_reason_;
    r.usage = usage_;
    return r;
  }

  bool parse_whole(std::string_view body, ProviderResponse* out, std::string* error) override {
    json j = parse_stored_json(body);
    if (j.is_discarded() || !j.is_object() || !j.contains("content") || !j["content"].is_array()) {
      *error = "expected a message object: " + std::string(body.substr(0, 500));
      return false;
    }
    size_t n = 0;
    for (const json& block : j["content"]) {
      std::string type = str(block, "type");
      if (type == "text") {
        out->text += str(block, "text");
      } else if (type == "tool_use") {
        ToolCall c{.id = str(block, "id"), .name = str(block, "name")};
        if (c.id.empty()) c.id = generated_call_id(request_body_, n);
        c.args.text = block.contains("input") ? block["input"].dump() : "{}";
        out->tool_calls.push_back(std::move(c));
        ++n;
      }
    }
    out->finish_reason = str(j, "stop_reason");
    if (j.contains("usage")) read_usage(j["usage"], &out->usage);
    return true;
  }

 private:
  struct Tool {
    ToolCall call;
    std::string initial_input;
  };

  void emit_text(std::string_view text, const DeltaSink& on_delta) {
    if (text.empty()) return;
    text_ += text;
    if (on_delta) on_delta(StreamDelta{.text = std::string(text)});
  }

  std::string request_body_;
  event_json::Parser parser_;
  std::string text_;
  std::map<int32_t, Tool> tools_;
  std::string stop_reason_;
  TokenUsage usage_;
  bool done_ = false;
};

}  // namespace

std::string AnthropicProvider::url() const { return options().base_url + "/v1/messages"; }

std::vector<std::string> AnthropicProvider::auth_headers() const {
  std::vector<std::string> h = {"anthropic-version: 2023-06-01"};
  if (!options().api_key.empty()) h.push_back("x-api-key: " + options().api_key);
  return h;
}

std::string AnthropicProvider::render_request(const ProviderRequest& request) const {
  json messages = json::array();
  // Appends a block to a user message, merging with the previous user message.
  auto user_block = [&messages](json block) {
    if (!messages.empty() && messages.back()["role"] == "user") {
      messages.back()["content"].push_back(std::move(block));
    } else {
      messages.push_back({{"role", "user"}, {"content", json::array({std::move(block)})}});
    }
  };
  for (const Message& m : request.messages) {
    switch (m.role) {
      case Role::kUser:
        user_block({{"type", "text"}, {"text", m.text}});
        break;
      case Role::kAssistant: {
        json content = json::array();
        if (!m.text.empty()) content.push_back({{"type", "text"}, {"text", m.text}});
        for (const ToolCall& c : m.tool_calls) {
          json input = parse_stored_json(c.args.text.empty() ? "{}" : c.args.text);
          if (input.is_discarded() || !input.is_object()) input = json::object();
          content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", std::move(input)}});
        }
        if (content.empty()) content.push_back({{"type", "text"}, {"text", "(no answer)"}});
        messages.push_back({{"role", "assistant"}, {"content", std::move(content)}});
        break;
      }
      case Role::kTool: {
        json block = {{"type", "tool_result"}, {"tool_use_id", m.tool_call_id}, {"content", m.text}};
        if (m.is_error) block["is_error"] = true;
        user_block(std::move(block));
        break;
      }
    }
  }
  // Cache breakpoints (provider.cache): on the last block of each of the
  // last N messages, the system prompt (as a text block) and the last tool.
  const PromptCache& cache = options().cache;
  json marker = {{"type", "ephemeral"}};
  if (!cache.ttl.empty()) marker["ttl"] = cache.ttl;
  for (size_t k = 0; k < cache.last_messages && k < messages.size(); ++k) {
    json& content = messages[messages.size() - 1 - k]["content"];
    if (content.is_array() && !content.empty()) content.back()["cache_control"] = marker;
  }
  json body = {{"model", request.model},
               {"max_tokens", options().max_tokens > 0 ? options().max_tokens : kDefaultMaxTokens}};
  if (!request.system_prompt.empty()) {
    if (cache.system) {
      body["system"] = json::array({{{"type", "text"}, {"text", request.system_prompt}, {"cache_control", marker}}});
    } else {
      body["system"] = request.system_prompt;
    }
  }
  body["messages"] = std::move(messages);
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSpec& t : request.tools) {
      json schema = parse_stored_json(t.schema.text.empty() ? "{}" : t.schema.text);
      if (schema.is_discarded() || !schema.is_object()) schema = json{{"type", "object"}};
      tools.push_back({{"name", t.name}, {"description", t.description}, {"input_schema", std::move(schema)}});
    }
    if (cache.tools) tools.back()["cache_control"] = marker;
    body["tools"] = std::move(tools);
  }
  if (options().has_temperature) body["temperature"] = options().temperature;
  body["stream"] = options().stream;
  // A tool's output, or a task from the command line, may hold bytes that
  // are not UTF-8: sent replaced (U+FFFD), since throwing here fails the
  // session for good (its log holds them; every resume renders them again).
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::unique_ptr<StreamDecoder> AnthropicProvider::decoder(const std::string& request_body) const {
  return std::make_unique<AnthropicDecoder>(request_body);
}


}  // namespace carapace
