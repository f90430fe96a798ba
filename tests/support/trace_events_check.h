// Checks a Chrome trace-event JSON document (what Perfetto's UI and
// chrome://tracing open) against the format's rules: the envelope, each
// event's required fields for its phase, non-negative numeric times, flow
// ids started once and finished once (start before finish), metadata names.
// Returns the problems found (empty when it holds).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace carapace::testing {

inline std::vector<std::string> trace_event_problems(const nlohmann::json& doc) {
  std::vector<std::string> bad;
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return {"not {\"traceEvents\": [...]}"};
  }
  if (doc.value("displayTimeUnit", "") != "ms" && doc.value("displayTimeUnit", "") != "ns") {
    bad.push_back("displayTimeUnit is neither ms nor ns");
  }
  std::map<uint64_t, std::pair<int, int>> flows;  // id → (starts, finishes)
  std::map<uint64_t, double> flow_start_ts;
  std::set<std::pair<int64_t, int64_t>> named_threads;
  std::set<int64_t> named_processes;
  std::set<std::pair<int64_t, int64_t>> used_threads;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> slices;  // per thread: (ts, end)
  size_t i = 0;
  for (const auto& e : doc["traceEvents"]) {
    std::string where = "event " + std::to_string(i++);
    if (!e.is_object()) {
      bad.push_back(where + ": not an object");
      continue;
    }
    std::string ph = e.value("ph", "");
    where += " (" + ph + " " + e.value("name", "") + ")";
    auto need = [&](const char* key, bool ok) {
      if (!e.contains(key) || !ok) bad.push_back(where + ": missing or bad '" + key + "'");
    };
    need("name", e.contains("name") && e["name"].is_string());
    need("pid", e.contains("pid") && e["pid"].is_number_integer());
    need("tid", e.contains("tid") && e["tid"].is_number_integer());
    if (ph == "M") {
      std::string name = e.value("name", "");
      static const std::set<std::string> kMeta = {"process_name", "process_labels", "process_sort_index",
                                                  "thread_name", "thread_sort_index"};
      if (!kMeta.count(name)) bad.push_back(where + ": unknown metadata name");
      need("args", e.contains("args") && e["args"].is_object());
      if (name == "process_name" || name == "thread_name") {
        need("args", e["args"].contains("name") && e["args"]["name"].is_string());
        if (name == "thread_name") named_threads.insert({e.value("pid", -1), e.value("tid", -1)});
        if (name == "process_name") named_processes.insert(e.value("pid", -1));
      }
      continue;
    }
    need("ts", e.contains("ts") && e["ts"].is_number() && e["ts"].get<double>() >= 0);
    used_threads.insert({e.value("pid", -1), e.value("tid", -1)});
    if (ph == "X") {
      need("dur", e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0);
      if (e.contains("args") && !e["args"].is_object()) bad.push_back(where + ": args is not an object");
      if (e.contains("ts") && e["ts"].is_number() && e.contains("dur") && e["dur"].is_number()) {
        double ts = e["ts"].get<double>();
        slices[{e.value("pid", -1), e.value("tid", -1)}].push_back({ts, ts + e["dur"].get<double>()});
      }
    } else if (ph == "i" || ph == "I") {
      std::string s = e.value("s", "t");
      if (s != "g" && s != "p" && s != "t") bad.push_back(where + ": instant scope is not g, p or t");
    } else if (ph == "s" || ph == "t" || ph == "f") {
      need("id", e.contains("id") && (e["id"].is_number_unsigned() || e["id"].is_string()));
      need("cat", e.contains("cat") && e["cat"].is_string());
      if (!e.contains("id") || !e["id"].is_number_unsigned()) continue;
      uint64_t id = e["id"].get<uint64_t>();
      if (ph == "s") {
        flows[id].first++;
        flow_start_ts[id] = e.value("ts", 0.0);
      } else if (ph == "f") {
        flows[id].second++;
        if (flows[id].first == 0) bad.push_back(where + ": flow " + std::to_string(id) + " finishes before it starts");
        if (flow_start_ts.count(id) && e.value("ts", 0.0) < flow_start_ts[id]) {
          bad.push_back(where + ": flow " + std::to_string(id) + " goes back in time");
        }
        if (e.contains("bp") && e["bp"] != "e") bad.push_back(where + ": bp is not \"e\"");
      }
    } else if (ph == "B" || ph == "E") {
      // Allowed by the format; this exporter does not write them.
    } else {
      bad.push_back(where + ": unknown phase");
    }
  }
  for (const auto& [id, n] : flows) {
    if (n.first != 1 || n.second != 1) bad.push_back("flow " + std::to_string(id) + ": not one start and one finish");
  }
  // Complete events on one thread nest: none ends inside another and starts outside it.
  for (auto& [thread, list] : slices) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::pair<double, double>> stack;
    for (const auto& sl : list) {
      auto encloses = [&sl](const std::pair<double, double>& o) { return o.first <= sl.first && sl.second <= o.second; };
      while (!stack.empty() && stack.back().second <= sl.first && !encloses(stack.back())) stack.pop_back();
      if (!stack.empty() && !encloses(stack.back())) {
        bad.push_back("thread " + std::to_string(thread.second) + " of pid " + std::to_string(thread.first) +
                      ": slices overlap without nesting at ts " + std::to_string(static_cast<int64_t>(sl.first)));
      }
      stack.push_back(sl);
    }
  }
  for (const auto& t : used_threads) {
    if (!named_threads.count(t)) bad.push_back("thread " + std::to_string(t.second) + " of pid " + std::to_string(t.first) + " has no thread_name");
    if (!named_processes.count(t.first)) bad.push_back("pid " + std::to_string(t.first) + " has no process_name");
  }
  return bad;
}

}  // namespace carapace::testing
