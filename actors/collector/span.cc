#include "actors/collector/span.h"

#include <charconv>
#include <type_traits>

#include "base/digest.h"

namespace carapace {

std::string trace_id_of(std::string_view session) {
  std::string key = "trace";
  key.push_back('\0');
  key.append(session);
  return digest128(key).hex();
}

std::string short_hex(const Digest128& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[15 - i] = kDigits[(d.hi >> (4 * i)) & 0xf];
  return out;
}

std::string span_id_of(std::string_view session, uint64_t seq, std::string_view kind) {
  std::string key;
  key.reserve(session.size() + kind.size() + 22);
  key.append(session);
  key.push_back('\0');
  char digits[20];
  key.append(digits, std::to_chars(digits, digits + sizeof digits, seq).ptr);
  key.push_back('\0');
  key.append(kind);
  return short_hex(digest128(key));
}

nlohmann::json span_to_json(const Span& s) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : s.events) {
    events.push_back({{"seq", e.seq}, {"ts_us", e.ts_us}, {"name", e.name}, {"attrs", e.attrs}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : s.links) {
    links.push_back({{"trace_id", l.trace_id},
                     {"span_id", l.span_id},
                     {"session", l.session},
                     {"seq", l.seq},
                     {"reason", l.reason}});
  }
  return {{"trace_id", s.trace_id}, {"span_id", s.span_id}, {"parent_id", s.parent_id},
          {"session", s.session},   {"kind", s.kind},       {"name", s.name},
          {"open_seq", s.open_seq}, {"close_seq", s.close_seq}, {"start_us", s.start_us},
          {"end_us", s.end_us},     {"status", s.status},   {"attrs", s.attrs},
          {"events", events},       {"links", links}};
}

namespace {

using nlohmann::json;

// Appends JSON text to a string, as nlohmann_json's dump() writes it:
// compact, invalid UTF-8 replaced.
class SpanWriter {
 public:
  explicit SpanWriter(std::string* out)
      : out_(out),
        serializer_(nlohmann::detail::output_adapter<char, std::string>(*out), ' ',
                    json::error_handler_t::replace) {}

  SpanWriter& raw(std::string_view text) {
    out_->append(text);
    return *this;
  }
  SpanWriter& string(std::string_view s) {
    // Printable ASCII but the quote and the backslash is written as it is;
    // anything else as dump() writes it (its escapes, its UTF-8 checks).
    for (unsigned char c : s) {
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
        serializer_.dump(json(s), false, false, 0);
        return *this;
      }
    }
    out_->push_back('"');
    out_->append(s);
    out_->push_back('"');
    return *this;
  }
  template <typename Int>
  SpanWriter& integer(Int v) {
    char buf[24];
    auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    out_->append(buf, end);
    return *this;
  }
  SpanWriter& value(const json& j) {
    serializer_.dump(j, false, false, 0);
    return *this;
  }
  // {"key":value,...} in key order, as dump() writes the same object.
  SpanWriter& object(const SpanAttrs& attrs) {
    out_->push_back('{');
    bool first = true;
    for (const auto& [key, v] : attrs) {
      if (!first) out_->push_back(',');
      first = false;
      string(key).raw(":").value(v);
    }
    out_->push_back('}');
    return *this;
  }
  // [each(item), ...]
  template <typename T, typename Each>
  SpanWriter& array(const std::vector<T>& items, Each each) {
    out_->push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i != 0) out_->push_back(',');
      each(items[i]);
    }
    out_->push_back(']');
    return *this;
  }

 private:
  std::string* out_;
  nlohmann::detail::serializer<json> serializer_;
};

}  // namespace

