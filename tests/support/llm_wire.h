// What the real model APIs send, byte for byte, for tests and benchmarks: an
// answer (text pieces, tool calls with their arguments in pieces, usage)
// rendered as OpenAI's chat-completion chunk stream or whole object, or as
// Anthropic's message event stream or whole message, and their error bodies.
// The framing follows the APIs' own ("data: {...}\n\n", "event: x\ndata:
// {...}\n\n"); options add what proxies and servers also do: CRLF line ends,
// keep-alive comments, a missing terminator.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace carapace::testing {

struct WireToolCall {
  std::string id;    // "": the server sends none (llama.cpp, some vLLM versions)
  std::string name;
  std::vector<std::string> arg_pieces;  // concatenated: the arguments JSON
};

struct WireAnswer {
  std::vector<std::string> text_pieces;
  std::vector<WireToolCall> calls;
  // Usage as the caller counts it: input excludes cached tokens.
  uint64_t input = 0, output = 0, cache_read = 0, cache_write = 0, reasoning = 0;
  bool usage = true;         // OpenAI: send the usage chunk
  std::string finish;        // "": the format's natural one
  bool send_finish = true;   // OpenAI: send a finish_reason at all
  bool terminator = true;    // [DONE] / message_stop
  bool crlf = false;         // CRLF line ends
  bool keepalive = false;    // ": keep-alive" comments between events
  std::string model = "test-model";
};

namespace wire_detail {

inline std::string frame(const WireAnswer& a, const std::vector<std::string>& events) {
  std::string out;
  const std::string nl = a.crlf ? "\r\n" : "\n";
  for (size_t i = 0; i < events.size(); ++i) {
    std::string e = events[i];
    if (a.crlf) {
      std::string converted;
      for (char c : e) converted += c == '\n' ? std::string("\r\n") : std::string(1, c);
      e = converted;
    }
    out += e + nl + nl;
    if (a.keepalive && i % 2 == 0) out += ": keep-alive" + nl + nl;
  }
  return out;
}

inline std::string joined(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

}  // namespace wire_detail

// OpenAI chat completions, streamed (stream_options.include_usage).
inline std::string openai_stream(const WireAnswer& a) {
  using nlohmann::json;
  auto chunk = [&a](json choices, json usage) {
    return json{{"id", "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"},
                {"object", "chat.completion.chunk"},
                {"created", 1741569952},
                {"model", a.model},
                {"service_tier", "default"},
                {"system_fingerprint", "fp_06737a9306"},
                {"choices", std::move(choices)},
                {"usage", std::move(usage)}};
  };
  auto choice = [](json delta, json finish) {
    return json::array({json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                             {"finish_reason", std::move(finish)}}});
  };
  std::vector<std::string> events;
  json first = {{"role", "assistant"}, {"content", a.calls.empty() || !a.text_pieces.empty() ? json("") : json(nullptr)},
                {"refusal", nullptr}};
  events.push_back("data: " + chunk(choice(first, nullptr), nullptr).dump());
  for (const auto& t : a.text_pieces) events.push_back("data: " + chunk(choice({{"content", t}}, nullptr), nullptr).dump());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    const WireToolCall& c = a.calls[i];
    json head = {{"index", i}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}};
    if (!c.id.empty()) head["id"] = c.id;
    events.push_back("data: " + chunk(choice({{"tool_calls", json::array({head})}}, nullptr), nullptr).dump());
    for (const auto& p : c.arg_pieces) {
      json frag = {{"index", i}, {"function", {{"arguments", p}}}};
      events.push_back("data: " + chunk(choice({{"tool_calls", json::array({frag})}}, nullptr), nullptr).dump());
    }
  }
  std::string finish = !a.finish.empty() ? a.finish : a.calls.empty() ? "stop" : "tool_calls";
  if (a.send_finish) events.push_back("data: " + chunk(choice(json::object(), finish), nullptr).dump());
  if (a.usage) {
    json usage = {{"prompt_tokens", a.input + a.cache_read},
                  {"completion_tokens", a.output},
                  {"total_tokens", a.input + a.cache_read + a.output},
                  {"prompt_tokens_details", {{"cached_tokens", a.cache_read}, {"audio_tokens", 0}}},
                  {"completion_tokens_details",
                   {{"reasoning_tokens", a.reasoning}, {"audio_tokens", 0},
                    {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}}};
    events.push_back("data: " + chunk(json::array(), usage).dump());
  }
  if (a.terminator) events.push_back("data: [DONE]");
  return wire_detail::frame(a, events);
}

