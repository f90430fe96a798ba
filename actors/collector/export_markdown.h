// Trace export as Markdown, to paste into an issue: per session a heading
// and a table with one row per span, nested by indentation (seq, span,
// status, duration, tokens, cost, details). Recorded text is escaped so that
// it renders as text: no markup, no HTML, no link (docs/trace.md, "Export").
#pragma once

#include <string>
#include <string_view>

#include "actors/collector/export.h"

namespace carapace {

std::string export_markdown(const ExportInput& input);

// `text` as literal text inside a Markdown table cell: HTML and Markdown
// punctuation escaped, line breaks as spaces.
std::string markdown_cell(std::string_view text);

}  // namespace carapace
