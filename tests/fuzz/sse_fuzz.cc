// Fuzz target: a model's HTTP response as the providers read it: the SSE
// parser (actors/provider/sse_parser.h) and, fed its events, the OpenAI and
// the Anthropic stream decoders (StreamDecoder::on_event, then finish()),
// and the same bytes as a whole, non-streamed body (parse_whole,
// error_text).
//
// The parser's contract is checked too: the stream may be cut anywhere, so
// the input fed byte by byte gives the same events, and ends in the same
// state, as the input fed at once. Its bound is small (the least
// provider.max_line_bytes allows) so that inputs reach it.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/provider/anthropic_provider.h"
#include "actors/provider/openai_provider.h"
#include "actors/provider/sse_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

constexpr uint64_t kMaxLineBytes = 1024;

// The providers' decoder() is for their attempts; these open it to the target.
class OpenAi : public OpenAiProvider {
 public:
  using OpenAiProvider::decoder;
  using OpenAiProvider::OpenAiProvider;
};
class Anthropic : public AnthropicProvider {
 public:
  using AnthropicProvider::AnthropicProvider;
  using AnthropicProvider::decoder;
};

struct Parsed {
  std::vector<SseEvent> events;
  bool overflowed = false;
  bool pending = false;
  uint64_t comments = 0;
  uint64_t count = 0;
};

Parsed parse(std::string_view input, size_t piece) {
  SseParser parser(kMaxLineBytes);
  Parsed out;
  for (size_t at = 0; at < input.size(); at += piece) {
    parser.feed(input.substr(at, piece), [&out](const SseEvent& e) { out.events.push_back(e); });
  }
  out.overflowed = parser.overflowed();
  out.pending = parser.pending();
  out.comments = parser.comments();
  out.count = parser.events();
  return out;
}

bool same(const Parsed& a, const Parsed& b) {
  if (a.events.size() != b.events.size() || a.overflowed != b.overflowed || a.pending != b.pending ||
      a.comments != b.comments || a.count != b.count) {
    return false;
  }
  for (size_t i = 0; i < a.events.size(); ++i) {
    const SseEvent &x = a.events[i], &y = b.events[i];
    if (x.type != y.type || x.data != y.data || x.id != y.id || x.raw != y.raw) return false;
  }
  return true;
}

void decode(StreamDecoder& decoder, const std::vector<SseEvent>& events) {
  uint64_t delta_bytes = 0;
  DeltaSink on_delta = [&delta_bytes](const StreamDelta& d) {
    delta_bytes += d.text.size() + d.tool_name.size() + d.args_fragment.size();
  };
  ProviderFailure failure;
  for (const SseEvent& e : events) {
    if (!decoder.on_event(e, on_delta, &failure)) return;
  }
  (void)decoder.complete();
  // The provider bounds a reply's tool calls by this count as the stream goes.
  size_t counted = decoder.tool_call_count();
  fuzz::check(decoder.finish().tool_calls.size() == counted, "a reply has more tool calls than were counted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const HttpProviderOptions options{.base_url = "http://127.0.0.1:1"};
  static const auto openai = std::make_shared<OpenAi>(options, nullptr, nullptr);
  static const auto anthropic = std::make_shared<Anthropic>(options, nullptr, nullptr);
  std::string_view input(reinterpret_cast<const char*>(data), size);

  Parsed whole = parse(input, input.size() + 1);
  fuzz::check(same(whole, parse(input, 1)), "the SSE parser reads a stream fed byte by byte differently");
  decode(*openai->decoder("{}"), whole.events);
  decode(*anthropic->decoder("{}"), whole.events);

  std::string error;
  ProviderResponse response;
  (void)openai->decoder("{}")->parse_whole(input, &response, &error);
  response = ProviderResponse{};
  (void)anthropic->decoder("{}")->parse_whole(input, &response, &error);
  (void)error_text(input);
  return 0;
}
