// Whole sessions of the runtime over the HTTP providers, against a loopback
// server that plays a deterministic model (tests/support/fake_model.h):
// every attempt and retry delay recorded, every body captured byte for byte,
// tool calls and their results carried in each format, failures classified,
// and the API key (a canary in the environment) stored nowhere.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "events/fold.h"
#include "replay/fault_plan.h"
#include "runtime/runtime.h"
#include "storage/body_store.h"
#include "tests/support/fake_model.h"
#include "tests/support/home_scan.h"
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

const char* kCanaryEnv = "CARAPACE_TEST_CANARY_KEY";
const std::string kCanary = "sk-canary-7Qp2VxY9rT4mK8sL1nB6cD3fG5hJ0wZq";

struct SessionFixture {
  TempDir dir;
  MockLlmServer server;
  std::unique_ptr<Runtime> rt;
  std::mutex mu;
  std::vector<StreamDelta> deltas;

  SessionFixture() {
    ::setenv(kCanaryEnv, kCanary.c_str(), 1);
    ::unsetenv("OPENAI_BASE_URL");
    ::unsetenv("ANTHROPIC_BASE_URL");
    std::filesystem::create_directories(dir.sub("ws"));
  }

  Config config(const std::string& format) const {
    Config c;
    c.provider.name = format;
    c.provider.model = "test-model";
    c.provider.base_url = format == "openai" ? server.url() + "/v1" : server.url();
    c.provider.api_key_env = kCanaryEnv;
    c.provider.idle_timeout_ms = 2000;
    c.retry.base_delay_ms = 20;
    c.retry.max_delay_ms = 200;
    c.workspace = dir.sub("ws");
    return c;
  }

  void open(const std::string& format, std::shared_ptr<FaultInjector> faults = nullptr,
            uint64_t provider_timeout_ms = 0) {
    Config c = config(format);
    if (provider_timeout_ms) c.provider.timeout_ms = provider_timeout_ms;
    CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = c, .builtin_tools = true, .faults = faults}, &rt));
  }

  // Runs the fake model's session under a one-rule fault plan.
  SessionOutcome run_with_fault(const std::string& format, const std::string& rule, uint64_t provider_timeout_ms = 0) {
    std::shared_ptr<FaultPlan> plan;
    CHECK_OK(FaultPlan::parse(R"({"faults": [)" + rule + "]}", "test plan", &plan));
    server.set_handler([format](const MockRequest& r, size_t) { return FakeModel{.format = format}.reply(r); });
    open(format, plan, provider_timeout_ms);
    return run("f", "remember apples");
  }

  SessionOutcome run(const std::string& id, const std::string& task) {
    std::string sid;
    CHECK_OK(rt->start_session(SessionOptions{.id = id,
                                              .task = task,
                                              .on_delta =
                                                  [this](const StreamDelta& d) {
                                                    std::lock_guard lock(mu);
                                                    deltas.push_back(d);
                                                  }},
                               &sid));
    SessionOutcome out;
    CHECK_OK(rt->wait(sid, 60s, &out));
    return out;
  }

  std::vector<Event> events(const std::string& id) {
    std::vector<Event> out;
    CHECK_OK(rt->read_events(id, 1, &out));
    return out;
  }

  template <class T>
  std::vector<T> all(const std::vector<Event>& events) {
    std::vector<T> out;
    for (const auto& e : events) {
      if (const T* t = get_if<T>(e)) out.push_back(*t);
    }
    return out;
  }

  std::string stored(const std::string& ref) {
    std::unique_ptr<BodyStore> store;
    CHECK_OK(BodyStore::open(dir.sub("home") + "/bodies", BodyStore::Mode::kReader, &store));
    std::string body;
    CHECK_OK(store->get(ref, &body));
    return body;
  }

  // The key was sent to the server, and is nowhere under the home.
  void check_canary(const std::string& format) {
    for (const auto& r : server.requests()) {
      BOOST_TEST(r.header(format == "openai" ? "Authorization" : "x-api-key") ==
                 (format == "openai" ? "Bearer " + kCanary : kCanary));
    }
    HomeScan scan = scan_home(dir.sub("home"), kCanary);
    BOOST_TEST(scan.found.empty(), scan.found.front());
    BOOST_TEST(scan.databases.size() == 2u);  // the log and the bodies
    BOOST_TEST(scan.records > 20u);
    BOOST_TEST(scan.files > 10u);
  }
};

const std::vector<std::string> kFormats = {"openai", "anthropic"};

