// The Collector beside a real runtime: the shipped scenarios run on the
// scripted provider, their spans asserted exactly; what the collector stored
// equals what the builder makes from the log; a fork links to its parent;
// a full queue drops work without losing spans.
#define BOOST_TEST_MODULE collector_runtime_test
#include <boost/test/unit_test.hpp>

#include <map>

#include "actors/collector/collector.h"
#include "actors/collector/log_follower.h"
#include "actors/collector/span_builder.h"
#include "runtime/runtime.h"
#include "storage/event_log.h"
#include "storage/trace_store.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  testing::TempDir dir;
  std::string home = dir.sub("home");
  std::shared_ptr<Collector> collector;
  std::unique_ptr<Runtime> rt;

  void open(const std::string& scenario, CollectorOptions copts = {}, Config config = {}) {
    std::filesystem::create_directories(home);
    std::filesystem::create_directories(dir.sub("ws"));
    copts.home = home;
    CHECK_OK(Collector::start(copts, &collector));
    config.provider.scenario = std::string(PROJECT_DIR) + "/examples/scenarios/" + scenario;
    config.workspace = dir.sub("ws");
    Runtime::Options options{.home = home, .config = config, .builtin_tools = true};
    options.observe = collector->observer();
    CHECK_OK(Runtime::open(std::move(options), &rt));
  }

  std::string run(const std::string& id, const std::string& task) {
    std::string sid;
    CHECK_OK(rt->start_session(SessionOptions{.id = id, .task = task}, &sid));
    SessionOutcome out;
    CHECK_OK(rt->wait(sid, 60s, &out));
    return sid;
  }

  // Stops the runtime and the collector; then the stored spans of `id`,
  // checked against the spans built from the log.
  std::vector<Span> stored(const std::string& id) {
    rt.reset();
    CHECK_OK(collector->flush());
    collector.reset();
    return stored_after_stop(id);
  }

  std::vector<Span> stored_after_stop(const std::string& id) {
    std::unique_ptr<TraceStore> store;
    CHECK_OK(TraceStore::open(home + "/traces", TraceStore::Mode::kReader, &store));
    std::vector<std::string> values;
    CHECK_OK(store->spans_of(id, &values));
    std::vector<Span> spans;
    for (const auto& v : values) {
      Span s;
      CHECK_OK(span_from_json(nlohmann::json::parse(v), &s));
      spans.push_back(std::move(s));
    }
    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = home + "/log", .mode = EventLog::Mode::kReader}, &log));
    std::vector<Event> events;
    CHECK_OK(log->read(id, 1, UINT64_MAX, &events));
    auto built = build_spans(id, events);
    BOOST_TEST(spans.size() == built.size());
    // The same spans, stored in (open_seq, id) order.
    std::map<std::string, Span> by_id;
    for (const auto& s : built) by_id[s.span_id] = s;
    for (const auto& s : spans) BOOST_TEST((by_id[s.span_id] == s), s.name);
    TraceProgress p;
    CHECK_OK(store->progress(id, &p));
    BOOST_TEST(p.last_seq == events.back().seq);
    return built;
  }
};

std::string tree(const std::vector<Span>& spans) {
  std::map<std::string, std::string> names;
  std::string out;
  for (const auto& s : spans) {
    names[s.span_id] = s.name;
    out += s.name + " <- " + (s.parent_id.empty() ? "-" : names[s.parent_id]) + " [" + s.status + "]\n";
  }
  return out;
}

