// The files of the web page `carapace serve` shows (tools/serve/page/),
// built into the binary (cmake/embed_assets.cmake): nothing is read from
// disk or fetched at run time.
#pragma once

#include <span>
#include <string_view>

namespace carapace::web {

struct WebAsset {
  std::string_view path;          // "/index.html"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view body;
};

// Every embedded file (generated).
std::span<const WebAsset> web_assets();

// The file served at `path` ("/" is "/index.html"); nullptr if none.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace carapace::web
