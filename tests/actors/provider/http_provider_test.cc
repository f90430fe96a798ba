// The HTTP providers against a real HTTP server on 127.0.0.1 that speaks
// OpenAI's and Anthropic's wire formats byte for byte and misbehaves on
// demand: what is assembled, what is sent, and how each failure is classified.
#define BOOST_TEST_MODULE http_provider_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "actors/provider/anthropic_provider.h"
#include "actors/provider/http_provider.h"
#include "actors/provider/openai_provider.h"
#include "actors/provider/retry_policy.h"
#include "storage/body_store.h"
#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace carapace::testing;
using nlohmann::json;
namespace data = boost::unit_test::data;

namespace {

const char* kKey = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz";

struct Fixture {
  TempDir dir;
  MockLlmServer server;
  std::shared_ptr<BodyStore> bodies;
  std::shared_ptr<HttpClient> client = std::make_shared<HttpClient>();

  Fixture() {
    std::unique_ptr<BodyStore> store;
    CHECK_OK(BodyStore::open(dir.sub("bodies"), BodyStore::Mode::kWriter, &store));
    bodies = std::move(store);
  }

  HttpProviderOptions options(const std::string& format) const {
    HttpProviderOptions o;
    o.base_url = format == "openai" ? server.url() + "/v1" : server.url();
    o.api_key = kKey;
    o.api_key_env = format == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    o.idle_timeout_ms = 2000;
    o.first_byte_timeout_ms = 5000;
    return o;
  }

  std::shared_ptr<HttpProvider> make(const std::string& format, HttpProviderOptions o) {
    if (format == "anthropic") return std::make_shared<AnthropicProvider>(std::move(o), client, bodies);
    return std::make_shared<OpenAiProvider>(std::move(o), client, bodies);
  }
  std::shared_ptr<HttpProvider> make(const std::string& format) { return make(format, options(format)); }

  std::string stored(const std::string& ref) {
    std::string b;
    CHECK_OK(bodies->get(ref, &b));
    return b;
  }
};

ToolSpec write_file_spec() {
  return ToolSpec{.name = "write_file",
                  .description = "Writes a file",
                  .schema = {R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]})"}};
}

ProviderRequest sample_request() {
  ProviderRequest r;
  r.session_id = "s1";
  r.turn = 3;
  r.attempt = 1;
  r.model = "test-model";
  r.system_prompt = "You are terse.";
  r.messages = {
      Message{.role = Role::kUser, .text = "Write a note"},
      Message{.role = Role::kAssistant,
              .text = "Writing it.",
              .tool_calls = {ToolCall{.id = "call_1", .name = "write_file", .args = {R"({"path":"a.txt","content":"x"})"}},
                             ToolCall{.id = "call_2", .name = "list_dir", .args = {R"({"path":"."})"}}}},
      Message{.role = Role::kTool, .text = "wrote 1 byte", .tool_call_id = "call_1", .tool_name = "write_file"},
      Message{.role = Role::kTool, .text = "no such directory", .tool_call_id = "call_2", .tool_name = "list_dir",
              .is_error = true},
      Message{.role = Role::kAssistant, .tool_calls = {ToolCall{.id = "call_3", .name = "list_dir", .args = {"{}"}}}},
      Message{.role = Role::kTool, .text = "a.txt", .tool_call_id = "call_3", .tool_name = "list_dir"},
      Message{.role = Role::kUser, .text = "Thanks. Now summarise."},
  };
  r.tools = {write_file_spec()};
  return r;
}

// Text with two-, three- and four-byte characters; two tool calls whose
// arguments arrive in many pieces (one piece cut inside a character).
WireAnswer rich_answer() {
  WireAnswer a;
  a.text_pieces = {"H\xC3\xA9llo", ", ", "co\xC3\xBBt 5 \xE2\x82\xAC", " \xF0\x9F\x98\x80", "!"};
  a.calls = {WireToolCall{.id = "call_a1", .name = "write_file",
                          .arg_pieces = {"{\"pa", "th\": \"n\xC3\xB6", "te.txt\", \"con", "tent\": \"\xE2\x82\xAC", "1\"}"}},
             WireToolCall{.id = "call_b2", .name = "list_dir", .arg_pieces = {"{", "\"path\"", ": \".\"", "}"}}};
  a.input = 120;
  a.cache_read = 1024;
  a.cache_write = 7;
  a.output = 42;
  return a;
}

std::string text_of(const WireAnswer& a) {
  std::string s;
  for (const auto& p : a.text_pieces) s += p;
  return s;
}

