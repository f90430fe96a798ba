#include "tools/serve/web_assets.h"

namespace carapace::web {

const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const auto& asset : web_assets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace carapace::web
