// JSON rendering of events and states, for display and --json output.
//
// Generated from the same field lists as the binary codec, so a new field
// shows up here without further code. Tool arguments (JsonText) render as JSON
// values; bytes that are not UTF-8 are replaced, never rejected.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "events/events.h"
#include "events/session_state.h"

namespace carapace {

// {"seq": 7, "ts_us": ..., "type": "tool.completed", "data": {...}}
nlohmann::json event_to_json(const Event& event);

// The body's fields alone.
nlohmann::json body_to_json(const EventBody& body);

nlohmann::json state_to_json(const SessionState& state);

}  // namespace carapace