// OpenAI chat completions, whole (stream: false).
inline std::string openai_whole(const WireAnswer& a) {
  using nlohmann::json;
  json message = {{"role", "assistant"},
                  {"content", a.text_pieces.empty() ? json(nullptr) : json(wire_detail::joined(a.text_pieces))},
                  {"refusal", nullptr}};
  if (!a.calls.empty()) {
    json calls = json::array();
    for (const auto& c : a.calls) {
      json call = {{"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", wire_detail::joined(c.arg_pieces)}}}};
      if (!c.id.empty()) call["id"] = c.id;
      calls.push_back(call);
    }
    message["tool_calls"] = calls;
  }
  std::string finish = !a.finish.empty() ? a.finish : a.calls.empty() ? "stop" : "tool_calls";
  json body = {{"id", "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"},
               {"object", "chat.completion"},
               {"created", 1741570283},
               {"model", a.model},
               {"choices", json::array({{{"index", 0}, {"message", message}, {"logprobs", nullptr},
                                         {"finish_reason", finish}}})},
               {"usage",
                {{"prompt_tokens", a.input + a.cache_read},
                 {"completion_tokens", a.output},
                 {"total_tokens", a.input + a.cache_read + a.output},
                 {"prompt_tokens_details", {{"cached_tokens", a.cache_read}, {"audio_tokens", 0}}}}},
               {"service_tier", "default"},
               {"system_fingerprint", "fp_06737a9306"}};
  return body.dump();
}

// Anthropic messages, streamed.
inline std::string anthropic_stream(const WireAnswer& a) {
  using nlohmann::json;
  std::vector<std::string> events;
  auto ev = [&events](const std::string& type, const json& data) {
    events.push_back("event: " + type + "\ndata: " + data.dump());
  };
  ev("message_start",
     {{"type", "message_start"},
      {"message",
       {{"id", "msg_01XFDUDYJgAACzvnptvVoYEL"}, {"type", "message"}, {"role", "assistant"},
        {"content", json::array()}, {"model", a.model}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
        {"usage",
         {{"input_tokens", a.input}, {"cache_creation_input_tokens", a.cache_write},
          {"cache_read_input_tokens", a.cache_read}, {"output_tokens", 1}}}}}});
  int index = 0;
  if (!a.text_pieces.empty()) {
    ev("content_block_start",
       {{"type", "content_block_start"}, {"index", index}, {"content_block", {{"type", "text"}, {"text", ""}}}});
    ev("ping", {{"type", "ping"}});
    for (const auto& t : a.text_pieces)
      ev("content_block_delta",
         {{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "text_delta"}, {"text", t}}}});
    ev("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    ++index;
  }
  for (const auto& c : a.calls) {
    json block = {{"type", "tool_use"}, {"name", c.name}, {"input", json::object()}};
    if (!c.id.empty()) block["id"] = c.id;
    ev("content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
    ev("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                               {"delta", {{"type", "input_json_delta"}, {"partial_json", ""}}}});
    for (const auto& p : c.arg_pieces)
      ev("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                 {"delta", {{"type", "input_json_delta"}, {"partial_json", p}}}});
    ev("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    ++index;
  }
  std::string stop = !a.finish.empty() ? a.finish : a.calls.empty() ? "end_turn" : "tool_use";
  ev("message_delta", {{"type", "message_delta"},
                       {"delta", {{"stop_reason", stop}, {"stop_sequence", nullptr}}},
                       {"usage", {{"output_tokens", a.output}}}});
  if (a.terminator) ev("message_stop", {{"type", "message_stop"}});
  return wire_detail::frame(a, events);
}

// Anthropic messages, whole (stream: false).
inline std::string anthropic_whole(const WireAnswer& a) {
  using nlohmann::json;
  json content = json::array();
  if (!a.text_pieces.empty()) content.push_back({{"type", "text"}, {"text", wire_detail::joined(a.text_pieces)}});
  for (const auto& c : a.calls) {
    json block = {{"type", "tool_use"}, {"name", c.name},
                  {"input", json::parse(wire_detail::joined(c.arg_pieces), nullptr, false)}};
    if (!c.id.empty()) block["id"] = c.id;
    content.push_back(block);
  }
  std::string stop = !a.finish.empty() ? a.finish : a.calls.empty() ? "end_turn" : "tool_use";
  return json{{"id", "msg_01XFDUDYJgAACzvnptvVoYEL"},
              {"type", "message"},
              {"role", "assistant"},
              {"model", a.model},
              {"content", content},
              {"stop_reason", stop},
              {"stop_sequence", nullptr},
              {"usage",
               {{"input_tokens", a.input}, {"cache_creation_input_tokens", a.cache_write},
                {"cache_read_input_tokens", a.cache_read}, {"output_tokens", a.output}}}}
      .dump();
}

// Error bodies as the APIs send them.
inline std::string openai_error(const std::string& message, const std::string& type, const std::string& code) {
  return nlohmann::json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}.dump(2);
}
inline std::string anthropic_error(const std::string& type, const std::string& message) {
  return nlohmann::json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}.dump();
}

// Cut points that land where a parser is easiest to get wrong: between every
// CR and LF, inside every multi-byte UTF-8 character, and inside every
// "data:" field name.
inline std::vector<size_t> awkward_cuts(const std::string& body) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < body.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(body[i]);
    if (body[i - 1] == '\r' && body[i] == '\n') cuts.push_back(i);
    if ((c & 0xC0) == 0x80) cuts.push_back(i);  // a continuation byte: inside a character
    if (body.compare(i - 1, 5, "data:") == 0) cuts.push_back(i + 1);
  }
  return cuts;
}

}  // namespace carapace::testing