const Span& find(const std::vector<Span>& spans, const std::string& name, int nth = 0) {
  for (const auto& s : spans) {
    if (s.name == name && nth-- == 0) return s;
  }
  BOOST_FAIL("no span named " << name);
  return spans.front();
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(collector, Fixture)

BOOST_AUTO_TEST_CASE(quickstart_gives_this_tree_and_the_store_holds_it) {
  open("quickstart.json");
  run("q", "Write a note");
  auto spans = stored("q");
  BOOST_TEST(tree(spans) ==
             "session q <- - [completed]\n"
             "turn 1 <- session q [ok]\n"
             "llm attempt 1 <- turn 1 [ok]\n"
             "tool list_dir <- turn 1 [ok]\n"
             "turn 2 <- session q [ok]\n"
             "llm attempt 1 <- turn 2 [error]\n"
             "llm attempt 2 <- turn 2 [ok]\n"
             "tool write_file <- turn 2 [ok]\n"
             "tool shell <- turn 2 [ok]\n"
             "turn 3 <- session q [ok]\n"
             "llm attempt 1 <- turn 3 [ok]\n");
  const Span& root = spans[0];
  BOOST_TEST(root.attrs["stop_reason"] == "final_answer");
  BOOST_TEST(root.attrs["turns"] == 3);
  BOOST_TEST(root.attrs["retries"] == 1);
  BOOST_TEST(root.attrs["tool_calls"] == 3);
  BOOST_TEST(root.attrs["model"] == "scripted-1");
  BOOST_TEST(root.attrs["tools_offered"] == "shell,read_file,write_file,list_dir");
  const Span& retried = find(spans, "llm attempt 1", 1);
  BOOST_TEST(retried.attrs["http_status"] == 429);
  BOOST_TEST(retried.attrs["retry_after_ms"] == 300);
  BOOST_TEST(retried.attrs["will_retry"] == true);
  BOOST_TEST(find(spans, "llm attempt 2").attrs["tool_names"] == "write_file,shell");
  BOOST_TEST(find(spans, "tool shell").attrs["is_error"] == false);
  for (const auto& s : spans) BOOST_TEST(s.links.empty());
}

// The collector in the runtime's process and `carapace collector` in
// another (following the log) store the same spans: ids, tree, attributes.
BOOST_AUTO_TEST_CASE(the_collector_out_of_process_stores_the_same_spans_as_the_one_in_process) {
  open("demo.json");
  run("d", "Tidy the workspace");
  CHECK_OK(rt->fork_session("d", 1, Runtime::ForkOptions{.id = "f", .task = "again"}, nullptr));
  SessionOutcome out;
  CHECK_OK(rt->wait("f", 60s, &out));
  std::map<std::string, std::vector<std::string>> in_process;
  rt.reset();
  CHECK_OK(collector->flush());
  collector.reset();
  auto values_of = [&](const std::string& id) {
    std::unique_ptr<TraceStore> store;
    CHECK_OK(TraceStore::open(home + "/traces", TraceStore::Mode::kReader, &store));
    std::vector<std::string> values;
    CHECK_OK(store->spans_of(id, &values));
    return values;
  };
  for (const std::string id : {"d", "f"}) in_process[id] = values_of(id);
  BOOST_REQUIRE(in_process["d"].size() > 10u);

  std::filesystem::remove_all(home + "/traces");
  {
    std::unique_ptr<LogFollower> follower;
    CHECK_OK(LogFollower::open(home, &follower));
    FollowReport report;
    CHECK_OK(follower->poll(&report));
    BOOST_TEST(report.crashed.empty());
  }
  for (const std::string id : {"d", "f"}) {
    std::vector<std::string> followed = values_of(id);
    BOOST_REQUIRE(followed.size() == in_process[id].size());
    for (size_t i = 0; i < followed.size(); ++i) BOOST_TEST(followed[i] == in_process[id][i], id << " span " << i);
  }
}

BOOST_AUTO_TEST_CASE(embed_gives_a_denied_call_with_its_hook_as_child) {
  Config config;
  config.tools_enabled = {};
  open("embed.json", {}, config);
  CHECK_OK(rt->register_tool(ToolDefinition{
      .spec = {.name = "add", .description = "Adds a and b.", .schema = JsonText{R"({"type":"object"})"}},
      .blocking = false,
      .run = [](const nlohmann::json& args, const ToolContext&) {
        return ToolResult{.output = std::to_string(args["a"].get<long>() + args["b"].get<long>())};
      }}));
  CHECK_OK(rt->register_hook(HookDefinition{
      .name = "no-negatives",
      .event = HookEvent::kPreToolUse,
      .matcher = "^add$",
      .function = [](const HookInput& in) {
        auto args = nlohmann::json::parse(in.args.text);
        bool negative = args.value("a", 0) < 0 || args.value("b", 0) < 0;
        return HookDecision{.decision = negative ? Decision::kDeny : Decision::kAllow,
                            .reason = negative ? "negative numbers are not allowed" : ""};
      }}));
  run("e", "Add 2 and 3, then try -1 and 1.");
  auto spans = stored("e");
  BOOST_TEST(tree(spans) ==
             "session e <- - [completed]\n"
             "turn 1 <- session e [ok]\n"
             "llm attempt 1 <- turn 1 [ok]\n"
             "tool add <- turn 1 [ok]\n"
             "hook PreToolUse no-negatives <- tool add [ok]\n"
             "turn 2 <- session e [ok]\n"
             "llm attempt 1 <- turn 2 [ok]\n"
             "tool add <- turn 2 [denied]\n"
             "hook PreToolUse no-negatives <- tool add [denied]\n"
             "turn 3 <- session e [ok]\n"
             "llm attempt 1 <- turn 3 [ok]\n");
  const Span& denied = find(spans, "tool add", 1);
  BOOST_TEST(denied.attrs["denied_by"] == "no-negatives");
  BOOST_TEST(find(spans, "hook PreToolUse no-negatives", 1).attrs["reason"] == "negative numbers are not allowed");
  BOOST_TEST(find(spans, "tool add").attrs["args"] == R"({"a":2,"b":3})");
}

BOOST_AUTO_TEST_CASE(a_fork_links_to_its_parents_turn_span_and_the_collector_builds_it_from_the_log) {
  open("quickstart.json");
  run("p", "Write a note");
  std::string fork;
  CHECK_OK(rt->fork_session("p", 2, Runtime::ForkOptions{.id = "f", .task = "Again"}, &fork));
  SessionOutcome out;
  CHECK_OK(rt->wait("f", 60s, &out));
  rt.reset();
  CHECK_OK(collector->flush());
  collector.reset();
  auto parent = stored_after_stop("p");
  auto spans = stored_after_stop("f");
  BOOST_REQUIRE(spans[0].links.size() == 1u);
  const SpanLink& link = spans[0].links[0];
  const Span& parent_turn2 = find(parent, "turn 2");
  BOOST_TEST(link.reason == "fork");
  BOOST_TEST(link.session == "p");
  BOOST_TEST(link.trace_id == parent_turn2.trace_id);
  BOOST_TEST(link.span_id == parent_turn2.span_id);
  BOOST_TEST(find(spans, "turn 2").attrs["copied_from_parent"] == true);
  BOOST_TEST(!find(spans, "turn 3").attrs.contains("copied_from_parent"));
}

BOOST_AUTO_TEST_CASE(a_full_queue_drops_and_counts_work_and_the_spans_are_still_whole) {
  open("quickstart.json", CollectorOptions{.queue_capacity = 1, .batch_events = 1000, .flush_interval = 10s});
  run("d", "Write a note");
  rt.reset();
  const uint64_t dropped = collector->dropped();
  CHECK_OK(collector->flush());
  collector.reset();
  BOOST_TEST(dropped > 0u);  // 28 events through a queue of one, no flush in between
  auto spans = stored_after_stop("d");  // equal to the log's, gaps filled from it
  std::unique_ptr<TraceStore> store;
  CHECK_OK(TraceStore::open(home + "/traces", TraceStore::Mode::kReader, &store));
  TraceProgress p;
  CHECK_OK(store->progress("d", &p));
  BOOST_TEST(p.dropped == dropped);
  BOOST_TEST(spans[0].status == "completed");
}

BOOST_AUTO_TEST_SUITE_END()
