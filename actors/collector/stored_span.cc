#include "actors/collector/stored_span.h"

#include <simdjson.h>

#include <algorithm>
#include <string>

#include "base/limits.h"

namespace carapace {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// A value as nlohmann_json's parser builds it from the same text. The
// recursion is bounded by the parser's depth limit.
nlohmann::json to_nlohmann(element e) {
  switch (e.type()) {
    case element_type::OBJECT: {
      nlohmann::json out = nlohmann::json::object();
      auto& map = out.get_ref<nlohmann::json::object_t&>();
      // A repeated key keeps its last value, as nlohmann_json's parser does.
      // The collector writes keys in order, so the hint is right.
      object members;
      if (e.get_object().get(members) != simdjson::SUCCESS) break;
      for (auto member : members) {
        map.insert_or_assign(map.end(), std::string(member.key), to_nlohmann(member.value));
      }
      return out;
    }
    case element_type::ARRAY: {
      nlohmann::json out = nlohmann::json::array();
      simdjson::dom::array items;
      if (e.get_array().get(items) != simdjson::SUCCESS) break;
      for (element item : items) out.push_back(to_nlohmann(item));
      return out;
    }
    case element_type::INT64: {
      int64_t n = 0;
      if (e.get_int64().get(n) != simdjson::SUCCESS) break;
      return n >= 0 ? nlohmann::json(static_cast<uint64_t>(n)) : nlohmann::json(n);
    }
    case element_type::UINT64: {
      uint64_t n = 0;
      if (e.get_uint64().get(n) != simdjson::SUCCESS) break;
      return n;
    }
    case element_type::DOUBLE: {
      double d = 0;
      if (e.get_double().get(d) != simdjson::SUCCESS) break;
      return d;
    }
    case element_type::STRING: {
      std::string_view text;
      if (e.get_string().get(text) != simdjson::SUCCESS) break;
      return std::string(text);
    }
    case element_type::BOOL: {
      bool b = false;
      if (e.get_bool().get(b) != simdjson::SUCCESS) break;
      return b;
    }
    case element_type::NULL_VALUE:
      break;
  }
  return nullptr;
}

Status missing(const char* name) { return Status::corruption(std::string("span: no field '") + name + "'"); }
Status wrong(const char* name) {
  return Status::corruption(std::string("span: field '") + name + "' has the wrong type");
}

Status value_of(element e, const char* name, std::string* out) {
  std::string_view text;
  if (e.get_string().get(text) != simdjson::SUCCESS) return wrong(name);
  out->assign(text);
  return Status();
}

Status value_of(element e, const char* name, uint64_t* out) {
  if (e.get_uint64().get(*out) != simdjson::SUCCESS) return wrong(name);
  return Status();
}

Status value_of(element e, const char* name, int64_t* out) {
  if (e.get_int64().get(*out) != simdjson::SUCCESS) return wrong(name);
  return Status();
}

// The attributes in `e`, which must be an object (`name` names it in the error).
Status attrs_in(element e, const char* name, SpanAttrs* out) {
  object members;
  if (e.get_object().get(members) != simdjson::SUCCESS)
    return Status::corruption(std::string("span: '") + name + "' is not an object");
  std::vector<SpanAttrs::Item> items;
  items.reserve(members.size());
  for (auto member : members) items.emplace_back(std::string(member.key), to_nlohmann(member.value));
  // In any order; a repeated key keeps its last value, as nlohmann_json's parser does.
  *out = SpanAttrs::from_items(std::move(items));
  return Status();
}

// An event's attributes: none when it has no "attrs".
Status event_attrs(object o, SpanAttrs* out) {
  element e;
  if (o.at_key("attrs").get(e) != simdjson::SUCCESS) {
    *out = SpanAttrs();
    return Status();
  }
  return attrs_in(e, "attrs", out);
}

// A span's fields, in the order the collector writes them (span_json_text:
// sorted by name), and their names.
enum SpanField : size_t {
  kAttrs,
  kCloseSeq,
  kEndUs,
  kEvents,
  kKind,
  kLinks,
  kName,
  kOpenSeq,
  kParentId,
  kSession,
  kSpanId,
  kStartUs,
  kStatus,
  kTraceId,
  kFieldCount
};
constexpr std::string_view kFieldName[kFieldCount] = {
    "attrs",    "close_seq", "end_us",  "events",  "kind",     "links",  "name",
    "open_seq", "parent_id", "session", "span_id", "start_us", "status", "trace_id"};

// A field of an event or a link.
template <class T>
Status field(object o, const char* name, T* out) {
  element e;
  if (o.at_key(name).get(e) != simdjson::SUCCESS) return missing(name);
  return value_of(e, name, out);
}

template <class T>
Status field(const bool* seen, const element* at, SpanField f, T* out) {
  const char* name = kFieldName[f].data();  // literals: NUL-terminated
  if (!seen[f]) return missing(name);
  return value_of(at[f], name, out);
}

}  // namespace

