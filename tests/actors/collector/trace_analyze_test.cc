// analyze_trace on sessions built to show one pattern each, and on a clean one.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <sstream>

#include "actors/collector/span_builder.h"
#include "actors/collector/trace_analyze.h"
#include "actors/collector/trace_stats.h"
#include "actors/collector/trace_view.h"
#include "tests/support/session_builder.h"

using namespace carapace;
using carapace::testing::SessionBuilder;

namespace {

// The patterns found, one "pattern@seq,seq" each.
std::vector<std::string> found(const SessionBuilder& b) {
  std::vector<std::string> out;
  for (const auto& f : analyze_trace(build_spans("s1", b.events()))) {
    std::string seqs;
    for (uint64_t q : f.seqs) seqs += (seqs.empty() ? "" : ",") + std::to_string(q);
    out.push_back(f.pattern + "@" + seqs);
  }
  return out;
}

SessionBuilder& configured(SessionBuilder& b, const std::string& tools) {
  return b.add(SessionConfigured{.config = JsonText{"{}"}, .tools = JsonText{tools}, .origin = "start"});
}

void call(SessionBuilder& b, uint64_t turn, const std::string& id, const std::string& tool, const std::string& args,
          ToolCompleted done) {
  b.add(TurnStarted{turn});
  b.add(LlmRequested{.turn = turn, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = turn, .attempt = 1, .tool_calls = {{id, tool, JsonText{args}}}});
  b.add(ToolRequested{id, tool, JsonText{args}});
  done.call_id = id;
  done.tool = tool;
  b.add(std::move(done));
  b.commit();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_analyze)

BOOST_AUTO_TEST_CASE(a_clean_session_shows_nothing) {
  SessionBuilder b;
  b.start();
  configured(b, R"([{"name":"shell"},{"name":"read_file"}])");
  call(b, 1, "c1", "shell", R"({"command":"ls"})", {.output = "a b"});
  call(b, 2, "c2", "read_file", R"({"path":"a"})", {.output = "text"});
  BOOST_TEST(found(b).empty());
}

BOOST_AUTO_TEST_CASE(each_pattern_is_found_with_the_seqs_that_show_it) {
  SessionBuilder b;
  b.start();
  configured(b, R"([{"name":"shell"},{"name":"read_file"},{"name":"glob"}])");  // seq 4
  // Turn 1: the model call fails twice and is retried (seqs 7, 9).
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmFailed{.turn = 1, .attempt = 1, .http_status = 503, .will_retry = true});
  b.add(LlmRequested{.turn = 1, .attempt = 2, .model = "m1"});
  b.add(LlmFailed{.turn = 1, .attempt = 2, .http_status = 503, .will_retry = true});
  b.add(LlmRequested{.turn = 1, .attempt = 3, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 3, .text = "hi"});
  b.commit();  // 12
  // Turns 2, 3: the same failing read twice (requested at 16 and 22; completed at 17, 23).
  call(b, 2, "c2", "read_file", R"({"path":"x"})", {.output = "no such file", .is_error = true});
  call(b, 3, "c3", "read_file", R"({"path":"x"})", {.output = "no such file", .is_error = true});
  // Turn 4: truncated output (completed at 29), then a trim (32).
  call(b, 4, "c4", "shell", R"({"command":"cat big"})",
       {.output = "...", .truncated = true, .original_bytes = 90000, .kept_bytes = 30000});
  b.add(TurnStarted{5});  // 31
  b.add(ContextTrimmed{.first_index = 1, .messages_removed = 4, .chars_before = 9000, .chars_after = 3000});  // 32
  // The model asks for two calls; one never runs (responded at 34).
  b.add(LlmRequested{.turn = 5, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = 5, .attempt = 1,
                     .tool_calls = {{"c5", "shell", JsonText{"{}"}}, {"c6", "shell", JsonText{"{}"}}}});
  b.add(ToolRequested{"c5", "shell", JsonText{"{}"}});  // 35: no result
  b.add(SessionCompleted{"", "max_turns"});              // 36
  std::vector<std::string> expected = {"retry_loop@7,9",
                                       "truncated_output@29",
                                       "tool_call_without_result@35",
                                       "repeated_tool_call@16,22",
                                       "tool_call_without_result@34",
                                       "failing_tool@17,23",
                                       "context_trimmed@32",
                                       "unused_tools@4",
                                       "max_turns@36"};
  BOOST_TEST(found(b) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_crash_is_found_and_the_interrupted_call_is_not_a_repeat) {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 1, .tool_calls = {{"c1", "shell", JsonText{"{}"}}}});
  b.add(ToolRequested{"c1", "shell", JsonText{"{}"}});  // 7
  b.add(SessionResumed{.checkpoint_seq = 3, .mode = "step"});  // 8
  b.add(ToolCompleted{.call_id = "c1", .tool = "shell", .is_error = true, .interrupted = true});
  b.commit();
  call(b, 2, "c2", "shell", "{}", {.output = "ok"});
  BOOST_TEST(found(b) == std::vector<std::string>{"crashed@7,8"}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(stats_sum_tokens_and_rank_latencies) {
  SessionBuilder b;
  b.start().turn({"shell"}).turn({"shell", "read_file"});
  auto stats = trace_stats({build_spans("s1", b.events())}, StatsOptions{.group_by = "tool"});
  const auto& t = stats["totals"];
  BOOST_TEST(t["turns"] == 2);
  BOOST_TEST(t["model_calls"] == 2);
  BOOST_TEST(t["tokens_in"] == 200);
  BOOST_TEST(t["cache_read"] == 100);
  BOOST_TEST(t["tool_calls"] == 3);
  BOOST_TEST(t["tools"]["shell"]["calls"] == 2);
  BOOST_TEST(stats["groups"].size() == 2u);
  BOOST_TEST(stats["groups"][0]["key"] == "read_file");
  BOOST_TEST(percentile({5, 1, 4, 2, 3}, 50) == 3u);
  BOOST_TEST(percentile({5, 1, 4, 2, 3}, 99) == 5u);
  BOOST_TEST(percentile({}, 95) == 0u);
}

BOOST_AUTO_TEST_CASE(the_skeleton_of_a_hundred_clean_turns_fits_a_screen) {
  SessionBuilder b;
  b.start();
  for (int i = 0; i < 100; ++i) b.turn({"shell"});
  auto spans = build_spans("s1", b.events());
  std::string text = render_skeleton(spans, {});
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  BOOST_TEST(lines == 5u, text);  // the session (2 lines), turn 1, turns 2-99, turn 100
  BOOST_TEST(text.find("98 more turns, all ok, each llm → shell") != std::string::npos, text);
  std::string full = render_skeleton(spans, {.full = true});
  BOOST_TEST(static_cast<size_t>(std::count(full.begin(), full.end(), '\n')) == 2u + 100u * 3u);
  // Dropped work and a crash the out-of-process collector saw are said in the header.
  std::vector<Span> open_spans = spans;
  open_spans[0].close_seq = 0;
  open_spans[0].status = "open";
  std::string warned = render_skeleton(open_spans, {.dropped_events = 3, .crashed_after_seq = 42});
  BOOST_TEST(warned.find("CRASHED after seq 42") != std::string::npos, warned);
  BOOST_TEST(warned.find("WARNING: the collector dropped 3 events of this session") != std::string::npos, warned);
  bool ambiguous = false;
  BOOST_TEST(find_span(spans, "4", &ambiguous) == 1);
  BOOST_TEST(find_span(spans, spans[2].span_id.substr(0, 8), &ambiguous) == 2);
  BOOST_TEST(find_span(spans, "99999", &ambiguous) == -1);
  // The same lines as data, for the trace view of the page and the HTML export.
  nlohmann::json items = skeleton_json(spans);
  BOOST_TEST(items.size() == 3u, items.dump());
  BOOST_TEST(items[0] == (nlohmann::json{{"show", "compact"}, {"span", spans[1].span_id}, {"steps", "llm → shell"}}));
  BOOST_TEST(items[1]["show"] == "fold");
  BOOST_TEST(items[1]["count"] == 98);
  BOOST_TEST(items[1]["text"].get<std::string>().find("98 more turns, all ok, each llm → shell") != std::string::npos);
  BOOST_TEST(items[1]["first"] == spans[4].span_id);  // turn 2, after turn 1's llm and tool
  BOOST_TEST(items[2]["show"] == "compact");
}

BOOST_AUTO_TEST_CASE(the_skeleton_of_ten_thousand_turns_with_errors_in_half_still_fits_a_screen_or_two) {
  SessionBuilder b;
  b.start();
  for (uint64_t turn = 1; turn <= 10'000; ++turn) {
    call(b, turn, "c" + std::to_string(turn), "shell", "{}",
         ToolCompleted{.output = "x", .is_error = turn % 2 == 0});
  }
  auto spans = build_spans("s1", b.events());
  std::string text = render_skeleton(spans, {});
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  BOOST_TEST(lines < 200u, lines);
  BOOST_TEST(text.find("turns 26-9975: 9950 turns not shown, 4975 of them with an error") != std::string::npos, text);
  BOOST_TEST(text.find("turn 10000 ") != std::string::npos, text);  // the last ones are there
  // As data: one item per line under the header, the middle one fold holding the items it stands for.
  std::vector<SkeletonItem> items = skeleton_items(spans);
  size_t shown_lines = 0, middle = 0;
  std::function<size_t(const std::vector<SkeletonItem>&)> count_lines = [&](const std::vector<SkeletonItem>& list) {
    size_t n = 0;
    for (const auto& it : list) {
      // A whole turn here is its line, its llm line and its tool line (no hooks, no events).
      n += it.show == SkeletonItem::Show::kWhole ? 3 : 1;
    }
    return n;
  };
  shown_lines = count_lines(items);
  for (const auto& it : items) {
    if (!it.items.empty()) middle = it.count;
  }
  BOOST_TEST(shown_lines + 2 == lines, text);  // + the header's two lines
  BOOST_TEST(middle == 9950u);
  std::string full = render_skeleton(spans, {.full = true});
  BOOST_TEST(static_cast<size_t>(std::count(full.begin(), full.end(), '\n')) > 30'000u);
}

// A hook on a tool call opens the tool's span and its own at one seq: both
// handles name their kind. The view finds that out of spans in any order
// (it reads neighbours when they are in open order, as a builder and the
// trace store give them, and a table of seqs otherwise).
BOOST_AUTO_TEST_CASE(handles_name_the_kind_where_spans_share_a_seq_in_any_order) {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = 1, .attempt = 1, .tool_calls = {{"c1", "shell", JsonText{"{}"}}}});
  b.add(HookDecided{
      .hook_event = "PreToolUse", .hook_name = "guard", .decision = "allow", .tool_call_id = "c1"});
  const uint64_t shared = b.events().back().seq;
  b.add(ToolRequested{"c1", "shell", JsonText{"{}"}});
  b.add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "x"});
  b.commit();
  auto spans = build_spans("s1", b.events());
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::string full = render_skeleton(spans, {.full = true});
  BOOST_TEST(full.find(std::to_string(shared) + ":hook") != std::string::npos, full);
  BOOST_TEST(full.find(std::to_string(shared) + ":tool") == std::string::npos, full);  // opened first
  // The tool's span right after the root: still before the hook's, no longer its neighbour.
  auto tool = std::find_if(spans.begin(), spans.end(), [](const Span& sp) { return sp.kind == kSpanTool; });
  BOOST_REQUIRE(tool != spans.end());
  BOOST_REQUIRE(tool + 1 != spans.end());
  BOOST_REQUIRE(tool[1].kind == std::string(kSpanHook));
  std::rotate(spans.begin() + 1, tool, tool + 1);
  BOOST_TEST(lines(render_skeleton(spans, {.full = true})) == lines(full),
             render_skeleton(spans, {.full = true}));
}

BOOST_AUTO_TEST_SUITE_END()
