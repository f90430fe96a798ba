// One readable line per event, for `carapace log show` and similar views.
#pragma once

#include <string>

#include "events/events.h"

namespace carapace {

// The event's content in a few words: "turn 3: 2 tool calls (shell, read_file), 1,204 in / 88 out tokens".
// Long texts are cut to a preview and newlines shown as "\n". Never empty.
std::string event_summary(const Event& event);

// Cuts `text` to at most `max_chars` characters on one line, quoting it.
std::string quote_preview(std::string_view text, size_t max_chars);

}  // namespace carapace