std::string error_body(const std::string& format, const std::string& type, const std::string& message) {
  return format == "openai" ? openai_error(message, type, type) : anthropic_error(type, message);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(http_session)

BOOST_DATA_TEST_CASE_F(SessionFixture, every_attempt_and_delay_is_recorded_and_every_body_captured,
                       data::make(kFormats), format) {
  // Three failures, then the model: a rate limit (echoing the key, as some
  // servers do), a connection dropped mid-stream, an overload (a 529 status
  // for openai, an in-stream overloaded_error for anthropic).
  server.push(MockReply{.status = 429,
                        .headers = {"Retry-After: 1"},
                        .body = error_body(format, "rate_limit_error", "Slow down, key " + kCanary)});
  std::string partial = format == "openai" ? openai_stream(WireAnswer{.text_pieces = {"Hel", "lo"}})
                                           : anthropic_stream(WireAnswer{.text_pieces = {"Hel", "lo"}});
  server.push(MockReply{.body = partial, .drop_after = static_cast<long>(partial.size() / 2)});
  if (format == "openai") {
    server.push(MockReply{.status = 529, .body = error_body(format, "server_error", "overloaded")});
  } else {
    server.push(MockReply{.body = "event: message_start\ndata: " +
                                  json{{"type", "message_start"}, {"message", {{"usage", {{"input_tokens", 5}}}}}}.dump() +
                                  "\n\nevent: error\ndata: " + anthropic_error("overloaded_error", "Overloaded") +
                                  "\n\n"});
  }
  FakeModel model{.format = format};
  server.set_handler([&model](const MockRequest& r, size_t) { return model.reply(r); });
  open(format);
  SessionOutcome out = run("s1", "remember apples");
  BOOST_REQUIRE_MESSAGE(out.status == SessionStatus::kCompleted, out.error);
  BOOST_TEST(out.final_answer == "Done: remember apples");

  std::vector<Event> log = events("s1");
  SessionState state;
  CHECK_OK(fold(log, &state));
  Config cfg = config(format);

  auto failed = all<LlmFailed>(log);
  BOOST_REQUIRE(failed.size() == 3u);
  BOOST_TEST(failed[0].http_status == 429u);
  BOOST_TEST((failed[0].category == ErrorCategory::kTransient));
  BOOST_TEST(failed[0].will_retry);
  BOOST_TEST(failed[0].retry_after_ms == 1000u);
  BOOST_TEST(failed[0].retry_delay_ms == 200u);  // Retry-After wins, up to retry.max_delay_ms
  BOOST_TEST(failed[0].error.find(kCanary) == std::string::npos);
  BOOST_TEST(failed[1].http_status == 0u);  // transport
  BOOST_TEST((failed[1].category == ErrorCategory::kTransient));
  BOOST_TEST(failed[1].retry_delay_ms ==
             decide_retry(cfg.retry, ProviderFailure{.transport = true}, 2, state.rng_seed, 1).delay_ms);
  BOOST_TEST(failed[2].http_status == 529u);
  BOOST_TEST((failed[2].category == ErrorCategory::kTransient));
  BOOST_TEST(failed[2].retry_delay_ms ==
             decide_retry(cfg.retry, ProviderFailure{.http_status = 529}, 3, state.rng_seed, 1).delay_ms);
  BOOST_TEST(failed[2].error.find("verloaded") != std::string::npos, failed[2].error);
  for (const auto& f : failed) {
    BOOST_TEST(f.attempt == (&f - failed.data()) + 1);
    BOOST_TEST(f.turn == 1u);
    BOOST_REQUIRE(!f.body_ref.empty());
    BOOST_TEST(stored(f.body_ref).find(kCanary) == std::string::npos);
  }
  BOOST_TEST(stored(failed[1].body_ref) == partial.substr(0, partial.size() / 2));

  // Every request is recorded, and its captured body is what the server got.
  auto requested = all<LlmRequested>(log);
  auto received = server.requests();
  BOOST_REQUIRE(requested.size() == 6u);
  BOOST_REQUIRE(received.size() == 6u);
  const uint32_t attempts[] = {1, 2, 3, 4, 1, 1};
  for (size_t i = 0; i < requested.size(); ++i) {
    BOOST_TEST(requested[i].attempt == attempts[i]);
    BOOST_REQUIRE(!requested[i].body_ref.empty());
    BOOST_TEST(stored(requested[i].body_ref) == received[i].body, "request " << i);
  }
  // A retry sends the same bytes, stored once.
  BOOST_TEST(requested[0].body_ref == requested[3].body_ref);

  auto responded = all<LlmResponded>(log);
  BOOST_REQUIRE(responded.size() == 3u);
  BOOST_TEST(responded[0].attempt == 4u);
  BOOST_REQUIRE(responded[0].tool_calls.size() == 2u);
  BOOST_TEST(responded[0].tool_calls[0].name == "write_file");
  BOOST_TEST(responded[0].tool_calls[0].args.text == R"({"path": "note.txt", "content": "remember apples"})");
  BOOST_TEST(responded[0].finish_reason == (format == "openai" ? "tool_calls" : "tool_use"));
  for (const auto& r : responded) {
    BOOST_TEST(r.usage.cache_read == 50u);
    BOOST_TEST(r.usage.output == 10u);
    BOOST_TEST(stored(r.body_ref).find(format == "openai" ? "data: [DONE]" : "event: message_stop") !=
               std::string::npos);
  }
  BOOST_TEST(responded[1].usage.input == 102u);
  BOOST_TEST(state.tokens.cache_read == 150u);

  // The tool results went back in the format's own shape.
  json second = json::parse(received[4].body);
  std::string write_id = responded[0].tool_calls[0].id, list_id = responded[0].tool_calls[1].id;
  if (format == "openai") {
    const json& m = second["messages"];
    BOOST_REQUIRE(m.size() == 5u);  // system, user, assistant, tool, tool
    BOOST_TEST(m[0]["role"] == "system");
    BOOST_TEST(m[2]["tool_calls"].size() == 2u);
    BOOST_TEST(m[3]["role"] == "tool");
    BOOST_TEST(m[3]["tool_call_id"] == write_id);
    BOOST_TEST(m[4]["role"] == "tool");
    BOOST_TEST(m[4]["tool_call_id"] == list_id);
  } else {
    const json& m = second["messages"];
    BOOST_REQUIRE(m.size() == 3u);  // user, assistant, ONE user with both results
    BOOST_TEST(second.contains("system"));
    BOOST_TEST(second["max_tokens"] == 4096);
    BOOST_TEST(m[2]["role"] == "user");
    BOOST_REQUIRE(m[2]["content"].size() == 2u);
    BOOST_TEST(m[2]["content"][0]["type"] == "tool_result");
    BOOST_TEST(m[2]["content"][0]["tool_use_id"] == write_id);
    BOOST_TEST(m[2]["content"][1]["tool_use_id"] == list_id);
  }

  // The answer streamed to the subscriber as it came.
  std::string streamed;
  {
    std::lock_guard lock(mu);
    for (const auto& d : deltas) {
      if (d.turn == 3) streamed += d.text;
    }
  }
  BOOST_TEST(streamed == "Done: remember apples");

  rt.reset();
  check_canary(format);
  // The bodies are compressed with zstd.
  bool zstd = false;
  for (const auto& f : std::filesystem::directory_iterator(dir.sub("home") + "/bodies")) {
    if (f.path().filename().string().rfind("OPTIONS-", 0) == 0) {
      std::ifstream in(f.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      zstd = zstd || text.find("compression=kZSTD") != std::string::npos;
    }
  }
  BOOST_TEST(zstd);
}

BOOST_DATA_TEST_CASE_F(SessionFixture, a_rejected_key_ends_the_turn_and_the_session_stays_usable,
                       data::make(kFormats), format) {
  server.push(MockReply{.status = 401,
                        .body = error_body(format, "authentication_error", "invalid key " + kCanary)});
  FakeModel model{.format = format};
  server.set_handler([&model](const MockRequest& r, size_t) { return model.reply(r); });
  open(format);
  SessionOutcome out = run("s2", "remember pears");
  BOOST_TEST((out.status == SessionStatus::kFailed));
  BOOST_TEST(out.error.find(std::string("$") + kCanaryEnv) != std::string::npos, out.error);
  BOOST_TEST(out.error.find(kCanary) == std::string::npos);
  auto failed = all<LlmFailed>(events("s2"));
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST((failed[0].category == ErrorCategory::kPermanent));
  BOOST_TEST(!failed[0].will_retry);
  BOOST_TEST(server.request_count() == 1u);
  // Another message runs again, and the model now answers.
  CHECK_OK(rt->send_message("s2", "remember pears"));
  CHECK_OK(rt->wait("s2", 60s, &out));
  BOOST_TEST((out.status == SessionStatus::kCompleted));
  BOOST_TEST(out.final_answer == "Done: remember pears");
  rt.reset();
  check_canary(format);
}

BOOST_DATA_TEST_CASE_F(SessionFixture, invalid_tool_arguments_become_a_tool_error_the_model_sees,
                       data::make(kFormats), format) {
  WireAnswer bad;
  bad.calls = {WireToolCall{.id = "call_bad", .name = "write_file", .arg_pieces = {"{\"path\": \"x.txt\", \"con"}}};
  server.push(MockReply{.body = format == "openai" ? openai_stream(bad) : anthropic_stream(bad)});
  FakeModel model{.format = format};
  server.set_handler([&model](const MockRequest& r, size_t) { return model.reply(r); });
  open(format);
  SessionOutcome out = run("s3", "write it");
  BOOST_REQUIRE_MESSAGE(out.status == SessionStatus::kCompleted, out.error);
  auto completed = all<ToolCompleted>(events("s3"));
  BOOST_REQUIRE(completed.size() == 1u);
  BOOST_TEST(completed[0].is_error);
  BOOST_TEST(completed[0].output.find("not a JSON object") != std::string::npos, completed[0].output);
  BOOST_TEST(!std::filesystem::exists(dir.sub("ws/x.txt")));
  // The model saw the error, and answered with it.
  BOOST_TEST(out.final_answer.find("not a JSON object") != std::string::npos, out.final_answer);
  auto received = server.requests();
  BOOST_REQUIRE(received.size() == 2u);
  BOOST_TEST(received[1].body.find("not a JSON object") != std::string::npos);
}

// Fault plans act on the HTTP providers as on the scripted one: one of each kind.

BOOST_FIXTURE_TEST_CASE(an_injected_error_fails_the_attempt_before_it_is_sent, SessionFixture) {
  SessionOutcome out = run_with_fault(
      "openai", R"({"point": "provider.before_request", "action": "error", "status": 503, "retry_after_ms": 30, "nth": 1})");
  BOOST_REQUIRE_MESSAGE(out.status == SessionStatus::kCompleted, out.error);
  std::vector<Event> log = events("f");
  auto failed = all<LlmFailed>(log);
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].http_status == 503u);
  BOOST_TEST(failed[0].retry_delay_ms == 30u);
  BOOST_TEST(!failed[0].provider_answered);
  auto faults = all<FaultInjected>(log);
  BOOST_REQUIRE(faults.size() == 1u);
  BOOST_TEST(faults[0].point == "provider.before_request");
  BOOST_TEST(faults[0].action == "error");
  BOOST_TEST(all<LlmRequested>(log).size() == 4u);
  BOOST_TEST(server.request_count() == 3u);  // the failed attempt never reached the server
}

