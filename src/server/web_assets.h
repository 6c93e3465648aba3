// The web page's files (web/ in the repository), embedded into the binary at build time
// by embed_web.cmake, so that `herd serve` needs no files beside it and no CDN. The hub's
// page (web/hub/) is embedded the same way, as herd::hub::hub_page_assets() (hub/hub_page.h).
#pragma once

#include <span>
#include <string_view>

namespace herd::server {

struct WebAsset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view content;
};

std::span<const WebAsset> web_assets();

}  // namespace herd::server
