// Reading one streamed event's JSON with simdjson: the stream decoders' hot
// path, an event per token or fragment (nlohmann_json, which builds a tree
// of maps and strings, stays where speed does not matter: whole bodies,
// requests). The lookups answer as the decoders' nlohmann helpers did: an
// empty string, 0 or nothing for a field that is missing or of another
// type, and for a value that is not an object.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace carapace::event_json {

using Element = simdjson::dom::element;
// A value that may be absent: what a lookup gives.
using Value = std::optional<Element>;

// One per decoder (one per attempt): it keeps its buffers from event to
// event. Depth is bounded at limits::kJsonDepth, as parse_stored_json's (one
// level more with an empty container innermost: event_json.cc).
class Parser {
 public:
  Parser();
  // Parses `data` (copied into the parser's padded buffer); the root is
  // valid until the next parse. Nothing if it is not JSON, or too deep.
  Value parse(std::string_view data);

 private:
  simdjson::dom::parser parser_;
  bool allocated_ = false;
};

bool is_object(const Value& v);
// The array `v` is, in *out; false when it is none.
bool array(const Value& v, simdjson::dom::array* out);
// The member `key` of an object; nothing when `object` is not one or has none.
Value field(const Value& object, std::string_view key);
bool has(const Value& object, std::string_view key);
// The string member `key`, "" otherwise (a view into the parser's buffer).
std::string_view str(const Value& object, std::string_view key);
// The non-negative integer member `key`, 0 otherwise.
uint64_t num(const Value& object, std::string_view key);
// The integer member `key`, cast to 32 bits as nlohmann's get<int32_t> does.
std::optional<int32_t> integer(const Value& object, std::string_view key);
// A value as nlohmann_json dumps it (compact, keys sorted): for what is
// recorded as text and must read as it did before.
std::string dump_as_nlohmann(Element value);

}  // namespace carapace::event_json
