#include "base/bounded_json.h"

#include <string>

#include <nlohmann/json.hpp>

namespace carapace {

bool json_depth_exceeds(std::string_view text, int max_depth) {
  int depth = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    switch (*p) {
      case '[':
      case '{':
        if (++depth > max_depth) return true;
        ++p;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        ++p;
        break;
      case '"':
        // Skip the string: up to the next quote not escaped by a backslash.
        for (++p; p < end && *p != '"'; ++p) {
          if (*p == '\\' && p + 1 < end) ++p;
        }
        if (p < end) ++p;
        break;
      default:
        ++p;
    }
  }
  return false;
}

Status parse_bounded_json(std::string_view text, std::string_view what, nlohmann::json* out, int max_depth) {
  if (json_depth_exceeds(text, max_depth)) {
    return Status::invalid_argument(std::string(what) + ": JSON nested deeper than " + std::to_string(max_depth) +
                                    " levels (the limit on JSON depth, docs/config.md)");
  }
  try {
    *out = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 3: ..." without the tag.
    std::string reason = e.what();
    if (auto close = reason.find("] "); reason.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
      reason.erase(0, close + 2);
    }
    return Status::invalid_argument(std::string(what) + " is not valid JSON: " + reason);
  } catch (const std::exception& e) {  // bad_alloc: a text too large to hold
    return Status::invalid_argument(std::string(what) + " could not be read as JSON: " + e.what());
  }
  return Status::ok_status();
}

nlohmann::json parse_stored_json(std::string_view text, int max_depth) {
  if (json_depth_exceeds(text, max_depth)) return nlohmann::json(nlohmann::json::value_t::discarded);
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  } catch (const std::exception&) {  // bad_alloc
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

}  // namespace carapace
