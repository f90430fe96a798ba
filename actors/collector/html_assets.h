// The trace view shared by the HTML export and the page of `carapace serve`
// (actors/collector/html/: trace_view.css, trace_view.js), built into the
// binary by cmake/embed_assets.cmake: the export inlines them into its one
// file, the server serves them as /trace_view.css and /trace_view.js.
#pragma once

#include <span>
#include <string_view>

namespace carapace::trace_html {

struct HtmlAsset {
  std::string_view path;          // "/trace_view.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every embedded file (generated).
std::span<const HtmlAsset> html_assets();

}  // namespace carapace::trace_html