struct Outcome {
  ProviderReply reply;
  std::vector<StreamDelta> deltas;
};

Outcome call(Provider& p, const ProviderRequest& request) {
  Outcome out;
  std::mutex mu;
  out.reply = p.call(request, [&](const StreamDelta& d) {
    std::lock_guard lock(mu);
    out.deltas.push_back(d);
  });
  return out;
}

std::string delta_text(const std::vector<StreamDelta>& deltas) {
  std::string s;
  for (const auto& d : deltas) s += d.text;
  return s;
}

std::string delta_args(const std::vector<StreamDelta>& deltas, int32_t index) {
  std::string s;
  for (const auto& d : deltas) {
    if (d.tool_index == index) s += d.args_fragment;
  }
  return s;
}

std::string stream_of(const std::string& format, const WireAnswer& a) {
  return format == "openai" ? openai_stream(a) : anthropic_stream(a);
}

const std::vector<std::string> kFormats = {"openai", "anthropic"};

// How a stream is cut and framed.
struct Shape {
  const char* name;
  bool crlf;
  bool keepalive;
  bool awkward;  // cut between CR and LF, inside characters, inside "data:"
  bool random;
};
std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.name; }
const std::vector<Shape> kShapes = {
    {"whole", false, false, false, false},
    {"lf-awkward-cuts", false, false, true, false},
    {"crlf-awkward-cuts", true, false, true, false},
    {"crlf-keepalive-random-cuts", true, true, false, true},
    {"lf-keepalive-awkward-and-random", false, true, true, true},
};

