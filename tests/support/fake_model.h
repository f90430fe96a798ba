// FakeModel: a deterministic "model" behind MockLlmServer, for whole agent
// sessions over HTTP. It reads the conversation in the request (OpenAI or
// Anthropic format) and answers from where it stands since the last user
// text:
//   no tool result yet  -> writes note.txt with the task and lists the
//                          directory, two calls in one answer;
//   two results         -> runs `cat note.txt` in the shell (after a sleep,
//                          when asked to, so that a test can kill it);
//   three or more       -> answers "Done: <the last tool result>".
// Each answer is streamed in the request's format, in small pieces.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"

namespace carapace::testing {

struct Conversation {
  std::string task;        // the last user text
  int results = 0;         // tool results since then
  std::string last_result; // the last tool result's content
};

// Where the conversation of a request body stands.
inline Conversation read_conversation(const std::string& format, const std::string& body) {
  using nlohmann::json;
  Conversation c;
  json b = json::parse(body, nullptr, false);
  if (!b.is_object() || !b.contains("messages")) return c;
  for (const json& m : b["messages"]) {
    std::string role = m.value("role", "");
    if (format == "openai") {
      if (role == "user") {
        c.task = m.value("content", "");
        c.results = 0;
      } else if (role == "tool") {
        ++c.results;
        c.last_result = m.value("content", "");
      }
    } else if (role == "user" && m["content"].is_array()) {
      for (const json& block : m["content"]) {
        if (block.value("type", "") == "text") {
          c.task = block.value("text", "");
          c.results = 0;
        } else if (block.value("type", "") == "tool_result") {
          ++c.results;
          c.last_result = block.value("content", "");
        }
      }
    }
  }
  return c;
}

struct FakeModel {
  std::string format;             // "openai" or "anthropic"
  std::string shell_command = "cat note.txt";

  WireAnswer answer(const Conversation& c) const {
    WireAnswer a;
    a.input = 100 + static_cast<uint64_t>(c.results);
    a.cache_read = 50;
    a.output = 10;
    if (c.results == 0) {
      a.text_pieces = {"I will ", "write the ", "note."};
      a.calls = {WireToolCall{.id = "call_w" + std::to_string(c.task.size()), .name = "write_file",
                              .arg_pieces = {"{\"path\": \"note.txt\", ", "\"content\": " + nlohmann::json(c.task).dump() + "}"}},
                 WireToolCall{.id = "call_l" + std::to_string(c.task.size()), .name = "list_dir",
                              .arg_pieces = {"{\"path\"", ": \".\"}"}}};
    } else if (c.results == 2) {
      a.text_pieces = {"Checking."};
      a.calls = {WireToolCall{.id = "call_s" + std::to_string(c.task.size()), .name = "shell",
                              .arg_pieces = {"{\"command\": ", nlohmann::json(shell_command).dump(), "}"}}};
    } else {
      std::string text = "Done: " + c.last_result;
      for (size_t i = 0; i < text.size(); i += 7) a.text_pieces.push_back(text.substr(i, 7));
    }
    return a;
  }

  MockReply reply(const MockRequest& request) const {
    WireAnswer a = answer(read_conversation(format, request.body));
    return MockReply{.headers = {"Content-Type: text/event-stream"},
                     .body = format == "openai" ? openai_stream(a) : anthropic_stream(a)};
  }
};

}  // namespace carapace::testing