// The keys in the order dump() gives them: an object's keys sorted.
std::string span_json_text(const Span& s) {
  std::string out;
  out.reserve(256);
  SpanWriter w(&out);
  w.raw("{\"attrs\":").object(s.attrs);
  w.raw(",\"close_seq\":").integer(s.close_seq);
  w.raw(",\"end_us\":").integer(s.end_us);
  w.raw(",\"events\":").array(s.events, [&w](const SpanEvent& e) {
    w.raw("{\"attrs\":").object(e.attrs);
    w.raw(",\"name\":").string(e.name);
    w.raw(",\"seq\":").integer(e.seq);
    w.raw(",\"ts_us\":").integer(e.ts_us).raw("}");
  });
  w.raw(",\"kind\":").string(s.kind);
  w.raw(",\"links\":").array(s.links, [&w](const SpanLink& l) {
    w.raw("{\"reason\":").string(l.reason);
    w.raw(",\"seq\":").integer(l.seq);
    w.raw(",\"session\":").string(l.session);
    w.raw(",\"span_id\":").string(l.span_id);
    w.raw(",\"trace_id\":").string(l.trace_id).raw("}");
  });
  w.raw(",\"name\":").string(s.name);
  w.raw(",\"open_seq\":").integer(s.open_seq);
  w.raw(",\"parent_id\":").string(s.parent_id);
  w.raw(",\"session\":").string(s.session);
  w.raw(",\"span_id\":").string(s.span_id);
  w.raw(",\"start_us\":").integer(s.start_us);
  w.raw(",\"status\":").string(s.status);
  w.raw(",\"trace_id\":").string(s.trace_id).raw("}");
  return out;
}

namespace {

template <class T>
Status field(const nlohmann::json& j, const char* name, T* out) {
  auto it = j.find(name);
  if (it == j.end()) return Status::corruption(std::string("span: no field '") + name + "'");
  try {
    *out = it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    return Status::corruption(std::string("span: field '") + name + "' has the wrong type");
  }
  return Status();
}

}  // namespace

namespace {

// Both overloads: J is const json& (copies the attributes) or json& (moves them).
template <typename J>
Status span_from(J& j, Span* out) {
  if (!j.is_object()) return Status::corruption("span: not a JSON object");
  Span s;
  CARAPACE_RETURN_IF_ERROR(field(j, "trace_id", &s.trace_id));
  CARAPACE_RETURN_IF_ERROR(field(j, "span_id", &s.span_id));
  CARAPACE_RETURN_IF_ERROR(field(j, "parent_id", &s.parent_id));
  CARAPACE_RETURN_IF_ERROR(field(j, "session", &s.session));
  CARAPACE_RETURN_IF_ERROR(field(j, "kind", &s.kind));
  CARAPACE_RETURN_IF_ERROR(field(j, "name", &s.name));
  CARAPACE_RETURN_IF_ERROR(field(j, "open_seq", &s.open_seq));
  CARAPACE_RETURN_IF_ERROR(field(j, "close_seq", &s.close_seq));
  CARAPACE_RETURN_IF_ERROR(field(j, "start_us", &s.start_us));
  CARAPACE_RETURN_IF_ERROR(field(j, "end_us", &s.end_us));
  CARAPACE_RETURN_IF_ERROR(field(j, "status", &s.status));
  auto attrs = j.find("attrs");
  if (attrs == j.end() || !SpanAttrs::from_json(std::forward<J>(*attrs), &s.attrs)) {
    return Status::corruption("span: 'attrs' is not an object");
  }
  auto events = j.find("events");
  auto links = j.find("links");
  if (events == j.end() || !events->is_array() || links == j.end() || !links->is_array()) {
    return Status::corruption("span: 'events' or 'links' is not an array");
  }
  for (auto& e : *events) {
    SpanEvent ev;
    CARAPACE_RETURN_IF_ERROR(field(e, "seq", &ev.seq));
    CARAPACE_RETURN_IF_ERROR(field(e, "ts_us", &ev.ts_us));
    CARAPACE_RETURN_IF_ERROR(field(e, "name", &ev.name));
    auto a = e.find("attrs");
    if (a != e.end() && !SpanAttrs::from_json(std::forward<J>(*a), &ev.attrs)) {
      return Status::corruption("span: an event's 'attrs' is not an object");
    }
    s.events.push_back(std::move(ev));
  }
  for (const auto& l : *links) {
    SpanLink link;
    CARAPACE_RETURN_IF_ERROR(field(l, "trace_id", &link.trace_id));
    CARAPACE_RETURN_IF_ERROR(field(l, "span_id", &link.span_id));
    CARAPACE_RETURN_IF_ERROR(field(l, "session", &link.session));
    CARAPACE_RETURN_IF_ERROR(field(l, "seq", &link.seq));
    CARAPACE_RETURN_IF_ERROR(field(l, "reason", &link.reason));
    s.links.push_back(std::move(link));
  }
  *out = std::move(s);
  return Status();
}

}  // namespace

Status span_from_json(const nlohmann::json& j, Span* out) { return span_from(j, out); }
Status span_from_json(nlohmann::json&& j, Span* out) { return span_from(j, out); }

}  // namespace carapace