ErrorCategory category(const ProviderFailure& f) { return classify(RetryConfig{}, f); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(http_provider, Fixture)

BOOST_DATA_TEST_CASE_F(Fixture, streams_assemble_exactly_however_they_are_cut, data::make(kFormats) * data::make(kShapes),
                       format, shape) {
  WireAnswer a = rich_answer();
  a.crlf = shape.crlf;
  a.keepalive = shape.keepalive;
  MockReply reply{.headers = {"Content-Type: text/event-stream; charset=utf-8"}, .body = stream_of(format, a)};
  if (shape.awkward) reply.cuts = awkward_cuts(reply.body);
  reply.split_randomly = shape.random;
  if (shape.crlf) BOOST_REQUIRE(reply.body.find("\r\n") != std::string::npos);
  std::string sent = reply.body;
  server.push(reply);
  auto provider = make(format);
  Outcome o = call(*provider, sample_request());

  BOOST_REQUIRE_MESSAGE(o.reply.ok, o.reply.failure.error);
  const ProviderResponse& r = o.reply.response;
  BOOST_TEST(r.text == text_of(a));
  BOOST_REQUIRE(r.tool_calls.size() == 2u);
  BOOST_TEST(r.tool_calls[0].id == "call_a1");
  BOOST_TEST(r.tool_calls[0].name == "write_file");
  BOOST_TEST(r.tool_calls[0].args.text == "{\"path\": \"n\xC3\xB6te.txt\", \"content\": \"\xE2\x82\xAC" "1\"}");
  BOOST_TEST(r.tool_calls[1].id == "call_b2");
  BOOST_TEST(r.tool_calls[1].name == "list_dir");
  BOOST_TEST(r.tool_calls[1].args.text == "{\"path\": \".\"}");
  BOOST_TEST(r.finish_reason == (format == "openai" ? "tool_calls" : "tool_use"));
  BOOST_TEST(r.usage.input == 120u);
  BOOST_TEST(r.usage.cache_read == 1024u);
  BOOST_TEST(r.usage.output == 42u);
  BOOST_TEST(r.usage.cache_write == (format == "anthropic" ? 7u : 0u));  // OpenAI reports no cache writes
  // The deltas carry the same, in order, tagged with the attempt.
  BOOST_TEST(delta_text(o.deltas) == text_of(a));
  BOOST_TEST(delta_args(o.deltas, format == "openai" ? 0 : 1) == r.tool_calls[0].args.text);
  for (const auto& d : o.deltas) {
    BOOST_TEST(d.session_id == "s1");
    BOOST_TEST(d.turn == 3u);
  }
  // The response is stored exactly as it was received.
  BOOST_REQUIRE(!o.reply.body_ref.empty());
  BOOST_TEST(stored(o.reply.body_ref) == sent);
  BOOST_TEST(o.reply.answered);
}

BOOST_DATA_TEST_CASE_F(Fixture, a_whole_body_is_read_when_streaming_is_off, data::make(kFormats), format) {
  WireAnswer a = rich_answer();
  server.push(MockReply{.headers = {"Content-Type: application/json"},
                        .body = format == "openai" ? openai_whole(a) : anthropic_whole(a),
                        .chunked = false});
  HttpProviderOptions o = options(format);
  o.stream = false;
  auto provider = make(format, o);
  Outcome out = call(*provider, sample_request());
  BOOST_REQUIRE_MESSAGE(out.reply.ok, out.reply.failure.error);
  BOOST_TEST(out.reply.response.text == text_of(a));
  BOOST_REQUIRE(out.reply.response.tool_calls.size() == 2u);
  BOOST_TEST(json::parse(out.reply.response.tool_calls[0].args.text) ==
             json::parse("{\"path\": \"n\xC3\xB6te.txt\", \"content\": \"\xE2\x82\xAC" "1\"}"));
  BOOST_TEST(out.reply.response.usage.input == 120u);
  BOOST_TEST(out.reply.response.usage.cache_read == 1024u);
  BOOST_TEST(out.reply.response.usage.output == 42u);
  json sent = json::parse(server.requests().at(0).body);
  BOOST_TEST(sent["stream"] == false);
  BOOST_TEST(!sent.contains("stream_options"));
}

BOOST_AUTO_TEST_CASE(openai_request_body_and_headers) {
  server.push(MockReply{.body = openai_stream(WireAnswer{.text_pieces = {"ok"}})});
  HttpProviderOptions o = options("openai");
  o.extra_headers = {"X-Team: blue"};
  o.has_temperature = true;
  o.temperature = 0.25;
  auto provider = make("openai", o);
  Outcome out = call(*provider, sample_request());
  BOOST_REQUIRE_MESSAGE(out.reply.ok, out.reply.failure.error);
  auto reqs = server.requests();
  BOOST_REQUIRE(reqs.size() == 1u);
  BOOST_TEST(reqs[0].path == "/v1/chat/completions");
  BOOST_TEST(reqs[0].header("Authorization") == std::string("Bearer ") + kKey);
  BOOST_TEST(reqs[0].header("Content-Type") == "application/json");
  BOOST_TEST(reqs[0].header("X-Team") == "blue");
  BOOST_TEST(reqs[0].body.find(kKey) == std::string::npos);
  json b = json::parse(reqs[0].body);
  BOOST_TEST(b["model"] == "test-model");
  BOOST_TEST(b["stream"] == true);
  BOOST_TEST(b["stream_options"]["include_usage"] == true);
  BOOST_TEST(b["temperature"] == 0.25);
  BOOST_TEST(!b.contains("max_tokens"));
  const json& m = b["messages"];
  BOOST_REQUIRE(m.size() == 8u);
  BOOST_TEST(m[0] == json::parse(R"({"role":"system","content":"You are terse."})"));
  BOOST_TEST(m[1] == json::parse(R"({"role":"user","content":"Write a note"})"));
  BOOST_TEST(m[2]["role"] == "assistant");
  BOOST_TEST(m[2]["content"] == "Writing it.");
  BOOST_TEST(m[2]["tool_calls"] == json::parse(R"([
      {"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.txt\",\"content\":\"x\"}"}},
      {"id":"call_2","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}])"));
  BOOST_TEST(m[3] == json::parse(R"({"role":"tool","tool_call_id":"call_1","content":"wrote 1 byte"})"));
  BOOST_TEST(m[4] == json::parse(R"({"role":"tool","tool_call_id":"call_2","content":"no such directory"})"));
  BOOST_TEST(m[5]["content"].is_null());  // tool calls only
  BOOST_TEST(m[6]["tool_call_id"] == "call_3");
  BOOST_TEST(m[7] == json::parse(R"({"role":"user","content":"Thanks. Now summarise."})"));
  BOOST_TEST(b["tools"] == json::parse(R"([{"type":"function","function":{"name":"write_file","description":"Writes a file",
      "parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}}])"));
  // What the provider renders for capture is what it sent, byte for byte.
  BOOST_TEST(provider->render_request(sample_request()) == reqs[0].body);
}

BOOST_AUTO_TEST_CASE(anthropic_request_body_and_headers) {
  server.push(MockReply{.body = anthropic_stream(WireAnswer{.text_pieces = {"ok"}})});
  server.push(MockReply{.body = anthropic_stream(WireAnswer{.text_pieces = {"ok"}})});
  auto provider = make("anthropic");
  BOOST_REQUIRE(call(*provider, sample_request()).reply.ok);
  HttpProviderOptions o = options("anthropic");
  o.max_tokens = 777;
  BOOST_REQUIRE(call(*make("anthropic", o), sample_request()).reply.ok);
  auto reqs = server.requests();
  BOOST_REQUIRE(reqs.size() == 2u);
  BOOST_TEST(reqs[0].path == "/v1/messages");
  BOOST_TEST(reqs[0].header("x-api-key") == kKey);
  BOOST_TEST(reqs[0].header("anthropic-version") == "2023-06-01");
  BOOST_TEST(reqs[0].header("Authorization") == "");
  json b = json::parse(reqs[0].body);
  BOOST_TEST(b["max_tokens"] == AnthropicProvider::kDefaultMaxTokens);
  BOOST_TEST(json::parse(reqs[1].body)["max_tokens"] == 777);
  BOOST_TEST(b["system"] == "You are terse.");
  BOOST_TEST(b["stream"] == true);
  const json& m = b["messages"];
  // user, assistant, [two tool results] merged into one user message, assistant,
  // [tool result + the next user text] merged into one user message.
  BOOST_REQUIRE(m.size() == 5u);
  for (const auto& msg : m) BOOST_TEST(msg["role"] != "system");
  BOOST_TEST(m[0] == json::parse(R"({"role":"user","content":[{"type":"text","text":"Write a note"}]})"));
  BOOST_TEST(m[1] == json::parse(R"({"role":"assistant","content":[{"type":"text","text":"Writing it."},
      {"type":"tool_use","id":"call_1","name":"write_file","input":{"path":"a.txt","content":"x"}},
      {"type":"tool_use","id":"call_2","name":"list_dir","input":{"path":"."}}]})"));
  BOOST_TEST(m[2] == json::parse(R"({"role":"user","content":[
      {"type":"tool_result","tool_use_id":"call_1","content":"wrote 1 byte"},
      {"type":"tool_result","tool_use_id":"call_2","content":"no such directory","is_error":true}]})"));
  BOOST_TEST(m[3] == json::parse(R"({"role":"assistant","content":[{"type":"tool_use","id":"call_3","name":"list_dir","input":{}}]})"));
  BOOST_TEST(m[4] == json::parse(R"({"role":"user","content":[
      {"type":"tool_result","tool_use_id":"call_3","content":"a.txt"},
      {"type":"text","text":"Thanks. Now summarise."}]})"));
  BOOST_TEST(b["tools"] == json::parse(R"([{"name":"write_file","description":"Writes a file",
      "input_schema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}])"));
  BOOST_TEST(provider->render_request(sample_request()) == reqs[0].body);
}

