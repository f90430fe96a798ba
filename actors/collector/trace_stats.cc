#include "actors/collector/trace_stats.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

namespace carapace {
namespace {

using span_attr::u;

struct ToolAgg {
  uint64_t calls = 0, errors = 0, output_bytes = 0;
  std::vector<uint64_t> us;  // latencies
};

// A tool call's latency: from the request to the result in the log (what
// the session waited), else the duration the tool reported.
uint64_t tool_latency_us(const Span& s) {
  if (s.end_us > s.start_us && s.start_us > 0) return static_cast<uint64_t>(s.end_us - s.start_us);
  return u(s.attrs, "duration_ms") * 1000;
}

// Microseconds as milliseconds to a tenth.
double ms(uint64_t us) { return std::round(static_cast<double>(us) / 100.0) / 10.0; }

nlohmann::json tool_json(const ToolAgg& t) {
  return {{"calls", t.calls},
          {"errors", t.errors},
          {"error_rate", t.calls ? static_cast<double>(t.errors) / static_cast<double>(t.calls) : 0.0},
          {"output_bytes", t.output_bytes},
          {"p50_ms", ms(percentile(t.us, 50))},
          {"p95_ms", ms(percentile(t.us, 95))},
          {"p99_ms", ms(percentile(t.us, 99))},
          {"max_ms", ms(t.us.empty() ? 0 : *std::max_element(t.us.begin(), t.us.end()))}};
}

struct Agg {
  std::set<std::string> sessions;
  uint64_t turns = 0, model_calls = 0, retries = 0, tokens_in = 0, tokens_out = 0, cache_read = 0,
           cache_write = 0, tool_calls = 0, tool_errors = 0, approvals = 0;
  double cost = 0;
  std::vector<uint64_t> waits_ms;  // how long each decided approval waited for its person
  std::vector<uint64_t> latency;
  using Tool = ToolAgg;
  std::map<std::string, Tool> tools;

  void add(const Span& s) {
    sessions.insert(s.session);
    const auto& a = s.attrs;
    if (s.kind == kSpanTurn) {
      ++turns;
    } else if (s.kind == kSpanLlm && !s.open()) {
      ++model_calls;
      if (s.status == "error" && a.value("will_retry", false)) ++retries;
      if (s.status == "ok") {
        tokens_in += u(a, "tokens_in");
        tokens_out += u(a, "tokens_out");
        cache_read += u(a, "cache_read");
        cache_write += u(a, "cache_write");
        cost += a.value("cost_usd", 0.0);
      }
      latency.push_back(a.contains("latency_ms") ? u(a, "latency_ms")
                                                 : static_cast<uint64_t>((s.end_us - s.start_us) / 1000));
    } else if (s.kind == kSpanApproval) {
      ++approvals;
      if (!s.open()) waits_ms.push_back(u(a, "wait_ms"));
    } else if (s.kind == kSpanTool && !s.open()) {
      ++tool_calls;
      auto& t = tools[a.value("tool", std::string("?"))];
      ++t.calls;
      t.output_bytes += u(a, "output_bytes");
      t.us.push_back(tool_latency_us(s));
      if (s.status != "ok") {
        ++tool_errors;
        ++t.errors;
      }
    }
  }

  nlohmann::json json() const {
    nlohmann::json tj = nlohmann::json::object();
    for (const auto& [name, t] : tools) tj[name] = tool_json(t);
    return {{"sessions", sessions.size()},
            {"turns", turns},
            {"model_calls", model_calls},
            {"retries", retries},
            {"tokens_in", tokens_in},
            {"tokens_out", tokens_out},
            {"cache_read", cache_read},
            {"cache_write", cache_write},
            {"cache_hit_ratio", cache_hit_ratio(tokens_in, cache_read, cache_write)},
            {"cost_usd", cost},
            {"latency_ms",
             {{"p50", percentile(latency, 50)},
              {"p95", percentile(latency, 95)},
              {"p99", percentile(latency, 99)},
              {"max", latency.empty() ? 0 : *std::max_element(latency.begin(), latency.end())}}},
            {"tool_calls", tool_calls},
            {"tool_errors", tool_errors},
            {"tool_error_rate",
             tool_calls ? static_cast<double>(tool_errors) / static_cast<double>(tool_calls) : 0.0},
            {"tools", tj},
            // Time spent waiting for people, apart from model and tool time.
            {"approvals",
             {{"requests", approvals},
              {"decided", waits_ms.size()},
              {"waiting_ms", std::accumulate(waits_ms.begin(), waits_ms.end(), uint64_t{0})},
              {"p50_wait_ms", percentile(waits_ms, 50)},
              {"max_wait_ms", waits_ms.empty() ? 0 : *std::max_element(waits_ms.begin(), waits_ms.end())}}}};
  }
};

// A group of one tool's calls: what the calls did, and nothing of the model
// calls (they are no tool's).
nlohmann::json tool_group_json(const Agg& agg, const std::string& tool) {
  auto it = agg.tools.find(tool);
  nlohmann::json j = it == agg.tools.end() ? tool_json(ToolAgg{}) : tool_json(it->second);
  j["sessions"] = agg.sessions.size();
  return j;
}

std::string day_of(int64_t ts_us, int64_t offset_s) {
  std::time_t t = static_cast<std::time_t>(ts_us / 1'000'000 + offset_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

double cache_hit_ratio(uint64_t tokens_in, uint64_t cache_read, uint64_t cache_write) {
  const uint64_t all = tokens_in + cache_read + cache_write;
  return all ? static_cast<double>(cache_read) / static_cast<double>(all) : 0.0;
}

uint64_t percentile(std::vector<uint64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

nlohmann::json trace_stats(const std::vector<std::vector<Span>>& traces, const StatsOptions& options) {
  Agg totals;
  std::map<std::string, Agg> groups;
  for (const auto& spans : traces) {
    if (spans.empty()) continue;
    const std::string model = spans[0].attrs.value("model", std::string());
    for (const auto& s : spans) {
      if (s.kind == kSpanSession || s.start_us < options.since_us || s.attrs.value("copied_from_parent", false)) {
        continue;
      }
      totals.add(s);
      std::string key;
      if (options.group_by == "model") {
        key = s.attrs.value("model", model);
      } else if (options.group_by == "tool") {
        if (s.kind != kSpanTool) continue;
        key = s.attrs.value("tool", std::string("?"));
      } else if (options.group_by == "session") {
        key = s.session;
      } else if (options.group_by == "day") {
        key = day_of(s.start_us, options.utc_offset_s);
      } else {
        continue;
      }
      groups[key].add(s);
    }
  }
  nlohmann::json g = nlohmann::json::array();
  for (const auto& [key, agg] : groups) {
    auto j = options.group_by == "tool" ? tool_group_json(agg, key) : agg.json();
    j["key"] = key;
    g.push_back(std::move(j));
  }
  return {{"totals", totals.json()}, {"groups", g}};
}

}  // namespace carapace
