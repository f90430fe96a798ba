// The bounds on what a model server sends (docs/config.md, "Limits"), against
// a loopback server that never stops, never ends a line, sends too many tool
// calls or asks to be left alone for ten years: each attempt ends at its
// bound with an error naming the key, classified as docs/config.md says, and
// leaves no more than provider.max_stored_body_bytes in the body store.
#define BOOST_TEST_MODULE stream_bounds_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "actors/provider/anthropic_provider.h"
#include "actors/provider/http_provider.h"
#include "actors/provider/openai_provider.h"
#include "actors/provider/retry_policy.h"
#include "runtime/runtime.h"
#include "storage/body_store.h"
#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace carapace::testing;
using namespace std::chrono_literals;
using nlohmann::json;
namespace data = boost::unit_test::data;

namespace {

const std::vector<std::string> kFormats = {"openai", "anthropic"};

struct Fixture {
  TempDir dir;
  MockLlmServer server;
  std::shared_ptr<BodyStore> bodies;
  std::shared_ptr<HttpClient> client = std::make_shared<HttpClient>();

  explicit Fixture(uint64_t max_body_bytes = 64 * 1024) {
    std::unique_ptr<BodyStore> store;
    CHECK_OK(BodyStore::open(dir.sub("bodies"), BodyStore::Mode::kWriter, &store, max_body_bytes));
    bodies = std::move(store);
  }

  HttpProviderOptions options(const std::string& format) const {
    HttpProviderOptions o;
    o.base_url = format == "openai" ? server.url() + "/v1" : server.url();
    o.api_key_env = "TEST_KEY";
    o.idle_timeout_ms = 2000;
    o.first_byte_timeout_ms = 5000;
    o.max_stream_ms = 20'000;  // a broken bound ends the test here, not never
    return o;
  }

  std::shared_ptr<HttpProvider> make(const std::string& format, HttpProviderOptions o) {
    if (format == "anthropic") return std::make_shared<AnthropicProvider>(std::move(o), client, bodies);
    return std::make_shared<OpenAiProvider>(std::move(o), client, bodies);
  }