// A shell command may print any bytes, and its output goes to the model.
BOOST_DATA_TEST_CASE_F(Fixture, output_that_is_not_utf8_is_sent_replaced, data::make(kFormats), format) {
  ProviderRequest r = sample_request();
  r.messages[2].text = "bin\xFF\xFE output";
  std::string body;
  BOOST_REQUIRE_NO_THROW(body = make(format)->render_request(r));
  BOOST_TEST(body.find("bin\xEF\xBF\xBD") != std::string::npos);
  BOOST_TEST(!json::parse(body, nullptr, false).is_discarded());
}

// A server (an MCP server, a tool) that gives its schema's keys in another
// order each time does not change the bytes sent, so it cannot bust a
// prompt cache (docs/trace.md, "Why did my cache miss?").
BOOST_DATA_TEST_CASE_F(Fixture, tool_schemas_render_the_same_bytes_in_any_key_order, data::make(kFormats), format) {
  ProviderRequest a = sample_request(), b = sample_request();
  b.tools[0].schema = {R"({"required":["path","content"],"properties":{"content":{"type":"string"},"path":{"type":"string"}},"type":"object"})"};
  BOOST_TEST(make(format)->render_request(a) == make(format)->render_request(b));
}

// provider.cache: anthropic breakpoints where asked, at most the last N
// messages; openai's key passed through; nothing when unset.
BOOST_DATA_TEST_CASE_F(Fixture, cache_settings_put_breakpoints_or_a_key_into_the_body, data::make(kFormats), format) {
  HttpProviderOptions o = options(format);
  BOOST_TEST(make(format, o)->render_request(sample_request()).find("cache") == std::string::npos);
  if (format == "anthropic") {
    o.cache = PromptCache{.tools = true, .system = true, .last_messages = 2, .ttl = "1h"};
  } else {
    o.cache = PromptCache{.prompt_cache_key = "team-a"};
  }
  json body = json::parse(make(format, o)->render_request(sample_request()));
  if (format == "openai") {
    BOOST_TEST(body["prompt_cache_key"] == "team-a");
    return;
  }
  const json marker = {{"type", "ephemeral"}, {"ttl", "1h"}};
  BOOST_TEST(body["system"] == json::array({{{"type", "text"}, {"text", "You are terse."}, {"cache_control", marker}}}));
  BOOST_TEST(body["tools"].back()["cache_control"] == marker);
  const json& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& last = messages[i]["content"].back();
    BOOST_TEST(last.contains("cache_control") == (i + 2 >= messages.size()), i);
    for (size_t k = 0; k + 1 < messages[i]["content"].size(); ++k) BOOST_TEST(!messages[i]["content"][k].contains("cache_control"));
  }
}