struct StoredSpanReader::Impl {
  simdjson::dom::parser parser;
  bool allocated = false;
};

StoredSpanReader::StoredSpanReader() : impl_(std::make_unique<Impl>()) {}
StoredSpanReader::~StoredSpanReader() = default;

Status StoredSpanReader::read(std::string_view text, Span* out) {
  if (!impl_->allocated) {
    // The capacity grows with the largest span; the depth bound stays (see
    // the header for how simdjson counts it).
    if (impl_->parser.allocate(std::max<size_t>(text.size(), 64 * 1024),
                               static_cast<size_t>(limits::kJsonDepth) + 1) != simdjson::SUCCESS) {
      return Status::aborted("span: no memory for the JSON parser");
    }
    impl_->allocated = true;
  }
  element root;
  if (impl_->parser.parse(text.data(), text.size(), true).get(root) != simdjson::SUCCESS) {
    return Status::corruption("span: not JSON, or nested deeper than " + std::to_string(limits::kJsonDepth) +
                              " levels");
  }
  object j;
  if (root.get_object().get(j) != simdjson::SUCCESS) return Status::corruption("span: not a JSON object");
  // One pass over the members, in the order the collector writes them (at_key
  // per field would compare each name with half the keys); a repeated key
  // keeps its last value, as nlohmann_json's parser does. The fields are then
  // read in a fixed order, so that the first one missing or wrong is named.
  element at[kFieldCount];
  bool seen[kFieldCount] = {};
  size_t expected = 0;  // the field the collector writes next
  for (auto member : j) {
    size_t k = expected < kFieldCount && kFieldName[expected] == member.key ? expected : kFieldCount;
    for (size_t n = 0; k == kFieldCount && n < kFieldCount; ++n) {
      if (kFieldName[n] == member.key) k = n;
    }
    if (k == kFieldCount) continue;  // a field of a later version
    expected = k + 1;
    at[k] = member.value;
    seen[k] = true;
  }
  Span& s = *out;  // filled in place: a span is not small to move
  s = Span{};
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kTraceId, &s.trace_id));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kSpanId, &s.span_id));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kParentId, &s.parent_id));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kSession, &s.session));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kKind, &s.kind));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kName, &s.name));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kOpenSeq, &s.open_seq));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kCloseSeq, &s.close_seq));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kStartUs, &s.start_us));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kEndUs, &s.end_us));
  CARAPACE_RETURN_IF_ERROR(field(seen, at, kStatus, &s.status));
  if (!seen[kAttrs]) return Status::corruption("span: 'attrs' is not an object");
  CARAPACE_RETURN_IF_ERROR(attrs_in(at[kAttrs], "attrs", &s.attrs));
  simdjson::dom::array events, links;
  if (!seen[kEvents] || !seen[kLinks] || at[kEvents].get_array().get(events) != simdjson::SUCCESS ||
      at[kLinks].get_array().get(links) != simdjson::SUCCESS) {
    return Status::corruption("span: 'events' or 'links' is not an array");
  }
  s.events.reserve(events.size());
  for (element item : events) {
    object e;
    if (item.get_object().get(e) != simdjson::SUCCESS)
      return Status::corruption("span: an event is not an object");
    SpanEvent ev;
    CARAPACE_RETURN_IF_ERROR(field(e, "seq", &ev.seq));
    CARAPACE_RETURN_IF_ERROR(field(e, "ts_us", &ev.ts_us));
    CARAPACE_RETURN_IF_ERROR(field(e, "name", &ev.name));
    CARAPACE_RETURN_IF_ERROR(event_attrs(e, &ev.attrs));
    s.events.push_back(std::move(ev));
  }
  for (element item : links) {
    object l;
    if (item.get_object().get(l) != simdjson::SUCCESS)
      return Status::corruption("span: a link is not an object");
    SpanLink link;
    CARAPACE_RETURN_IF_ERROR(field(l, "trace_id", &link.trace_id));
    CARAPACE_RETURN_IF_ERROR(field(l, "span_id", &link.span_id));
    CARAPACE_RETURN_IF_ERROR(field(l, "session", &link.session));
    CARAPACE_RETURN_IF_ERROR(field(l, "seq", &link.seq));
    CARAPACE_RETURN_IF_ERROR(field(l, "reason", &link.reason));
    s.links.push_back(std::move(link));
  }
  return Status();
}

}  // namespace carapace
