// A server's Retry-After of ten years: the run waits retry.max_delay_ms, the
// llm.failed records both what was asked and what was chosen, and the run
// replays identically (the replay decides the same delay from the record).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "replay/replayer.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "runtime/session_setup.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(a_retry_after_of_ten_years_waits_max_delay_ms_and_replays_identically) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.sub("ws"));
  Config config;
  config.workspace = dir.sub("ws");
  config.retry.base_delay_ms = 10;
  config.retry.max_delay_ms = 100;
  config.provider.scenario = dir.sub("scenario.json");
  std::ofstream(config.provider.scenario) << R"({"replies": [
      {"error": {"status": 429, "retry_after_ms": 315360000000, "message": "come back in ten years"}},
      {"text": "Done."}]})";
  std::unique_ptr<Runtime> rt;
  CHECK_OK(Runtime::open(Runtime::Options{.home = dir.sub("home"), .config = config, .builtin_tools = true}, &rt));
  std::string id;
  CHECK_OK(rt->start_session(SessionOptions{.id = "s1", .task = "go"}, &id));
  SessionOutcome out;
  CHECK_OK(rt->wait(id, 20s, &out));  // not ten years
  BOOST_REQUIRE((out.status == SessionStatus::kCompleted));
  BOOST_TEST(out.final_answer == "Done.");

  std::vector<Event> events;
  CHECK_OK(rt->read_events(id, 1, &events));
  const LlmFailed* failed = nullptr;
  for (const auto& e : events) {
    if (const auto* f = get_if<LlmFailed>(e)) failed = f;
  }
  BOOST_REQUIRE(failed != nullptr);
  BOOST_TEST(failed->retry_after_ms == 315'360'000'000u);  // what the server asked
  BOOST_TEST(failed->retry_delay_ms == 100u);              // what was waited
  BOOST_TEST(failed->will_retry);

  ReplayOptions options{.tools = std::make_shared<ToolRegistry>(),
                        .hooks = std::make_shared<HookRegistry>(),
                        .settings = [&config](const SessionState& s) {
                          return session_settings(config, s.workspace, s.max_turns, s.instructions);
                        }};
  CHECK_OK(add_builtin_tools(config, nullptr, options.tools.get()));
  ReplayReport report;
  CHECK_OK(replay_session(runtime_log(*rt), id, options, &report));
  BOOST_TEST(report.identical(), "diverged at seq " << (report.divergence ? report.divergence->seq : 0));
  uint64_t last = 0;
  CHECK_OK(runtime_log(*rt).last_seq(id, &last));
  BOOST_TEST(report.events == last);
}