BOOST_AUTO_TEST_CASE(openai_compatible_servers_quirks) {
  // No tool-call ids (llama.cpp), no usage chunk, "stop" with tool calls (vLLM).
  WireAnswer a;
  a.calls = {WireToolCall{.name = "list_dir", .arg_pieces = {"{\"path\":", "\".\"}"}},
             WireToolCall{.name = "read_file", .arg_pieces = {"{\"path\":\"a\"}"}}};
  a.usage = false;
  a.finish = "stop";
  server.push(MockReply{.body = openai_stream(a)});
  a.send_finish = false;  // and no finish_reason at all
  server.push(MockReply{.body = openai_stream(a)});
  auto provider = make("openai");
  Outcome first = call(*provider, sample_request());
  Outcome second = call(*provider, sample_request());
  for (const Outcome* o : {&first, &second}) {
    BOOST_REQUIRE_MESSAGE(o->reply.ok, o->reply.failure.error);
    const auto& calls = o->reply.response.tool_calls;
    BOOST_REQUIRE(calls.size() == 2u);
    std::string body = provider->render_request(sample_request());
    BOOST_TEST(calls[0].id == generated_call_id(body, 0));
    BOOST_TEST(calls[1].id == generated_call_id(body, 1));
    BOOST_TEST(calls[0].id != calls[1].id);
    BOOST_TEST(calls[0].args.text == "{\"path\":\".\"}");
    BOOST_TEST(o->reply.response.finish_reason == "tool_calls");
    BOOST_TEST((o->reply.response.usage == TokenUsage{}));
  }
  // The same request gives the same ids: a replay or a retry sees the same.
  BOOST_TEST(first.reply.response.tool_calls[0].id == second.reply.response.tool_calls[0].id);
}

BOOST_AUTO_TEST_CASE(openai_tool_calls_accumulate_by_index_across_interleaved_deltas) {
  // Two calls whose fragments alternate, the second announced first.
  auto chunk = [](const json& tool_calls) {
    return "data: " + json{{"choices", {{{"index", 0}, {"delta", {{"tool_calls", tool_calls}}}}}}}.dump() + "\n\n";
  };
  std::string body =
      chunk(json::parse(R"([{"index":1,"id":"call_y","type":"function","function":{"name":"read_file","arguments":""}}])")) +
      chunk(json::parse(R"([{"index":0,"id":"call_x","type":"function","function":{"name":"list_dir","arguments":"{\"pa"}}])")) +
      chunk(json::parse(R"([{"index":1,"function":{"arguments":"{\"path\":"}},{"index":0,"function":{"arguments":"th\":"}}])")) +
      chunk(json::parse(R"([{"index":0,"function":{"arguments":"\".\"}"}},{"index":1,"function":{"arguments":"\"b\"}"}}])")) +
      "data: [DONE]\n\n";
  server.push(MockReply{.body = body});
  Outcome o = call(*make("openai"), sample_request());
  BOOST_REQUIRE_MESSAGE(o.reply.ok, o.reply.failure.error);
  const auto& calls = o.reply.response.tool_calls;
  BOOST_REQUIRE(calls.size() == 2u);
  BOOST_TEST(calls[0].id == "call_x");
  BOOST_TEST(calls[0].name == "list_dir");
  BOOST_TEST(calls[0].args.text == "{\"path\":\".\"}");
  BOOST_TEST(calls[1].id == "call_y");
  BOOST_TEST(calls[1].name == "read_file");
  BOOST_TEST(calls[1].args.text == "{\"path\":\"b\"}");
}

