// The exporters on hand-made traces: OTLP's tree, ids, times and GenAI
// attributes; Perfetto's trace-event rules, tracks, instants and flows;
// hostile span names escaped in HTML and Markdown; JSON and NDJSON whole.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "actors/collector/export.h"
#include "actors/collector/export_content.h"
#include "actors/collector/export_html.h"
#include "actors/collector/export_json.h"
#include "actors/collector/export_markdown.h"
#include "actors/collector/export_otlp.h"
#include "actors/collector/export_perfetto.h"
#include "actors/collector/span_builder.h"
#include "tests/support/session_builder.h"
#include "tests/support/trace_events_check.h"

using namespace carapace;
using carapace::testing::SessionBuilder;
using nlohmann::json;

namespace {

const char* kHostile = "</script><img src=x onerror=alert(1)>|*[x](javascript:1)`\n# &amp;";

// A session with a retried model call, two tool calls (one of them with a
// hostile name), a crash and a resume.
std::vector<Event> session_events() {
  SessionBuilder b;
  b.start();
  b.add(TurnStarted{1});
  b.add(LlmRequested{.turn = 1, .attempt = 1, .model = "m1"});
  b.add(LlmFailed{.turn = 1, .attempt = 1, .http_status = 503, .error = "overloaded SECRET-42",
                  .category = ErrorCategory::kTransient, .will_retry = true, .retry_delay_ms = 250});
  b.add(LlmRequested{.turn = 1, .attempt = 2, .model = "m1", .body_ref = "req1"});
  b.add(LlmResponded{.turn = 1, .attempt = 2, .text = "on it",
                     .tool_calls = {{"c1", "shell", JsonText{R"({"command":"ls"})"}},
                                    {"c2", kHostile, JsonText{"{}"}}},
                     .finish_reason = "tool_calls", .usage = {100, 20, 50, 7}, .cost_usd = 0.01,
                     .body_ref = "resp1"});
  b.add(ToolRequested{"c1", "shell", JsonText{R"({"command":"ls"})"}});
  b.add(ToolCompleted{.call_id = "c1", .tool = "shell", .output = "a.txt", .duration_ms = 3});
  b.add(ToolRequested{"c2", kHostile, JsonText{"{}"}});
  b.add(ToolCompleted{.call_id = "c2", .tool = kHostile, .output = "no such tool", .is_error = true});
  b.commit();
  b.add(TurnStarted{2});
  b.add(LlmRequested{.turn = 2, .attempt = 1, .model = "m1"});
  b.add(SessionResumed{.checkpoint_seq = 3, .checkpoint_turn = 1, .mode = "step", .pid = 42});
  b.add(LlmRequested{.turn = 2, .attempt = 1, .model = "m1"});
  b.add(LlmResponded{.turn = 2, .attempt = 1, .text = "done", .finish_reason = "stop", .usage = {120, 5, 0, 0}});
  b.commit();
  b.add(SessionCompleted{"done", "final_answer"});
  return b.events();
}

ExportInput input_of(const std::vector<Event>& events) {
  ExportInput in;
  in.traces.push_back(build_spans("s1", events));
  in.service_version = "9.9.9";
  in.bodies["resp1"] =
      "data: {\"id\":\"chatcmpl-77\",\"model\":\"gpt-test-2025\",\"choices\":[]}\n\ndata: [DONE]\n\n";
  in.bodies["req1"] = R"({"model":"m1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"list SECRET-42"}]})";
  in.redact = [](std::string text) {
    for (size_t at; (at = text.find("SECRET-42")) != std::string::npos;) text.replace(at, 9, "[masked]");
    return text;
  };
  return in;
}

std::map<std::string, json> attrs_of(const json& span) {
  std::map<std::string, json> out;
  for (const auto& a : span["attributes"]) out[a["key"].get<std::string>()] = a["value"];
  return out;
}

const json& otlp_span(const json& spans, const std::string& name, int nth = 0) {
  for (const auto& s : spans) {
    if (s["name"] == name && nth-- == 0) return s;
  }
  BOOST_FAIL("no OTLP span " << name);
  return spans[0];
}

