#include "actors/collector/export_perfetto.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace carapace {
namespace {

using nlohmann::json;

// Tracks of one kind: a slice goes on the first lane where it nests (the
// lane is free at its start, or the last slice there encloses it).
struct Lanes {
  std::string name;
  int first_tid = 0;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> open;  // per lane: enclosing intervals, innermost last

  int place(int64_t start, int64_t end) {
    for (size_t i = 0; i < open.size(); ++i) {
      auto& stack = open[i];
      auto encloses = [&](const std::pair<int64_t, int64_t>& o) { return o.first <= start && end <= o.second; };
      while (!stack.empty() && !encloses(stack.back()) && stack.back().second <= start) stack.pop_back();
      if (stack.empty() || encloses(stack.back())) {
        stack.emplace_back(start, end);
        return first_tid + static_cast<int>(i);
      }
    }
    open.push_back({{start, end}});
    return first_tid + static_cast<int>(open.size() - 1);
  }
};

const char* track_of(const Span& sp, const std::map<std::string, const Span*>& by_id) {
  if (sp.kind == kSpanLlm) return "provider";
  if (sp.kind == kSpanTool) return "tools";
  if (sp.kind == kSpanHook) {
    auto parent = by_id.find(sp.parent_id);
    if (parent != by_id.end() && parent->second->kind == kSpanTool) return "tools";
  }
  return "session";
}

json args_of(const Span& sp, const ExportInput& input) {
  json args = sp.attrs;
  args["span_id"] = sp.span_id;
  args["status"] = sp.status;
  args["open_seq"] = sp.open_seq;
  if (!sp.open()) args["close_seq"] = sp.close_seq;
  if (input.with_content) {
    auto c = input.content.find(sp.span_id);
    if (c != input.content.end()) args["content"] = c->second;
  }
  export_redact_json(args, input);
  return args;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

json perfetto_trace(const ExportInput& input) {
  json events = json::array();
  uint64_t next_flow = 1;
  int pid = 0;
  for (const auto& trace : input.traces) {
    if (trace.empty()) continue;
    ++pid;
    const int64_t last_us = export_last_us(trace);
    std::map<std::string, const Span*> by_id;
    for (const auto& sp : trace) by_id[sp.span_id] = &sp;
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", input.clean("session " + trace[0].session)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
    std::map<std::string, Lanes> lanes{{"session", Lanes{"session", 1, {}}},
                                       {"provider", Lanes{"provider", 100, {}}},
                                       {"tools", Lanes{"tools", 200, {}}}};
    // Slices in start order, enclosing ones first, so that lanes nest.
    std::vector<const Span*> order;
    for (const auto& sp : trace) order.push_back(&sp);
    std::stable_sort(order.begin(), order.end(), [&](const Span* a, const Span* b) {
      if (a->start_us != b->start_us) return a->start_us < b->start_us;
      return export_end_us(*a, last_us) > export_end_us(*b, last_us);
    });
    std::map<std::string, int> tid_of;  // span id → track
    std::set<int> tids;
    for (const Span* sp : order) {
      const int64_t end = export_end_us(*sp, last_us);
      int tid = lanes.at(track_of(*sp, by_id)).place(sp->start_us, end);
      tid_of[sp->span_id] = tid;
      tids.insert(tid);
      events.push_back({{"name", input.clean(sp->name)}, {"cat", sp->kind}, {"ph", "X"}, {"ts", sp->start_us},
                        {"dur", end - sp->start_us}, {"pid", pid}, {"tid", tid}, {"args", args_of(*sp, input)}});
      // Instants: retries, and what the span's events say happened in it.
      if (sp->kind == kSpanLlm && sp->attrs.value("will_retry", false)) {
        events.push_back({{"name", "retry"}, {"cat", "retry"}, {"ph", "i"}, {"s", "t"}, {"ts", end}, {"pid", pid},
                          {"tid", tid},
                          {"args", {{"retry_delay_ms", sp->attrs.value("retry_delay_ms", uint64_t{0})},
                                    {"http_status", sp->attrs.value("http_status", uint64_t{0})}}}});
      }
      for (const auto& e : sp->events) {
        if (e.name == "user_message") continue;
        json args = e.attrs;
        args["seq"] = e.seq;
        export_redact_json(args, input);
        events.push_back({{"name", input.clean(e.name)}, {"cat", e.name}, {"ph", "i"}, {"s", e.name == "crash" ? "p" : "t"},
                          {"ts", std::clamp(e.ts_us, sp->start_us, end)}, {"pid", pid}, {"tid", tid}, {"args", args}});
      }
    }
    for (const auto& [kind, l] : lanes) {
      for (size_t i = 0; i < l.open.size(); ++i) {
        int tid = l.first_tid + static_cast<int>(i);
        std::string name = i == 0 ? l.name : l.name + " " + std::to_string(i + 1);
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
        events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
                          {"args", {{"sort_index", tid}}}});
      }
    }
    // Flows: a model call → each tool call it asked for (by call id).
    std::map<std::string, const Span*> tool_by_call;
    for (const auto& sp : trace) {
      if (sp.kind == kSpanTool && sp.attrs.contains("call_id")) tool_by_call[sp.attrs.value("call_id", "")] = &sp;
    }
    for (const auto& sp : trace) {
      if (sp.kind != kSpanLlm || !sp.attrs.contains("call_ids")) continue;
      for (const auto& call : split(sp.attrs.value("call_ids", std::string()))) {
        auto tool = tool_by_call.find(call);
        if (tool == tool_by_call.end()) continue;
        const uint64_t id = next_flow++;
        events.push_back({{"name", "tool_call"}, {"cat", "tool_call"}, {"ph", "s"}, {"id", id},
                          {"ts", sp.start_us + (export_end_us(sp, last_us) - sp.start_us) / 2}, {"pid", pid},
                          {"tid", tid_of[sp.span_id]},
                          {"args", {{"call_id", call}}}});
        events.push_back({{"name", "tool_call"}, {"cat", "tool_call"}, {"ph", "f"}, {"bp", "e"}, {"id", id},
                          {"ts", tool->second->start_us}, {"pid", pid}, {"tid", tid_of[tool->second->span_id]},
                          {"args", {{"call_id", call}}}});
      }
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

std::string export_perfetto(const ExportInput& input) {
  return perfetto_trace(input).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace carapace