BOOST_DATA_TEST_CASE_F(Fixture, rate_limits_honour_retry_after_in_every_form, data::make(kFormats), format) {
  std::string err = format == "openai" ? openai_error("Rate limit reached", "requests", "rate_limit_exceeded")
                                       : anthropic_error("rate_limit_error", "Number of requests has exceeded your rate limit");
  server.push(MockReply{.status = 429, .headers = {"Retry-After: 7", "Content-Type: application/json"}, .body = err});
  server.push(MockReply{.status = 429, .headers = {"retry-after-ms: 1250", "Retry-After: 2"}, .body = err});
  server.push(MockReply{.status = 429, .headers = {"Retry-After: Wed, 21 Oct 2015 07:28:00 GMT"}, .body = err});
  auto provider = make(format);
  Outcome a = call(*provider, sample_request());
  Outcome b = call(*provider, sample_request());
  Outcome c = call(*provider, sample_request());
  for (const Outcome* o : {&a, &b, &c}) {
    BOOST_TEST(!o->reply.ok);
    BOOST_TEST(o->reply.failure.http_status == 429u);
    BOOST_TEST(!o->reply.failure.transport);
    BOOST_TEST((category(o->reply.failure) == ErrorCategory::kTransient));
    BOOST_TEST(stored(o->reply.body_ref) == err);  // the error body, verbatim
  }
  BOOST_TEST(a.reply.failure.has_retry_after);
  BOOST_TEST(a.reply.failure.retry_after_ms == 7000u);
  BOOST_TEST((a.reply.failure.error.find("rate limit") != std::string::npos ||
              a.reply.failure.error.find("Rate limit") != std::string::npos));
  BOOST_TEST(b.reply.failure.retry_after_ms == 1250u);  // the finer header wins
  BOOST_TEST(c.reply.failure.has_retry_after);           // a date in the past: at once
  BOOST_TEST(c.reply.failure.retry_after_ms == 0u);
  RetryDecision d = decide_retry(RetryConfig{}, a.reply.failure, 1, 42, 1);
  BOOST_TEST(d.retry);
  BOOST_TEST(d.delay_ms == 7000u);
}

BOOST_DATA_TEST_CASE_F(Fixture, overload_is_transient_as_a_status_and_in_the_stream, data::make(kFormats), format) {
  server.push(MockReply{.status = 529, .body = anthropic_error("overloaded_error", "Overloaded")});
  if (format == "anthropic") {
    WireAnswer a;
    a.text_pieces = {"Hel", "lo"};
    a.terminator = false;
    std::string body = anthropic_stream(a);
    body = body.substr(0, body.find("event: message_delta"));
    body += "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    server.push(MockReply{.body = body});
  } else {
    std::string body = openai_stream(WireAnswer{.text_pieces = {"Hel"}, .terminator = false});
    body = body.substr(0, body.find("data: {", 10));
    body += "data: {\"error\":{\"message\":\"The server is overloaded\",\"type\":\"server_error\"}}\n\n";
    server.push(MockReply{.body = body});
  }
  auto provider = make(format);
  Outcome status = call(*provider, sample_request());
  BOOST_TEST(!status.reply.ok);
  BOOST_TEST(status.reply.failure.http_status == 529u);
  BOOST_TEST((category(status.reply.failure) == ErrorCategory::kTransient));
  Outcome in_stream = call(*provider, sample_request());
  BOOST_TEST(!in_stream.reply.ok);
  BOOST_TEST((category(in_stream.reply.failure) == ErrorCategory::kTransient));
  BOOST_TEST(in_stream.reply.failure.error.find("overloaded") != std::string::npos);
  if (format == "anthropic") BOOST_TEST(in_stream.reply.failure.http_status == 529u);
  BOOST_TEST(stored(in_stream.reply.body_ref).find("error") != std::string::npos);
}

BOOST_DATA_TEST_CASE_F(Fixture, unauthorized_is_permanent_and_names_the_variable_not_the_key, data::make(kFormats),
                       format) {
  // The server echoes the key it was sent, as some do.
  std::string echo = format == "openai"
                         ? openai_error(std::string("Incorrect API key provided: ") + kKey, "invalid_request_error",
                                        "invalid_api_key")
                         : anthropic_error("authentication_error", std::string("invalid x-api-key ") + kKey);
  server.push(MockReply{.status = 401, .body = echo});
  Outcome o = call(*make(format), sample_request());
  BOOST_TEST(!o.reply.ok);
  BOOST_TEST(o.reply.failure.http_status == 401u);
  BOOST_TEST((category(o.reply.failure) == ErrorCategory::kPermanent));
  std::string env = format == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
  BOOST_TEST(o.reply.failure.error.find("$" + env) != std::string::npos, o.reply.failure.error);
  BOOST_TEST(o.reply.failure.error.find(kKey) == std::string::npos, o.reply.failure.error);
  std::string kept = stored(o.reply.body_ref);
  BOOST_TEST(kept.find(kKey) == std::string::npos);
  BOOST_TEST(kept.find("[redacted]") != std::string::npos);
}