  std::string stored(const std::string& ref) {
    std::string b;
    CHECK_OK(bodies->get(ref, &b));
    return b;
  }
};

struct Outcome {
  ProviderReply reply;
  size_t text_bytes = 0;  // streamed to the sink
  std::chrono::milliseconds took{0};
};

// One attempt, given up (and cancelled) after 30 s: a bound that does not
// hold fails the test instead of hanging it.
Outcome attempt(Provider& p) {
  ProviderRequest request{.session_id = "s1", .turn = 1, .attempt = 1, .model = "test-model"};
  request.messages = {Message{.role = Role::kUser, .text = "go"}};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Outcome out;
  auto start = std::chrono::steady_clock::now();
  uint64_t id = p.start(
      request,
      [&](const StreamDelta& d) {
        std::lock_guard lock(mu);
        out.text_bytes += d.text.size();
      },
      [&](ProviderReply r) {
        std::lock_guard lock(mu);
        out.reply = std::move(r);
        done = true;
        cv.notify_all();
      });
  std::unique_lock lock(mu);
  if (!cv.wait_for(lock, 30s, [&] { return done; })) {
    lock.unlock();
    p.cancel(id);
    lock.lock();
    cv.wait(lock, [&] { return done; });
    BOOST_FAIL("the attempt was still running after 30 s");
  }
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return out;
}

ErrorCategory category(const ProviderFailure& f) { return classify(RetryConfig{}, f); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One SSE event that adds `text` to the answer, in the format's framing.
std::string text_event(const std::string& format, const std::string& text) {
  if (format == "openai") {
    return "data: " + json{{"choices", {{{"index", 0}, {"delta", {{"content", text}}}}}}}.dump() + "\n\n";
  }
  return "event: content_block_delta\ndata: " +
         json{{"type", "content_block_delta"},
              {"index", 0},
              {"delta", {{"type", "text_delta"}, {"text", text}}}}
             .dump() +
         "\n\n";
}

// The beginning of a stream (what comes before the text).
std::string stream_head(const std::string& format) {
  if (format == "openai") return text_event(format, "Hi");
  return "event: message_start\ndata: " +
         json{{"type", "message_start"}, {"message", {{"usage", {{"input_tokens", 5}}}}}}.dump() +
         "\n\nevent: content_block_start\ndata: " +
         json{{"type", "content_block_start"},
              {"index", 0},
              {"content_block", {{"type", "text"}, {"text", ""}}}}
             .dump() +
         "\n\n";
}

// Resets this process's peak resident memory (VmHWM); then peak_rss() is
// the peak since.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

uint64_t peak_rss() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// The whole size a cut body's marker gives, or 0 if `body` was not cut.
uint64_t whole_size_of_cut(const std::string& body) {
  size_t at = body.rfind(" bytes are kept (provider.max_stored_body_bytes)]");
  if (at == std::string::npos) return 0;
  size_t of = body.rfind("of its ", at);
  return std::stoull(body.substr(of + 7, at - of - 7));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(stream_bounds, Fixture)

BOOST_DATA_TEST_CASE_F(Fixture, an_endless_stream_stops_at_max_response_bytes, data::make(kFormats), format) {
  std::string piece;
  for (int i = 0; i < 64; ++i) piece += text_event(format, std::string(200, 'a'));
  server.push(MockReply{.body = stream_head(format), .more = [piece](size_t) { return piece; }});
  HttpProviderOptions o = options(format);
  o.max_response_bytes = 2 << 20;
  Outcome out = attempt(*make(format, o));

  BOOST_TEST(!out.reply.ok);
  const ProviderFailure& f = out.reply.failure;
  BOOST_TEST(contains(f.error, "longer than provider.max_response_bytes (2097152)"), f.error);
  BOOST_TEST((category(f) == ErrorCategory::kPermanent));
  BOOST_TEST(out.took < 10s);
  BOOST_TEST(out.text_bytes < (2u << 20));  // streamed up to the bound, then no more
  BOOST_TEST(out.text_bytes > (1u << 20));
  // The body store keeps its first 64 KiB and says how much there was.
  std::string body = stored(out.reply.body_ref);
  BOOST_TEST(body.size() < 64u * 1024 + 200);
  BOOST_TEST(whole_size_of_cut(body) > (2u << 20));
  BOOST_TEST(whole_size_of_cut(body) < (2u << 20) + (1u << 20));
  BOOST_TEST(server.request_count() == 1u);
}

BOOST_DATA_TEST_CASE_F(Fixture, a_line_without_end_stops_at_max_line_bytes, data::make(kFormats), format) {
  // A data line that never ends: the parser holds no more than the bound.
  std::string xs(64 * 1024, 'x');
  server.push(MockReply{.body = stream_head(format) + "data: {\"", .more = [xs](size_t) { return xs; }});
  HttpProviderOptions o = options(format);
  o.max_line_bytes = 256 * 1024;
  Outcome out = attempt(*make(format, o));

  BOOST_TEST(!out.reply.ok);
  const ProviderFailure& f = out.reply.failure;
  BOOST_TEST(contains(f.error, "longer than provider.max_line_bytes (262144)"), f.error);
  BOOST_TEST((category(f) == ErrorCategory::kPermanent));
  // Stopped at the bound, far below max_response_bytes (64 MiB).
  BOOST_TEST(whole_size_of_cut(stored(out.reply.body_ref)) < (1u << 20));
}

BOOST_DATA_TEST_CASE_F(Fixture, an_event_of_many_short_data_lines_stops_at_max_line_bytes,
                       data::make(kFormats), format) {
  // Short lines, no blank line: one event whose data grows without end.
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "data: " + std::string(60, 'y') + "\n";
  server.push(MockReply{.body = stream_head(format), .more = [lines](size_t) { return lines; }});
  HttpProviderOptions o = options(format);
  o.max_line_bytes = 256 * 1024;
  Outcome out = attempt(*make(format, o));
  BOOST_TEST(contains(out.reply.failure.error, "provider.max_line_bytes"), out.reply.failure.error);
  BOOST_TEST((category(out.reply.failure) == ErrorCategory::kPermanent));
  BOOST_TEST(whole_size_of_cut(stored(out.reply.body_ref)) < (1u << 20));
}

BOOST_DATA_TEST_CASE_F(Fixture, more_tool_calls_than_max_tool_calls_fail_streamed_or_whole,
                       data::make(kFormats) * data::make({true, false}), format, stream) {
  auto answer = [](size_t calls) {
    WireAnswer a;
    for (size_t i = 0; i < calls; ++i) {
      a.calls.push_back(
          WireToolCall{.id = "call_" + std::to_string(i), .name = "list_dir", .arg_pieces = {"{}"}});
    }
    return a;
  };
  auto body = [&](const WireAnswer& a) {
    if (stream) return format == "openai" ? openai_stream(a) : anthropic_stream(a);
    return format == "openai" ? openai_whole(a) : anthropic_whole(a);
  };
  server.push(MockReply{.body = body(answer(8))});
  server.push(MockReply{.body = body(answer(9))});
  HttpProviderOptions o = options(format);
  o.stream = stream;
  o.max_tool_calls = 8;
  auto provider = make(format, o);
  Outcome at_limit = attempt(*provider);
  BOOST_REQUIRE_MESSAGE(at_limit.reply.ok, at_limit.reply.failure.error);
  BOOST_TEST(at_limit.reply.response.tool_calls.size() == 8u);
  Outcome over = attempt(*provider);
  BOOST_TEST(!over.reply.ok);
  BOOST_TEST(contains(over.reply.failure.error, "more tool calls than provider.max_tool_calls (8)"),
             over.reply.failure.error);
  BOOST_TEST((category(over.reply.failure) == ErrorCategory::kPermanent));
}

// Tool-call arguments nested 400,000 deep were taken into the log, and every
// reader of it then died of recursion: arguments, an event or a whole reply
// nested past the JSON depth bound are refused with the attempt,
// permanently; 100 deep passes.
BOOST_DATA_TEST_CASE_F(Fixture, json_nested_past_the_depth_bound_is_refused_with_the_attempt,
                       data::make(kFormats) * data::make({true, false}), format, stream) {
  auto nested = [](size_t depth) {
    std::string t;
    for (size_t k = 0; k < depth; ++k) t += "{\"a\":";
    return t + "1" + std::string(depth, '}');
  };
  auto body = [&](size_t depth) {
    WireAnswer a;
    a.calls.push_back(WireToolCall{.id = "call_1", .name = "list_dir", .arg_pieces = {nested(depth)}});
    if (stream) return format == "openai" ? openai_stream(a) : anthropic_stream(a);
    return format == "openai" ? openai_whole(a) : anthropic_whole(a);
  };
  server.push(MockReply{.body = body(100)});
  server.push(MockReply{.body = body(200)});
  HttpProviderOptions o = options(format);
  o.stream = stream;
  auto provider = make(format, o);
  Outcome fine = attempt(*provider);
  BOOST_REQUIRE_MESSAGE(fine.reply.ok, fine.reply.failure.error);
  BOOST_TEST(fine.reply.response.tool_calls.at(0).args.text == nested(100));
  Outcome deep = attempt(*provider);
  BOOST_TEST(!deep.reply.ok);
  BOOST_TEST(
      contains(deep.reply.failure.error, "JSON nested deeper than 128 levels (the limit on JSON depth"),
      deep.reply.failure.error);
  BOOST_TEST((category(deep.reply.failure) == ErrorCategory::kPermanent));
  BOOST_TEST(deep.reply.response.tool_calls.empty());
}

BOOST_DATA_TEST_CASE_F(Fixture, a_stream_event_nested_400000_deep_is_refused_without_building_it,
                       data::make(kFormats), format) {
  std::string deep = std::string(400000, '[') + std::string(400000, ']');
  std::string event =
      format == "openai" ? "data: " + deep + "\n\n" : "event: message_delta\ndata: " + deep + "\n\n";
  server.push(MockReply{.body = stream_head(format) + event});
  auto provider = make(format, options(format));
  Outcome out = attempt(*provider);
  BOOST_TEST(!out.reply.ok);
  BOOST_TEST(contains(out.reply.failure.error,
                      "an event of the response stream: JSON nested deeper than 128 levels"),
             out.reply.failure.error);
  BOOST_TEST((category(out.reply.failure) == ErrorCategory::kPermanent));
}

BOOST_AUTO_TEST_CASE(a_flood_of_keep_alive_comments_holds_no_more_than_the_store_keeps) {
  // No event ever: once a comment shows it is a stream (not a whole JSON
  // body to parse), only what the body store keeps (64 KiB) is held.
  std::string comments;
  while (comments.size() < 64 * 1024) comments += ": keep-alive " + std::string(100, '.') + "\n\n";
  server.push(MockReply{.body = "", .more = [comments](size_t) { return comments; }});
  HttpProviderOptions o = options("openai");
  o.max_response_bytes = 256 << 20;
  auto provider = make("openai", o);
  uint64_t before = peak_rss();
  reset_peak_rss();
  Outcome out = attempt(*provider);
  uint64_t peak = peak_rss();
  BOOST_TEST(contains(out.reply.failure.error, "provider.max_response_bytes (268435456)"), out.reply.failure.error);
  BOOST_TEST(peak < before + (64ull << 20), (peak >> 20) << " MiB at the peak, "
                                                                            << (before >> 20) << " MiB before");
}

BOOST_DATA_TEST_CASE_F(Fixture, a_stream_that_trickles_without_end_stops_at_max_stream_ms,
                       data::make(kFormats), format) {
  // A keep-alive comment every 50 ms: never idle, never done.
  server.push(
      MockReply{.body = stream_head(format), .pace_us = 50'000, .more = [](size_t) { return ": ping\n\n"; }});
  HttpProviderOptions o = options(format);
  o.idle_timeout_ms = 2000;
  o.max_stream_ms = 700;
  Outcome out = attempt(*make(format, o));

  BOOST_TEST(!out.reply.ok);
  const ProviderFailure& f = out.reply.failure;
  BOOST_TEST(contains(f.error, "still coming after 700 ms"), f.error);
  BOOST_TEST(contains(f.error, "the limit is provider.max_stream_ms"), f.error);
  BOOST_TEST((category(f) == ErrorCategory::kTransient));  // a slow server may be quicker next time
  BOOST_TEST(out.took >= 700ms);
  BOOST_TEST(out.took < 5s);
}

BOOST_DATA_TEST_CASE_F(Fixture, the_idle_timeout_applies_mid_stream_and_names_its_key, data::make(kFormats),
                       format) {
  // Text flows for a while, then the server goes quiet for longer than idle_timeout_ms.
  std::string body = stream_head(format);
  for (int i = 0; i < 20; ++i) body += text_event(format, "word ");
  WireAnswer rest;
  rest.text_pieces = {"end"};
  body += format == "openai" ? openai_stream(rest) : anthropic_stream(rest);
  server.push(MockReply{.body = body,
                        .split_randomly = true,
                        .stall_after = static_cast<long>(body.size() / 2),
                        .stall_ms = 10'000});
  HttpProviderOptions o = options(format);
  o.idle_timeout_ms = 300;
  Outcome out = attempt(*make(format, o));

  BOOST_TEST(!out.reply.ok);
  BOOST_TEST(out.text_bytes > 0u);  // it was mid-stream
  BOOST_TEST(contains(out.reply.failure.error, "stalled for more than 300 ms"), out.reply.failure.error);
  BOOST_TEST(contains(out.reply.failure.error, "the limit is provider.idle_timeout_ms"),
             out.reply.failure.error);
  BOOST_TEST((category(out.reply.failure) == ErrorCategory::kTransient));
  BOOST_TEST(out.took < 5s);
}

BOOST_DATA_TEST_CASE_F(Fixture, a_reply_longer_than_the_store_keeps_is_read_whole_and_stored_cut,
                       data::make(kFormats) * data::make({true, false}), format, stream) {
  WireAnswer a;
  for (int i = 0; i < 1000; ++i) a.text_pieces.push_back(std::string(300, static_cast<char>('a' + i % 26)));
  std::string sent = stream ? (format == "openai" ? openai_stream(a) : anthropic_stream(a))
                            : (format == "openai" ? openai_whole(a) : anthropic_whole(a));
  server.push(MockReply{.body = sent, .cuts = {1, 1000, 65535, 65537, 200'000}});
  HttpProviderOptions o = options(format);
  o.stream = stream;
  Outcome out = attempt(*make(format, o));

  BOOST_REQUIRE_MESSAGE(out.reply.ok, out.reply.failure.error);
  BOOST_TEST(out.reply.response.text.size() == 300'000u);
  std::string body = stored(out.reply.body_ref);
  BOOST_TEST(body.substr(0, 64 * 1024) == sent.substr(0, 64 * 1024));
  BOOST_TEST(contains(body, "\n[carapace: body cut: the first 65536 of its " + std::to_string(sent.size()) +
                                " bytes are kept (provider.max_stored_body_bytes)]\n"));
  BOOST_TEST(body.size() < 64u * 1024 + 200);
}

BOOST_AUTO_TEST_CASE(a_retry_after_of_ten_years_waits_max_delay_ms) {
  const uint64_t ten_years_ms = 315'360'000'000;
  // As a header, in seconds, and in milliseconds past what a double holds exactly.
  server.push(MockReply{.status = 429, .headers = {"Retry-After: 315360000"}, .body = "{}"});
  server.push(MockReply{.status = 429, .headers = {"retry-after-ms: 1e400"}, .body = "{}"});
  server.push(
      MockReply{.status = 429, .headers = {"retry-after-ms: 99999999999999999999999999"}, .body = "{}"});
  auto provider = make("openai", options("openai"));
  Outcome years = attempt(*provider);
  Outcome not_a_number = attempt(*provider);
  Outcome huge = attempt(*provider);

  RetryConfig config;  // max_delay_ms 30000
  const ProviderFailure& f = years.reply.failure;
  BOOST_TEST(f.has_retry_after);
  BOOST_TEST(f.retry_after_ms == ten_years_ms);  // recorded as the server asked
  RetryDecision d = decide_retry(config, f, 1, 42, 1);
  BOOST_TEST(d.retry);
  BOOST_TEST(d.delay_ms == 30'000u);  // what is waited
  BOOST_TEST(!not_a_number.reply.failure.has_retry_after);
  BOOST_TEST(huge.reply.failure.has_retry_after);
  BOOST_TEST(decide_retry(config, huge.reply.failure, 1, 42, 1).delay_ms == 30'000u);
  // A shorter one still wins over the backoff.
  ProviderFailure short_wait{.http_status = 429, .has_retry_after = true, .retry_after_ms = 7};
  BOOST_TEST(decide_retry(config, short_wait, 1, 42, 1).delay_ms == 7u);
}

BOOST_AUTO_TEST_SUITE_END()

// A whole session over HTTP: the bound ends the run at the first attempt
// (permanent, so not retried), the failure recorded naming the key, and the
// home's body store keeps no more than provider.max_stored_body_bytes of it.
BOOST_DATA_TEST_CASE(a_session_against_an_endless_stream_fails_once_and_leaves_a_cut_body,
                     data::make(kFormats), format) {
  TempDir dir;
  MockLlmServer server;
  std::filesystem::create_directories(dir.sub("ws"));
  std::string piece;
  for (int i = 0; i < 64; ++i) piece += text_event(format, std::string(200, 'b'));
  server.set_handler([&](const MockRequest&, size_t) {
    return MockReply{.body = stream_head(format), .more = [piece](size_t) { return piece; }};
  });
  Config c;
  c.provider.name = format;
  c.provider.model = "test-model";
  c.provider.base_url = format == "openai" ? server.url() + "/v1" : server.url();
  c.provider.api_key_env = "CARAPACE_TEST_NO_KEY";
  c.provider.max_response_bytes = 4 << 20;
  c.provider.max_stored_body_bytes = 256 * 1024;
  c.provider.max_stream_ms = 20'000;
  c.retry.base_delay_ms = 10;
  c.retry.max_delay_ms = 20;
  c.workspace = dir.sub("ws");
  std::unique_ptr<Runtime> rt;
  CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = c, .builtin_tools = true}, &rt));
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.id = "s1", .task = "go"}, &id));
  SessionOutcome out;
  CHECK_OK(rt->wait(id, 60s, &out));
  BOOST_TEST((out.status == SessionStatus::kFailed));
  BOOST_TEST(contains(out.error, "provider.max_response_bytes (4194304)"), out.error);

  std::vector<Event> events;
  CHECK_OK(rt->read_events(id, 1, &events));
  std::vector<LlmFailed> failed;
  for (const auto& e : events) {
    if (const auto* f = get_if<LlmFailed>(e)) failed.push_back(*f);
  }
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST((failed[0].category == ErrorCategory::kPermanent));
  BOOST_TEST(!failed[0].will_retry);
  BOOST_TEST(server.request_count() == 1u);
  rt.reset();

  std::unique_ptr<BodyStore> store;
  CHECK_OK(BodyStore::open(dir.sub("home") + "/bodies", BodyStore::Mode::kReader, &store));
  std::vector<std::pair<std::string, uint64_t>> all;
  CHECK_OK(store->list(&all));
  BOOST_REQUIRE(all.size() == 2u);  // the request and what came of the response
  for (const auto& [ref, size] : all) BOOST_TEST(size <= 256u * 1024 + 200, ref << ": " << size << " bytes");
  std::string response;
  CHECK_OK(store->get(failed[0].body_ref, &response));
  BOOST_TEST(whole_size_of_cut(response) > (4u << 20));
  BOOST_TEST(whole_size_of_cut(response) < (5u << 20));
}
