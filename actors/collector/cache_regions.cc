#include "actors/collector/cache_regions.h"

#include <xxhash.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/bounded_json.h"
#include "base/limits.h"

namespace carapace {
namespace {

constexpr size_t kNpos = std::string_view::npos;
using Range = std::pair<size_t, size_t>;

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

// The index past the closing quote of the string that opens at `i`.
size_t string_end(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return kNpos;
}

// The index past the value that starts at `i`; kNpos if it is cut short or
// nests deeper than the bound. Linear and without recursion.
size_t value_end(std::string_view s, size_t i) {
  if (i >= s.size()) return kNpos;
  char c = s[i];
  if (c == '"') return string_end(s, i);
  if (c == '{' || c == '[') {
    char open[limits::kJsonDepth];  // the brackets open, innermost last
    int depth = 0;
    for (; i < s.size(); ++i) {
      char d = s[i];
      if (d == '"') {
        size_t e = string_end(s, i);
        if (e == kNpos) return kNpos;
        i = e - 1;
      } else if (d == '{' || d == '[') {
        if (depth == limits::kJsonDepth) return kNpos;
        open[depth++] = d;
      } else if (d == '}' || d == ']') {
        if (open[--depth] != (d == '}' ? '{' : '[')) return kNpos;
        if (depth == 0) return i + 1;
      }
    }
    return kNpos;
  }
  size_t j = i;
  while (j < s.size() && s[j] != ',' && s[j] != ']' && s[j] != '}' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' &&
         s[j] != '\r') {
    ++j;
  }
  return j == i ? kNpos : j;
}

struct Member {
  std::string_view key;  // as written, without its quotes
  size_t key_begin = 0, value_begin = 0, value_end = 0;
};

// The members of the object that opens at `i`; false if it is malformed.
bool object_members(std::string_view s, size_t i, std::vector<Member>* out) {
  if (i >= s.size() || s[i] != '{') return false;
  i = skip_ws(s, i + 1);
  if (i < s.size() && s[i] == '}') return true;
  while (i < s.size() && s[i] == '"') {
    size_t key_end = string_end(s, i);
    if (key_end == kNpos) return false;
    Member m{.key = s.substr(i + 1, key_end - i - 2), .key_begin = i};
    size_t j = skip_ws(s, key_end);
    if (j >= s.size() || s[j] != ':') return false;
    m.value_begin = skip_ws(s, j + 1);
    m.value_end = value_end(s, m.value_begin);
    if (m.value_end == kNpos) return false;
    out->push_back(m);
    j = skip_ws(s, m.value_end);
    if (j < s.size() && s[j] == '}') return true;
    if (j >= s.size() || s[j] != ',') return false;
    i = skip_ws(s, j + 1);
  }
  return false;
}

// The [begin, end) of each element of the array that opens at `i`.
bool array_elements(std::string_view s, size_t i, std::vector<Range>* out) {
  if (i >= s.size() || s[i] != '[') return false;
  i = skip_ws(s, i + 1);
  if (i < s.size() && s[i] == ']') return true;
  while (i < s.size()) {
    size_t e = value_end(s, i);
    if (e == kNpos) return false;
    out->push_back({i, e});
    size_t j = skip_ws(s, e);
    if (j < s.size() && s[j] == ']') return true;
    if (j >= s.size() || s[j] != ',') return false;
    i = skip_ws(s, j + 1);
  }
  return false;
}

const Member* find(const std::vector<Member>& members, std::string_view key) {
  for (const auto& m : members) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

std::string unquoted(std::string_view s, const Member* m) {
  if (m == nullptr || s[m->value_begin] != '"') return "";
  nlohmann::json v = parse_stored_json(s.substr(m->value_begin, m->value_end - m->value_begin));
  return v.is_string() ? v.get<std::string>() : "";
}

// The cuts that take the object's own cache_control member out, with the
// comma that joins it to a neighbour; its value's range in `marker`.
void cut_marker(std::string_view s, size_t object, std::vector<Range>* cuts, Range* marker) {
  std::vector<Member> ms;
  if (!object_members(s, object, &ms)) return;
  for (size_t k = 0; k < ms.size(); ++k) {
    if (ms[k].key != "cache_control") continue;
    *marker = {ms[k].value_begin, ms[k].value_end};
    if (k > 0) {
      cuts->push_back({ms[k - 1].value_end, ms[k].value_end});
    } else if (k + 1 < ms.size()) {
      cuts->push_back({ms[k].key_begin, ms[k + 1].key_begin});
    } else {
      cuts->push_back({ms[k].key_begin, ms[k].value_end});
    }
  }
}

// Where providers put breakpoints in a region's value: on each element of
// an array (tools, system blocks), on the value itself, and on each block
// of a message's content. Nowhere deeper: a tool's schema may well have a
// property called cache_control.
void marker_cuts(std::string_view s, std::vector<Range>* cuts, Range* marker) {
  size_t at = skip_ws(s, 0);
  if (at >= s.size()) return;
  auto blocks_of = [&](size_t object) {
    cut_marker(s, object, cuts, marker);
    std::vector<Member> ms;
    if (!object_members(s, object, &ms)) return;
    const Member* content = find(ms, "content");
    std::vector<Range> blocks;
    if (content == nullptr || !array_elements(s, content->value_begin, &blocks)) return;
    for (const auto& b : blocks) {
      if (s[b.first] == '{') cut_marker(s, b.first, cuts, marker);
    }
  };
  if (s[at] == '{') {
    blocks_of(at);
  } else if (s[at] == '[') {
    std::vector<Range> elements;
    if (!array_elements(s, at, &elements)) return;
    for (const auto& e : elements) {
      if (s[e.first] == '{') blocks_of(e.first);
    }
  }
}

std::string without(std::string_view s, std::vector<Range> cuts) {
  std::sort(cuts.begin(), cuts.end());
  std::string out;
  out.reserve(s.size());
  size_t at = 0;
  for (const auto& [b, e] : cuts) {
    if (b > at) out.append(s.substr(at, b - at));
    at = std::max(at, e);
  }
  if (at < s.size()) out.append(s.substr(at));
  return out;
}

std::string guess_format(std::string_view s, const std::vector<Member>& top) {
  if (find(top, "system") != nullptr) return "anthropic";
  if (find(top, "prompt_cache_key") != nullptr || find(top, "stream_options") != nullptr) return "openai";
  if (const Member* tools = find(top, "tools")) {
    std::vector<Range> list;
    std::vector<Member> first;
    if (array_elements(s, tools->value_begin, &list) && !list.empty() && object_members(s, list[0].first, &first)) {
      if (find(first, "input_schema") != nullptr) return "anthropic";
      if (find(first, "function") != nullptr) return "openai";
    }
  }
  return s.find("\"cache_control\"") != kNpos ? "anthropic" : "openai";
}

}  // namespace

std::string fingerprinted_bytes(std::string_view value) {
  std::vector<Range> cuts;
  Range marker{0, 0};
  marker_cuts(value, &cuts, &marker);
  return without(value, std::move(cuts));
}

std::pair<size_t, size_t> first_difference(std::string_view a, std::string_view b) {
  // The kept ranges of each, walked together.
  auto kept = [](std::string_view v) {
    std::vector<Range> cuts;
    Range marker{0, 0};
    marker_cuts(v, &cuts, &marker);
    std::sort(cuts.begin(), cuts.end());
    std::vector<Range> keep;
    size_t at = 0;
    for (const auto& [from, to] : cuts) {
      if (from > at) keep.push_back({at, from});
      at = std::max(at, to);
    }
    if (at < v.size()) keep.push_back({at, v.size()});
    return keep;
  };
  std::vector<Range> ka = kept(a), kb = kept(b);
  size_t ia = 0, ib = 0;                             // the range
  size_t pa = ka.empty() ? a.size() : ka[0].first;  // the byte
  size_t pb = kb.empty() ? b.size() : kb[0].first;
  while (ia < ka.size() && ib < kb.size()) {
    if (a[pa] != b[pb]) return {pa, pb};
    if (++pa == ka[ia].second && ++ia < ka.size()) pa = ka[ia].first;
    if (++pb == kb[ib].second && ++ib < kb.size()) pb = kb[ib].first;
  }
  if (ia == ka.size() && ib == kb.size()) return {a.size(), b.size()};
  return {ia == ka.size() ? a.size() : pa, ib == kb.size() ? b.size() : pb};
}

std::string fingerprint_hex(uint64_t fingerprint) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fingerprint));
  return buf;
}