BOOST_DATA_TEST_CASE_F(Fixture, client_errors_are_permanent_and_say_what_to_check, data::make(kFormats), format) {
  server.push(MockReply{.status = 404, .body = openai_error("The model `nope` does not exist", "invalid_request_error",
                                                            "model_not_found")});
  server.push(MockReply{.status = 400, .body = anthropic_error("invalid_request_error", "max_tokens: too large")});
  server.push(MockReply{.status = 503, .headers = {"x-should-retry: false"}, .body = "busy"});
  server.push(MockReply{.status = 409, .headers = {"x-should-retry: true"}, .body = "conflict"});
  auto provider = make(format);
  Outcome not_found = call(*provider, sample_request());
  Outcome bad = call(*provider, sample_request());
  Outcome no_retry = call(*provider, sample_request());
  Outcome retry = call(*provider, sample_request());
  BOOST_TEST((category(not_found.reply.failure) == ErrorCategory::kPermanent));
  BOOST_TEST(not_found.reply.failure.error.find("provider.base_url") != std::string::npos);
  BOOST_TEST(not_found.reply.failure.error.find("does not exist") != std::string::npos);
  BOOST_TEST((category(bad.reply.failure) == ErrorCategory::kPermanent));
  BOOST_TEST(bad.reply.failure.error.find("max_tokens: too large") != std::string::npos);
  BOOST_TEST((category(no_retry.reply.failure) == ErrorCategory::kPermanent));  // the server said so
  BOOST_TEST((category(retry.reply.failure) == ErrorCategory::kTransient));
}

BOOST_DATA_TEST_CASE_F(Fixture, a_connection_dropped_mid_stream_is_transient, data::make(kFormats), format) {
  std::string body = stream_of(format, rich_answer());
  long cut = static_cast<long>(body.size() / 2);
  server.push(MockReply{.body = body, .drop_after = cut});
  Outcome o = call(*make(format), sample_request());
  BOOST_TEST(!o.reply.ok);
  BOOST_TEST(o.reply.failure.transport);
  BOOST_TEST((category(o.reply.failure) == ErrorCategory::kTransient));
  BOOST_TEST(!o.deltas.empty());  // what arrived was streamed
  BOOST_TEST(stored(o.reply.body_ref) == body.substr(0, static_cast<size_t>(cut)));
}

BOOST_DATA_TEST_CASE_F(Fixture, a_stall_longer_than_the_idle_timeout_is_transient, data::make(kFormats), format) {
  std::string body = stream_of(format, rich_answer());
  server.push(MockReply{.body = body, .stall_after = static_cast<long>(body.size() / 3), .stall_ms = 3000});
  HttpProviderOptions o = options(format);
  o.idle_timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  Outcome out = call(*make(format, o), sample_request());
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(!out.reply.ok);
  BOOST_TEST(out.reply.failure.transport);
  BOOST_TEST(out.reply.failure.error.find("idle timeout") != std::string::npos, out.reply.failure.error);
  BOOST_TEST((category(out.reply.failure) == ErrorCategory::kTransient));
  BOOST_TEST((took < std::chrono::milliseconds(2500)));
}

BOOST_AUTO_TEST_CASE(no_first_byte_in_time_is_transient) {
  server.push(MockReply{.body = openai_stream(rich_answer()), .delay_ms = 2000});
  HttpProviderOptions o = options("openai");
  o.first_byte_timeout_ms = 200;
  Outcome out = call(*make("openai", o), sample_request());
  BOOST_TEST(!out.reply.ok);
  BOOST_TEST(out.reply.failure.error.find("first-byte timeout") != std::string::npos, out.reply.failure.error);
  BOOST_TEST((category(out.reply.failure) == ErrorCategory::kTransient));
}

BOOST_DATA_TEST_CASE_F(Fixture, a_stream_without_its_terminator_is_transient, data::make(kFormats), format) {
  WireAnswer a = rich_answer();
  a.terminator = false;
  server.push(MockReply{.body = stream_of(format, a)});
  Outcome o = call(*make(format), sample_request());
  BOOST_TEST(!o.reply.ok);
  BOOST_TEST(o.reply.failure.transport);
  BOOST_TEST(o.reply.failure.error.find(format == "openai" ? "[DONE]" : "message_stop") != std::string::npos,
             o.reply.failure.error);
  BOOST_TEST((category(o.reply.failure) == ErrorCategory::kTransient));
}