BOOST_FIXTURE_TEST_CASE(an_injected_delay_holds_the_answer_back, SessionFixture) {
  auto start = std::chrono::steady_clock::now();
  SessionOutcome out = run_with_fault(
      "anthropic", R"({"point": "provider.after_response", "action": "delay", "delay_ms": 600, "nth": 2})");
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_REQUIRE_MESSAGE(out.status == SessionStatus::kCompleted, out.error);
  std::vector<Event> log = events("f");
  auto responded = all<LlmResponded>(log);
  BOOST_REQUIRE(responded.size() == 3u);
  BOOST_TEST(responded[1].latency_ms >= 600u);
  BOOST_TEST(responded[0].latency_ms < 600u);
  BOOST_TEST((took >= std::chrono::milliseconds(600)));
  BOOST_TEST(all<FaultInjected>(log).size() == 1u);
  BOOST_TEST(all<LlmFailed>(log).empty());
  BOOST_TEST(server.request_count() == 3u);
}

BOOST_FIXTURE_TEST_CASE(an_injected_hang_is_ended_by_the_provider_timeout, SessionFixture) {
  SessionOutcome out = run_with_fault(
      "openai", R"({"point": "provider.before_request", "action": "hang", "nth": 1})", /*provider_timeout_ms=*/400);
  BOOST_REQUIRE_MESSAGE(out.status == SessionStatus::kCompleted, out.error);
  std::vector<Event> log = events("f");
  auto failed = all<LlmFailed>(log);
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].http_status == 0u);
  BOOST_TEST(failed[0].error.find("no reply from the provider") != std::string::npos, failed[0].error);
  BOOST_TEST((failed[0].category == ErrorCategory::kTransient));
  BOOST_TEST(server.request_count() == 3u);
}

BOOST_FIXTURE_TEST_CASE(an_injected_malformed_stream_loses_a_real_answer, SessionFixture) {
  SessionOutcome out = run_with_fault(
      "anthropic", R"({"point": "provider.after_response", "action": "malformed_stream", "nth": 1})");
  BOOST_REQUIRE_MESSAGE(out.status == SessionStatus::kCompleted, out.error);
  std::vector<Event> log = events("f");
  auto failed = all<LlmFailed>(log);
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed[0].error.find("malformed") != std::string::npos, failed[0].error);
  BOOST_TEST((failed[0].category == ErrorCategory::kTransient));
  BOOST_TEST(failed[0].will_retry);
  auto received = server.requests();
  BOOST_REQUIRE(received.size() == 4u);  // the answer was received, then spoiled, then asked again
  BOOST_TEST(received[0].body == received[1].body);
  auto faults = all<FaultInjected>(log);
  BOOST_REQUIRE(faults.size() == 1u);
  BOOST_TEST(faults[0].action == "malformed_stream");
}

BOOST_AUTO_TEST_SUITE_END()
