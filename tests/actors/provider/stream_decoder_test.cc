// The stream decoders event by event, on what a server may send that is
// valid JSON but not what the format says: fields of another type, missing
// or nested too deep. Each decoder reads an event's JSON with simdjson
// (actors/provider/event_json.h); these pin what it takes and what it leaves,
// as the nlohmann-based decoders did before it.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "actors/provider/anthropic_provider.h"
#include "actors/provider/openai_provider.h"
#include "base/bounded_json.h"
#include "base/limits.h"

using namespace carapace;

namespace {

template <typename P>
struct Probe : P {
  Probe() : P(HttpProviderOptions{.base_url = "http://127.0.0.1:1"}, nullptr, nullptr) {}
  using P::decoder;
};

struct Fed {
  bool ok = true;
  ProviderFailure failure;
  std::vector<StreamDelta> deltas;
};

Fed feed(StreamDecoder& d, const std::vector<std::pair<std::string, std::string>>& events) {
  Fed fed;
  DeltaSink sink = [&](const StreamDelta& delta) { fed.deltas.push_back(delta); };
  for (const auto& [type, data] : events) {
    SseEvent e{.type = type, .data = data, .raw = "data: " + data};
    if (!d.on_event(e, sink, &fed.failure)) {
      fed.ok = false;
      break;
    }
  }
  return fed;
}

std::string nested(size_t depth) {
  std::string t;
  for (size_t k = 0; k < depth; ++k) t += "{\"a\":";
  return t + "1" + std::string(depth, '}');
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stream_decoder)

BOOST_AUTO_TEST_CASE(openai_takes_what_has_the_right_type_and_leaves_the_rest) {
  Probe<OpenAiProvider> provider;
  auto d = provider.decoder("{}");
  Fed fed = feed(*d, {
                         {"message", R"({"choices":[{"delta":{"content":"Hel"}}]})"},
                         {"message", R"({"choices":[{"delta":{"content":42}}]})"},  // not a string
                         {"message", R"({"choices":["x",{"delta":{"content":"lo"}},{"delta":[]}]})"},
                         {"message", R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c1",)"
                                     R"("function":{"name":"shell","arguments":"{\"a\""}}]}}]})"},
                         {"message", R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"other",)"
                                     R"("function":{"name":"other","arguments":":1}"}}]}}]})"},
                         {"message", R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c0",)"
                                     R"("function":{"name":"read_file","arguments":7}}]}}]})"},
                         {"message", R"({"ignored":)" + nested(100) + R"(,"choices":[{"finish_reason":""}]})"},
                         {"message", R"({"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":-3,)"
                                     R"("prompt_tokens_details":{"cached_tokens":100}}})"},
                         {"message", "[DONE]"},
                     });
  BOOST_REQUIRE_MESSAGE(fed.ok, fed.failure.error);
  BOOST_TEST(d->complete());
  ProviderResponse r = d->finish();
  BOOST_TEST(r.text == "Hello");
  BOOST_REQUIRE(r.tool_calls.size() == 2u);
  BOOST_TEST(r.tool_calls[0].id == "c0");  // by index
  BOOST_TEST(r.tool_calls[0].name == "read_file");
  BOOST_TEST(r.tool_calls[0].args.text == "");  // arguments that are not a string
  BOOST_TEST(r.tool_calls[1].id == "c1");       // the first id and name stay
  BOOST_TEST(r.tool_calls[1].name == "shell");
  BOOST_TEST(r.tool_calls[1].args.text == "{\"a\":1}");
  BOOST_TEST(r.finish_reason == "tool_calls");  // "" with tool calls
  BOOST_TEST(r.usage.input == 20u);
  BOOST_TEST(r.usage.cache_read == 100u);
  BOOST_TEST(r.usage.output == 0u);  // a negative count is no count
  // A delta per piece of text and per tool-call fragment.
  BOOST_TEST(fed.deltas.size() == 5u);
}

BOOST_AUTO_TEST_CASE(openai_refuses_what_is_not_an_event) {
  const std::vector<std::string> bad_events = {"not json", "[1,2]", "\"text\"",
                                               "{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",  // not UTF-8
                                               nested(129), R"({"error":{"message":"overloaded"}})"};
  for (const std::string& bad : bad_events) {
    Probe<OpenAiProvider> provider;
    auto d = provider.decoder("{}");
    Fed fed = feed(*d, {{"message", bad}});
    BOOST_TEST(!fed.ok, bad.substr(0, 40));
    BOOST_TEST(fed.failure.transport);
    const bool names_it = fed.failure.error.starts_with("malformed stream event (not JSON): ") ||
                          fed.failure.error.starts_with("error in the response stream: ");
    BOOST_TEST(names_it, fed.failure.error);
  }
}