const Span& span_named(const std::vector<Span>& spans, const std::string& name, int nth = 0) {
  for (const auto& s : spans) {
    if (s.name == name && nth-- == 0) return s;
  }
  BOOST_FAIL("no span " << name);
  return spans[0];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_export)

BOOST_AUTO_TEST_CASE(otlp_has_the_tree_ids_times_and_genai_attributes) {
  const auto events = session_events();
  ExportInput in = input_of(events);
  const auto& spans = in.traces[0];
  json req = json::parse(export_otlp(in));
  const json& rs = req["resourceSpans"][0];
  auto res = attrs_of(rs["resource"]);
  BOOST_TEST(res["service.name"] == json({{"stringValue", "carapace"}}));
  BOOST_TEST(res["service.version"] == json({{"stringValue", "9.9.9"}}));
  const json& out = rs["scopeSpans"][0]["spans"];
  BOOST_REQUIRE(out.size() == spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    BOOST_TEST(out[i]["traceId"] == spans[i].trace_id);
    BOOST_TEST(out[i]["spanId"] == spans[i].span_id);
    BOOST_TEST(out[i].contains("parentSpanId") == !spans[i].parent_id.empty());
    if (!spans[i].parent_id.empty()) BOOST_TEST(out[i]["parentSpanId"] == spans[i].parent_id);
    BOOST_TEST(out[i]["startTimeUnixNano"] == std::to_string(spans[i].start_us * 1000));
    BOOST_TEST(out[i]["startTimeUnixNano"].is_string());
    for (char c : out[i]["traceId"].get<std::string>()) BOOST_TEST(((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')));
  }
  BOOST_TEST(out[0]["traceId"].get<std::string>().size() == 32u);
  BOOST_TEST(out[0]["spanId"].get<std::string>().size() == 16u);

  const json& root = otlp_span(out, "invoke_agent test");
  auto ra = attrs_of(root);
  BOOST_TEST(root["kind"] == kOtlpKindInternal);
  BOOST_TEST(!root.contains("parentSpanId"));
  BOOST_TEST(ra["gen_ai.operation.name"] == json({{"stringValue", "invoke_agent"}}));
  BOOST_TEST(ra["gen_ai.agent.name"] == json({{"stringValue", "test"}}));
  BOOST_TEST(ra["gen_ai.provider.name"] == json({{"stringValue", "scripted"}}));
  BOOST_TEST(ra["gen_ai.conversation.id"] == json({{"stringValue", "s1"}}));
  BOOST_TEST(ra["gen_ai.usage.input_tokens"] == json({{"intValue", "220"}}));
  BOOST_TEST(root["status"] == json({{"code", kOtlpStatusOk}}));
  BOOST_TEST(root["endTimeUnixNano"] == std::to_string(spans[0].end_us * 1000));

  const json& failed = otlp_span(out, "chat m1", 0);
  BOOST_TEST(failed["kind"] == kOtlpKindClient);
  BOOST_TEST(failed["status"]["code"] == kOtlpStatusError);
  BOOST_TEST(failed["status"]["message"] == "error: HTTP 503: overloaded [masked]");
  BOOST_TEST(attrs_of(failed)["error.type"] == json({{"stringValue", "503"}}));
  BOOST_TEST(attrs_of(failed)["carapace.will_retry"] == json({{"boolValue", true}}));
  BOOST_TEST(failed["parentSpanId"] == span_named(spans, "turn 1").span_id);

  const json& chat = otlp_span(out, "chat m1", 1);
  auto ca = attrs_of(chat);
  BOOST_TEST(ca["gen_ai.operation.name"] == json({{"stringValue", "chat"}}));
  BOOST_TEST(ca["gen_ai.request.model"] == json({{"stringValue", "m1"}}));
  BOOST_TEST(ca["gen_ai.response.model"] == json({{"stringValue", "gpt-test-2025"}}));
  BOOST_TEST(ca["gen_ai.response.id"] == json({{"stringValue", "chatcmpl-77"}}));
  BOOST_TEST(ca["gen_ai.response.finish_reasons"] ==
             json({{"arrayValue", {{"values", json::array({{{"stringValue", "tool_calls"}}})}}}}));
  BOOST_TEST(ca["gen_ai.usage.input_tokens"] == json({{"intValue", "100"}}));
  BOOST_TEST(ca["gen_ai.usage.output_tokens"] == json({{"intValue", "20"}}));
  BOOST_TEST(ca["gen_ai.usage.cache_read.input_tokens"] == json({{"intValue", "50"}}));
  BOOST_TEST(ca["gen_ai.usage.cache_creation.input_tokens"] == json({{"intValue", "7"}}));
  BOOST_TEST(ca["carapace.cost_usd"] == json({{"doubleValue", 0.01}}));
  BOOST_TEST(ca["carapace.response_body"] == json({{"stringValue", "resp1"}}));
  BOOST_TEST(!ca.count("gen_ai.input.messages"));  // content only on request
  BOOST_TEST(!ca.count("gen_ai.output.messages"));

  const json& tool = otlp_span(out, "execute_tool shell");
  auto ta = attrs_of(tool);
  BOOST_TEST(ta["gen_ai.tool.name"] == json({{"stringValue", "shell"}}));
  BOOST_TEST(ta["gen_ai.tool.call.id"] == json({{"stringValue", "c1"}}));
  BOOST_TEST(ta["gen_ai.tool.type"] == json({{"stringValue", "function"}}));
  BOOST_TEST(tool["kind"] == kOtlpKindInternal);
  BOOST_TEST(tool["status"]["code"] == kOtlpStatusOk);
  BOOST_TEST(attrs_of(otlp_span(out, std::string("execute_tool ") + kHostile))["error.type"] ==
             json({{"stringValue", "tool_error"}}));

  // The resume links to the model call the crash cut short; that call is an error.
  const json& resume = otlp_span(out, "resume (step)");
  BOOST_REQUIRE(resume["links"].size() == 1u);
  const json& cut = otlp_span(out, "chat m1", 2);
  BOOST_TEST(resume["links"][0]["spanId"] == cut["spanId"]);
  BOOST_TEST(resume["links"][0]["traceId"] == cut["traceId"]);
  BOOST_TEST(cut["status"]["code"] == kOtlpStatusError);
  BOOST_TEST(attrs_of(cut)["error.type"] == json({{"stringValue", "crashed"}}));
  BOOST_TEST(cut["events"][0]["name"] == "crash");
  BOOST_TEST(cut["events"][0]["timeUnixNano"].is_string());
}

BOOST_AUTO_TEST_CASE(an_open_span_ends_at_the_last_event_of_its_session) {
  auto events = session_events();
  events.resize(15);  // stops in the middle of turn 2's model call: the session, the turn and the call are open
  ExportInput in = input_of(events);
  BOOST_REQUIRE(in.traces[0][0].open());
  json out = otlp_request(in)["resourceSpans"][0]["scopeSpans"][0]["spans"];
  const std::string last = std::to_string(events.back().ts_us * 1000);
  BOOST_TEST(out[0]["endTimeUnixNano"] == last);
  BOOST_TEST(out[0]["status"] == json({{"code", kOtlpStatusUnset}}));
  BOOST_TEST(otlp_span(out, "chat m1", 2)["endTimeUnixNano"] == last);
}

BOOST_AUTO_TEST_CASE(a_stopped_session_is_not_an_error_but_the_call_it_cut_short_is) {
  auto events = session_events();
  events.resize(15);  // in the middle of turn 2's model call
  events.push_back(Event{.seq = 16, .ts_us = events.back().ts_us + 10, .body = SessionStopped{.reason = "SIGTERM", .pid = 9}});
  ExportInput in = input_of(events);
  BOOST_REQUIRE(in.traces[0][0].status == "stopped");
  json out = otlp_request(in)["resourceSpans"][0]["scopeSpans"][0]["spans"];
  BOOST_TEST(out[0]["status"] == json({{"code", kOtlpStatusUnset}}));
  BOOST_TEST(!attrs_of(out[0]).count("error.type"));
  BOOST_TEST(attrs_of(out[0])["carapace.status"] == json({{"stringValue", "stopped"}}));
  const json& call = otlp_span(out, "chat m1", 2);
  BOOST_TEST(call["status"]["code"] == kOtlpStatusError);
  BOOST_TEST(attrs_of(call)["error.type"] == json({{"stringValue", "stopped"}}));
}

BOOST_AUTO_TEST_CASE(otlp_content_only_with_content_and_redacted) {
  const auto events = session_events();
  ExportInput in = input_of(events);
  in.with_content = true;
  collect_content(in.traces[0], events, in.bodies, &in.content);
  json out = otlp_request(in)["resourceSpans"][0]["scopeSpans"][0]["spans"];
  auto ca = attrs_of(otlp_span(out, "chat m1", 1));
  json input = json::parse(ca["gen_ai.input.messages"]["stringValue"].get<std::string>());
  BOOST_TEST(input == json::parse(R"([{"role":"system","parts":[{"type":"text","content":"be brief"}]},
                                      {"role":"user","parts":[{"type":"text","content":"list [masked]"}]}])"));
  json output = json::parse(ca["gen_ai.output.messages"]["stringValue"].get<std::string>());
  BOOST_TEST(output[0]["role"] == "assistant");
  BOOST_TEST(output[0]["finish_reason"] == "tool_calls");
  BOOST_TEST(output[0]["parts"][0] == json({{"type", "text"}, {"content", "on it"}}));
  BOOST_TEST(output[0]["parts"][1] ==
             json({{"type", "tool_call"}, {"id", "c1"}, {"name", "shell"}, {"arguments", {{"command", "ls"}}}}));
  auto ta = attrs_of(otlp_span(out, "execute_tool shell"));
  BOOST_TEST(ta["gen_ai.tool.call.arguments"] == json({{"stringValue", R"({"command":"ls"})"}}));
  BOOST_TEST(ta["gen_ai.tool.call.result"] == json({{"stringValue", "a.txt"}}));
  BOOST_TEST(export_otlp(in).find("SECRET-42") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(anthropic_requests_and_response_identity) {
  json in = input_messages_from_request(R"({"model":"claude","system":"sys","anthropic_version":"x","messages":[
      {"role":"user","content":"hi"},
      {"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"t1","name":"shell","input":{"command":"ls"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]}]})");
  BOOST_REQUIRE(in.size() == 4u);
  BOOST_TEST(in[0]["role"] == "system");
  BOOST_TEST(in[2]["parts"][1] == json({{"type", "tool_call"}, {"id", "t1"}, {"name", "shell"}, {"arguments", {{"command", "ls"}}}}));
  BOOST_TEST(in[3] == json::parse(R"({"role":"tool","parts":[{"type":"tool_call_response","id":"t1","response":"a.txt"}]})"));
  auto id = response_identity("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\"}}\n\n");
  BOOST_TEST(id.id == "msg_1");
  BOOST_TEST(id.model == "claude-x");
  BOOST_TEST(response_identity(R"({"id":"r2","model":"m2"})").model == "m2");
  BOOST_TEST(response_identity("not json").id.empty());
}

BOOST_AUTO_TEST_CASE(perfetto_follows_the_trace_event_format_with_tracks_instants_and_flows) {
  const auto events = session_events();
  ExportInput in = input_of(events);
  in.traces.push_back(build_spans("s2", events));  // a second session: a second process
  json doc = json::parse(export_perfetto(in));
  auto problems = testing::trace_event_problems(doc);
  BOOST_TEST(problems.empty(), [&] {
    std::string all;
    for (const auto& p : problems) all += p + "\n";
    return all;
  }());
  std::map<std::string, int> tid_by_name;
  std::set<int> pids;
  size_t complete = 0, retries = 0, crashes = 0, starts = 0, finishes = 0;
  std::map<uint64_t, int> flow_tid_s, flow_tid_f;
  for (const auto& e : doc["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1) tid_by_name[e["args"]["name"]] = e["tid"];
    if (e["ph"] == "X" && e["pid"] == 1) ++complete;
    if (e["ph"] == "i" && e["name"] == "retry" && e["pid"] == 1) ++retries;
    if (e["ph"] == "i" && e["name"] == "crash" && e["pid"] == 1) ++crashes;
    if (e["ph"] == "s" && e["pid"] == 1) ++starts, flow_tid_s[e["id"]] = e["tid"];
    if (e["ph"] == "f" && e["pid"] == 1) ++finishes, flow_tid_f[e["id"]] = e["tid"];
  }
  BOOST_TEST(pids == std::set<int>({1, 2}));
  BOOST_TEST(complete == in.traces[0].size());
  BOOST_TEST(tid_by_name.count("session") == 1u);
  BOOST_TEST(tid_by_name.count("provider") == 1u);
  BOOST_TEST(tid_by_name.count("tools") == 1u);
  BOOST_TEST(retries == 1u);
  BOOST_TEST(crashes == 1u);
  BOOST_TEST(starts == 2u);  // the answer asked for two tools
  BOOST_TEST(finishes == 2u);
  for (const auto& [id, tid] : flow_tid_s) {
    BOOST_TEST(tid == tid_by_name["provider"]);
    BOOST_TEST(flow_tid_f[id] == tid_by_name["tools"]);
  }
  // A complete event carries the span's attributes as args (redacted).
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == 1 && e["name"] == "llm attempt 1" && e["args"].contains("http_status")) {
      BOOST_TEST(e["args"]["http_status"] == 503);
      BOOST_TEST(e["args"]["error"] == "overloaded [masked]");
      BOOST_TEST(e["ts"] == span_named(in.traces[0], "llm attempt 1").start_us);
      BOOST_TEST(e["dur"] == span_named(in.traces[0], "llm attempt 1").end_us - e["ts"].get<int64_t>());
    }
  }
}

BOOST_AUTO_TEST_CASE(perfetto_puts_overlapping_calls_on_tracks_of_their_own) {
  std::vector<Span> spans(3);
  for (size_t i = 0; i < spans.size(); ++i) {
    spans[i].trace_id = trace_id_of("p");
    spans[i].session = "p";
    spans[i].span_id = span_id_of("p", i + 1, i == 0 ? kSpanSession : kSpanTool);
    spans[i].kind = std::string(i == 0 ? kSpanSession : kSpanTool);
    spans[i].name = i == 0 ? "session p" : "tool t";
    spans[i].open_seq = i + 1;
    spans[i].close_seq = 10 + i;
    spans[i].status = "ok";
    if (i > 0) spans[i].parent_id = spans[0].span_id;
  }
  spans[0].start_us = 0, spans[0].end_us = 100;
  spans[1].start_us = 10, spans[1].end_us = 50;
  spans[2].start_us = 20, spans[2].end_us = 60;  // overlaps the first call without nesting in it
  ExportInput in;
  in.traces.push_back(spans);
  json doc = perfetto_trace(in);
  BOOST_TEST(testing::trace_event_problems(doc).empty());
  std::set<std::string> names;
  for (const auto& e : doc["traceEvents"]) {
    if (e["name"] == "thread_name") names.insert(e["args"]["name"].get<std::string>());
  }
  BOOST_TEST(names == std::set<std::string>({"session", "tools", "tools 2"}));
}

BOOST_AUTO_TEST_CASE(html_is_self_contained_and_shows_hostile_names_as_text) {
  const auto events = session_events();
  ExportInput in = input_of(events);
  std::string html = export_html(in);
  // The data sits in one JSON script element; nothing in it can close the element.
  const std::string open = "<script type=\"application/json\" id=\"trace-data\">";
  size_t from = html.find(open);
  BOOST_REQUIRE(from != std::string::npos);
  from += open.size();
  size_t to = html.find("</script>", from);
  std::string data = html.substr(from, to - from);
  BOOST_TEST(data.find('<') == std::string::npos);
  BOOST_TEST(data.find('>') == std::string::npos);
  BOOST_TEST(data.find('&') == std::string::npos);
  json parsed = json::parse(data);
  bool found = false;
  for (const auto& s : parsed["traces"][0]["spans"]) found = found || s["name"] == std::string("tool ") + kHostile;
  BOOST_TEST(found);
  BOOST_TEST(parsed["traces"][0]["spans"].size() == in.traces[0].size());
  BOOST_TEST(html.find("<img") == std::string::npos);
  BOOST_TEST(html.find("SECRET-42") == std::string::npos);
  // Nothing fetched: no source or link attributes, no remote URL, a CSP that forbids them.
  const std::string page = html.substr(0, from) + html.substr(to);
  for (const char* remote : {"src=", "href=", "http://", "https://", "@import", "url(", "<link", "<iframe"}) {
    BOOST_TEST(page.find(remote) == std::string::npos, remote);
  }
  BOOST_TEST(html.find("default-src 'none'") != std::string::npos);
  BOOST_TEST(html.find("textContent") != std::string::npos);
  BOOST_TEST(html.find("innerHTML") == std::string::npos);
  // The shared trace view (actors/collector/html/) is inlined whole: its CSS, its script, and
  // nothing in it closes the script element early.
  BOOST_TEST(html.find(".row.selected") != std::string::npos);
  BOOST_TEST(html.find("var CarapaceTrace") != std::string::npos);
  size_t closes = 0;
  for (size_t at = html.find("</script>"); at != std::string::npos; at = html.find("</script>", at + 1)) ++closes;
  BOOST_TEST(closes == 2u);
  // Bodies only with content.
  BOOST_TEST(parsed["bodies"].empty());
  in.with_content = true;
  json with = json::parse(export_html(in).substr(from, std::string::npos).substr(0, export_html(in).find("</script>", from) - from));
  BOOST_TEST(with["bodies"].contains("resp1"));
  BOOST_TEST(with["bodies"]["req1"].get<std::string>().find("[masked]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(markdown_escapes_hostile_names) {
  const auto events = session_events();
  ExportInput in = input_of(events);
  std::string md = export_markdown(in);
  BOOST_TEST(md.find("<img") == std::string::npos);
  BOOST_TEST(md.find("</script>") == std::string::npos);
  BOOST_TEST(md.find("&lt;/script&gt;&lt;img src=x onerror=alert\\(1\\)&gt;") == std::string::npos);  // ( is not escaped
  BOOST_TEST(md.find("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;\\|\\*\\[x\\](javascript:1)\\` # &amp;amp;") !=
             std::string::npos, md);
  BOOST_TEST(md.find("SECRET-42") == std::string::npos);
  // One row per span, each with the same seven cells (no '|' from the data splits one).
  size_t rows = 0;
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0 || line.rfind("| seq", 0) == 0) continue;
    ++rows;
    size_t cells = 0;
    for (size_t i = 0; i < line.size(); ++i) cells += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    BOOST_TEST(cells == 8u, line);
  }
  BOOST_TEST(rows == in.traces[0].size());
  BOOST_TEST(md.find("| 1 | session s1 | completed |") != std::string::npos, md);
  BOOST_TEST(md.find("| · · llm attempt 1 | **error** |") != std::string::npos, md);
}

BOOST_AUTO_TEST_CASE(json_and_ndjson_hold_every_span) {
  const auto events = session_events();
  ExportInput in = input_of(events);
  json all = json::parse(export_json(in));
  BOOST_REQUIRE(all.size() == in.traces[0].size());
  std::istringstream lines(export_ndjson(in));
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    Span back;
    BOOST_TEST(span_from_json(json::parse(line), &back).ok());
    BOOST_TEST(back.span_id == in.traces[0][n].span_id);
    BOOST_TEST(json::parse(line) == all[n]);
  }
  BOOST_TEST(n == in.traces[0].size());
  BOOST_TEST(export_json(in).find("SECRET-42") == std::string::npos);
  std::string out;
  BOOST_TEST(export_trace("yaml", in, &out).is_invalid_argument());
  for (auto f : kExportFormats) BOOST_TEST(export_trace(f, in, &out).ok());
}

BOOST_AUTO_TEST_SUITE_END()
