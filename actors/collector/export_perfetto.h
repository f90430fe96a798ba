// Trace export as Chrome trace-event JSON ({"traceEvents": [...],
// "displayTimeUnit": "ms"}), which Perfetto's UI and chrome://tracing open
// (docs/trace.md, "Export"):
//
//   - a process per session (pid 1, 2, …; "process_name" metadata);
//   - a track per actor kind: "session" (session, turns, resumes, hooks not
//     about a tool call), "provider" (model calls), "tools" (tool calls and
//     their hooks); calls that overlap go on further tracks of the kind
//     ("tools 2"), so that the slices on one track nest ("thread_name");
//   - a complete event ("X", ts/dur in µs) per span, its attributes as args;
//   - an instant event ("i") per retry, fault, crash, rollback and trim;
//   - a flow ("s" → "f", bound to the enclosing slice) from each model call
//     to the tool calls it asked for.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "actors/collector/export.h"

namespace carapace {

nlohmann::json perfetto_trace(const ExportInput& input);
std::string export_perfetto(const ExportInput& input);

}  // namespace carapace