uint64_t prefix_fingerprint(const std::vector<CacheRegion>& regions, size_t count) {
  std::vector<uint64_t> fps;
  for (size_t i = 0; i < count && i < regions.size(); ++i) fps.push_back(regions[i].fingerprint);
  return XXH3_64bits(fps.data(), fps.size() * sizeof(uint64_t));
}

RequestRegions cache_regions(std::string_view body, std::string_view format) {
  RequestRegions out;
  size_t at = skip_ws(body, 0);
  std::vector<Member> top;
  if (at >= body.size() || body[at] != '{' || !object_members(body, at, &top)) {
    out.error = "the request body is not a JSON object (or nests deeper than " + std::to_string(limits::kJsonDepth) +
                " levels)";
    return out;
  }
  out.format = format == "anthropic" || format == "openai" ? std::string(format) : guess_format(body, top);
  out.model = unquoted(body, find(top, "model"));
  out.prompt_cache_key = unquoted(body, find(top, "prompt_cache_key"));
  size_t last_breakpoint = 0;  // one past the region
  std::string ttl;

  auto add = [&](std::string name, size_t begin, size_t end) {
    std::string_view value = body.substr(begin, end - begin);
    std::vector<Range> cuts;
    Range marker{0, 0};
    marker_cuts(value, &cuts, &marker);
    std::string bytes = without(value, cuts);
    CacheRegion r{.name = std::move(name),
                  .offset = begin,
                  .size = end - begin,
                  .fingerprint = XXH3_64bits(bytes.data(), bytes.size()),
                  .breakpoint = !cuts.empty()};
    if (r.breakpoint) {
      last_breakpoint = out.regions.size() + 1;
      nlohmann::json m = parse_stored_json(value.substr(marker.first, marker.second - marker.first));
      ttl = m.is_object() && m.contains("ttl") && m["ttl"].is_string() ? m["ttl"].get<std::string>() : "5m";
    }
    out.regions.push_back(std::move(r));
  };

  if (const Member* tools = find(top, "tools")) add("tools", tools->value_begin, tools->value_end);
  if (const Member* system = find(top, "system")) add("system", system->value_begin, system->value_end);
  if (const Member* messages = find(top, "messages")) {
    std::vector<Range> list;
    if (!array_elements(body, messages->value_begin, &list)) {
      out.error = "the request's messages are not a JSON array";
      out.regions.clear();
      return out;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      std::string name = "messages[" + std::to_string(i) + "]";
      if (i == 0 && out.format == "openai" && body[list[i].first] == '{') {
        std::vector<Member> ms;
        std::string role = object_members(body, list[i].first, &ms) ? unquoted(body, find(ms, "role")) : "";
        if (role == "system" || role == "developer") name = "system";
      }
      add(std::move(name), list[i].first, list[i].second);
    }
  }
  if (out.format == "openai") {
    out.cacheable = out.regions.size();
  } else {
    out.cacheable = last_breakpoint;
    out.ttl = last_breakpoint ? ttl : "";
  }
  return out;
}

}  // namespace carapace
