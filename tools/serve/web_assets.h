// The files of the web page `carapace serve` shows (tools/serve/page/),
// built into the binary (cmake/embed_assets.cmake): nothing is read from
// disk or fetched at run time.
#pragma once

#include <span>
#include <string_view>

#include "actors/collector/html_assets.h"

namespace carapace::web {

// A path ("/index.html"), its content type and its bytes: the same shape as the trace view's files.
using WebAsset = trace_html::HtmlAsset;

// Every embedded file (generated).
std::span<const WebAsset> web_assets();

// The file served at `path` ("/" is "/index.html"); nullptr if none.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace carapace::web
