// Trace export as one self-contained HTML page, to open in a browser or
// attach to a bug report: each session's spans as a collapsible tree beside
// a timeline; clicking a span shows its attributes, events, links and (with
// --with-content) its message content and verbatim bodies (docs/trace.md,
// "Export").
//
// The tree, timeline and details are the trace view shared with the page of
// `carapace serve` (actors/collector/html/trace_view.{js,css}, embedded by
// cmake/embed_assets.cmake: html_assets.h), inlined here.
//
// Nothing is fetched: the CSS and the script are inline, and a
// Content-Security-Policy forbids every other source. The data is one JSON
// document in a <script type="application/json"> element with '<', '>' and
// '&' written as \u escapes, and the page puts it on screen with
// textContent only: a hostile span name or body is shown, never run.
#pragma once

#include <string>
#include <string_view>

#include "actors/collector/export.h"

namespace carapace {

std::string export_html(const ExportInput& input);

// JSON text made safe inside a <script> element (no '<', '>', '&', U+2028, U+2029).
std::string html_script_json(const nlohmann::json& j);

}  // namespace carapace