BOOST_DATA_TEST_CASE_F(Fixture, a_malformed_event_is_transient_and_kept, data::make(kFormats), format) {
  std::string body = stream_of(format, rich_answer());
  size_t at = body.find("data: {", 10);
  std::string bad = "data: {\"choices\": [ oops\n\n";
  body.insert(at, bad);
  server.push(MockReply{.body = body});
  Outcome o = call(*make(format), sample_request());
  BOOST_TEST(!o.reply.ok);
  BOOST_TEST(o.reply.failure.transport);
  BOOST_TEST((category(o.reply.failure) == ErrorCategory::kTransient));
  BOOST_TEST(o.reply.failure.error.find("{\"choices\": [ oops") != std::string::npos, o.reply.failure.error);
  BOOST_TEST(stored(o.reply.body_ref).find("oops") != std::string::npos);
}

BOOST_DATA_TEST_CASE_F(Fixture, invalid_tool_arguments_reach_the_caller_unchanged, data::make(kFormats), format) {
  WireAnswer a;
  a.calls = {WireToolCall{.id = "call_bad", .name = "write_file", .arg_pieces = {"{\"path\": \"a.txt\", \"content\": "}}};
  server.push(MockReply{.body = stream_of(format, a)});
  Outcome o = call(*make(format), sample_request());
  BOOST_REQUIRE_MESSAGE(o.reply.ok, o.reply.failure.error);  // the tool reports them to the model
  BOOST_REQUIRE(o.reply.response.tool_calls.size() == 1u);
  BOOST_TEST(o.reply.response.tool_calls[0].args.text == "{\"path\": \"a.txt\", \"content\": ");
}

BOOST_AUTO_TEST_CASE(a_refused_connection_is_transient) {
  HttpProviderOptions o = options("openai");
  o.base_url = "http://127.0.0.1:1";
  Outcome out = call(*make("openai", o), sample_request());
  BOOST_TEST(!out.reply.ok);
  BOOST_TEST(out.reply.failure.transport);
  BOOST_TEST(!out.reply.answered);
  BOOST_TEST((category(out.reply.failure) == ErrorCategory::kTransient));
}

BOOST_AUTO_TEST_CASE(cancel_ends_a_request_at_once) {
  std::string body = openai_stream(rich_answer());
  server.push(MockReply{.body = body, .stall_after = 10, .stall_ms = 10000});
  auto provider = make("openai");
  std::mutex mu;
  std::condition_variable cv;
  std::optional<ProviderReply> got;
  uint64_t id = provider->start(sample_request(), nullptr, [&](ProviderReply r) {
    std::lock_guard lock(mu);
    got = std::move(r);
    cv.notify_all();
  });
  BOOST_REQUIRE(MockLlmServer::wait_for([&] { return server.stalls() == 1; }));
  auto start = std::chrono::steady_clock::now();
  provider->cancel(id);
  std::unique_lock lock(mu);
  BOOST_REQUIRE(cv.wait_for(lock, std::chrono::seconds(2), [&] { return got.has_value(); }));
  BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500)));
  BOOST_TEST(!got->ok);
  BOOST_TEST(got->failure.error.find("cancelled") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(connections_are_reused) {
  for (int i = 0; i < 5; ++i) server.push(MockReply{.body = openai_stream(WireAnswer{.text_pieces = {"ok"}})});
  auto provider = make("openai");
  for (int i = 0; i < 5; ++i) BOOST_REQUIRE(call(*provider, sample_request()).reply.ok);
  BOOST_TEST(server.connections() == 1);
}

BOOST_AUTO_TEST_CASE(loopback_urls) {
  BOOST_TEST(is_loopback_url("http://localhost:11434/v1"));
  BOOST_TEST(is_loopback_url("http://127.0.0.1:8000"));
  BOOST_TEST(is_loopback_url("http://[::1]:8080/v1"));
  BOOST_TEST(!is_loopback_url("https://api.openai.com/v1"));
  BOOST_TEST(!is_loopback_url("http://127.0.0.1.evil.example/v1"));
  BOOST_TEST(!is_loopback_url("http://localhost.evil.example/v1"));
}

BOOST_AUTO_TEST_SUITE_END()
