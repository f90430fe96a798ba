#include "actors/collector/export_markdown.h"

#include <map>

#include "actors/collector/trace_view.h"

namespace carapace {

std::string markdown_cell(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\n':
      case '\r':
      case '\t': out += ' '; break;
      case '\\': case '|': case '`': case '*': case '_': case '[': case ']': case '!': case '~':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

std::string details(const Span& sp) {
  std::string out;
  auto add = [&out](const std::string& part) {
    if (!out.empty()) out += ", ";
    out += part;
  };
  const auto& a = sp.attrs;
  if (sp.kind == kSpanSession || sp.kind == kSpanLlm) {
    if (a.contains("model")) add("model " + a.value("model", ""));
  }
  if (a.contains("http_status")) add("HTTP " + a.get("http_status")->dump());
  if (a.contains("error")) add(a.value("error", ""));
  if (a.value("will_retry", false)) add("retried after " + std::to_string(a.value("retry_delay_ms", uint64_t{0})) + " ms");
  if (a.contains("tool_names")) add("calls " + a.value("tool_names", ""));
  if (a.contains("args")) add(a.value("args", ""));
  if (a.value("truncated", false)) add("output truncated");
  if (a.contains("denied_by")) add("denied by " + a.value("denied_by", ""));
  if (a.contains("decision")) add(a.value("decision", ""));
  if (a.contains("stop_reason")) add("stop " + a.value("stop_reason", ""));
  if (a.contains("crashed_after_seq")) add("crashed after seq " + a.get("crashed_after_seq")->dump());
  for (const auto& e : sp.events) add(e.name + " at seq " + std::to_string(e.seq));
  for (const auto& l : sp.links) add("link (" + l.reason + ") to " + l.session + " seq " + std::to_string(l.seq));
  return out;
}

}  // namespace

std::string export_markdown(const ExportInput& input) {
  std::string out;
  for (const auto& trace : input.traces) {
    if (trace.empty()) continue;
    const Span& root = trace[0];
    const int64_t last_us = export_last_us(trace);
    out += "### Session " + markdown_cell(input.clean(root.session)) + "\n\n";
    out += "trace `" + root.trace_id + "` · " + markdown_cell(input.clean(root.attrs.value("provider", ""))) + "/" +
           markdown_cell(input.clean(root.attrs.value("model", ""))) + " · " + markdown_cell(root.status) + " · " +
           format_duration_us(export_end_us(root, last_us) - root.start_us) + " · " +
           format_count(root.attrs.value("tokens_in", uint64_t{0})) + " tokens in, " +
           format_count(root.attrs.value("tokens_out", uint64_t{0})) + " out · " +
           format_cost(root.attrs.value("cost_usd", 0.0)) + "\n\n";
    out += "| seq | span | status | duration | tokens in/out | cost | details |\n";
    out += "|---:|---|---|---:|---:|---:|---|\n";
    std::map<std::string, int> depth;
    for (const auto& sp : trace) {
      int d = 0;
      auto parent = depth.find(sp.parent_id);
      if (parent != depth.end()) d = parent->second + 1;
      depth[sp.span_id] = d;
      std::string indent;
      for (int i = 0; i < d; ++i) indent += "· ";
      std::string tokens;
      if (sp.attrs.contains("tokens_in")) {
        tokens = format_count(sp.attrs.value("tokens_in", uint64_t{0})) + " / " +
                 format_count(sp.attrs.value("tokens_out", uint64_t{0}));
      }
      std::string cost = sp.attrs.contains("cost_usd") ? format_cost(sp.attrs.value("cost_usd", 0.0)) : "";
      std::string status = sp.status == "ok" || sp.status == "completed" ? sp.status : "**" + markdown_cell(sp.status) + "**";
      out += "| " + std::to_string(sp.open_seq) + " | " + indent + markdown_cell(input.clean(sp.name)) + " | " + status +
             " | " + (sp.open() ? "open" : format_duration_us(sp.end_us - sp.start_us)) + " | " + tokens + " | " +
             cost + " | " + markdown_cell(input.clean(details(sp))) + " |\n";
    }
    out += "\n";
  }
  if (out.empty()) out = "No spans.\n";
  return out;
}

}  // namespace carapace
