// BoundedJson: parsing JSON text from outside with a bound on its nesting
// depth, and measuring the depth of text already stored.
//
// nlohmann::json parses and frees iteratively, but copying, comparing and
// dumping a value recurse once per level: a value nested 100,000 deep kills
// the process that prints it. Every JSON text from outside (a model's reply,
// tool arguments, an MCP message, a scenario, a config, a fault plan, a
// bundle, a request to serve) goes through parse_bounded_json(), which
// refuses it before a value is built; a reader of stored events checks
// json_depth_exceeds() before it parses what a log holds, and shows such a
// text as a string instead. Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/limits.h"
#include "base/status.h"

namespace carapace {

// Whether `text`, read as JSON, opens more than `max_depth` arrays and
// objects inside one another. Linear, no allocation; brackets inside strings
// (escapes included) do not count. Stops at the first level past the bound.
bool json_depth_exceeds(std::string_view text, int max_depth = limits::kJsonDepth);

// Parses `text` into `*out`. A text nested deeper than `max_depth` is refused
// before parsing: invalid_argument "WHAT: JSON nested deeper than N levels".
// A text that is not JSON: invalid_argument "WHAT is not valid JSON: <the
// parser's reason, with its byte position>". `what` names the input for the
// message ("the reply of the model", "config.json"). Never throws.
Status parse_bounded_json(std::string_view text, std::string_view what, nlohmann::json* out,
                          int max_depth = limits::kJsonDepth);

// For a reader of text already held (an event's JSON field, a stored body or
// span, a value inside a parsed reply): the value, or a discarded value
// (is_discarded()) when `text` is not JSON or nests deeper than `max_depth`,
// so the caller shows it as text. What it returns can be copied, compared
// and dumped without exhausting the stack. Never throws.
nlohmann::json parse_stored_json(std::string_view text, int max_depth = limits::kJsonDepth);

}  // namespace carapace