BOOST_AUTO_TEST_CASE(anthropic_takes_what_has_the_right_type_and_leaves_the_rest) {
  Probe<AnthropicProvider> provider;
  auto d = provider.decoder("{}");
  Fed fed = feed(
      *d, {
              {"message_start", R"({"type":"message_start","message":{"usage":{"input_tokens":30,)"
                                R"("cache_read_input_tokens":7,"cache_creation_input_tokens":2.5}}})"},
              {"content_block_start", R"({"index":0,"content_block":{"type":"text","text":"Hi"}})"},  // type from the event
              {"content_block_delta", R"({"type":"content_block_delta","index":0,)"
                                      R"("delta":{"type":"text_delta","text":" there"}})"},
              {"content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}})"},
              {"content_block_start", R"({"type":"content_block_start","index":1,"content_block":)"
                                      R"({"type":"tool_use","id":"t1","name":"shell","input":{"b":1,"a":[2]}}})"},
              {"content_block_start", R"({"type":"content_block_start","index":2,"content_block":)"
                                      R"({"type":"tool_use","id":"t2","name":"read_file","input":{}}})"},
              {"content_block_delta", R"({"type":"content_block_delta","index":2,)"
                                      R"("delta":{"type":"input_json_delta","partial_json":"{\"path\":"}})"},
              {"content_block_delta", R"({"type":"content_block_delta","index":2,)"
                                      R"("delta":{"type":"input_json_delta","partial_json":"\"a\"}"}})"},
              {"ping", R"({"type":"ping"})"},
              {"message_delta", R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}})"},
              {"message_stop", R"({"type":"message_stop"})"},
          });
  BOOST_REQUIRE_MESSAGE(fed.ok, fed.failure.error);
  BOOST_TEST(d->complete());
  ProviderResponse r = d->finish();
  BOOST_TEST(r.text == "Hi there");
  BOOST_REQUIRE(r.tool_calls.size() == 2u);
  BOOST_TEST(r.tool_calls[0].id == "t1");
  BOOST_TEST(r.tool_calls[0].args.text == R"({"a":[2],"b":1})");  // the initial input, as recorded before: keys sorted
  BOOST_TEST(r.tool_calls[1].args.text == R"({"path":"a"})");
  BOOST_TEST(r.finish_reason == "tool_use");
  BOOST_TEST(r.usage.input == 30u);
  BOOST_TEST(r.usage.cache_read == 7u);
  BOOST_TEST(r.usage.cache_write == 0u);  // not an integer
  BOOST_TEST(r.usage.output == 9u);
}

BOOST_AUTO_TEST_CASE(anthropic_refuses_what_is_not_an_event_and_reads_an_error) {
  for (const std::string& bad : std::vector<std::string>{"{", "[]", nested(129)}) {
    Probe<AnthropicProvider> provider;
    auto d = provider.decoder("{}");
    Fed fed = feed(*d, {{"content_block_delta", bad}});
    BOOST_TEST(!fed.ok);
    BOOST_TEST(fed.failure.error.starts_with("malformed stream event (not JSON): "), fed.failure.error);
  }
  Probe<AnthropicProvider> provider;
  auto d = provider.decoder("{}");
  Fed fed = feed(*d, {{"error", R"({"type":"error","error":{"type":"overloaded_error","message":"busy"}})"}});
  BOOST_TEST(!fed.ok);
  BOOST_TEST(fed.failure.http_status == 529u);
  BOOST_TEST(fed.failure.error == "error in the response stream: overloaded_error: busy");
}

// The depth bound is the one every other reader of outside JSON keeps
// (parse_stored_json, limits::kJsonDepth), to the level.
BOOST_AUTO_TEST_CASE(the_depth_bound_is_the_stored_json_bound) {
  for (size_t depth = limits::kJsonDepth - 3; depth <= limits::kJsonDepth + 2; ++depth) {
    const std::string event = R"({"choices":[],"x":)" + nested(depth - 1) + "}";
    const bool accepted_before = !parse_stored_json(event).is_discarded();
    Probe<OpenAiProvider> openai;
    auto d = openai.decoder("{}");
    BOOST_TEST(feed(*d, {{"message", event}}).ok == accepted_before, "depth " << depth);
    Probe<AnthropicProvider> anthropic;
    auto a = anthropic.decoder("{}");
    BOOST_TEST(feed(*a, {{"ping", event}}).ok == accepted_before, "depth " << depth);
  }
}

BOOST_AUTO_TEST_SUITE_END()
