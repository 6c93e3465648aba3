#include "hub/hub_page.h"

#include <httplib.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace herd::hub {
namespace {

// Scripts, styles, images and fetches from the hub only; no inline script, no frames.
constexpr const char* kPolicy =
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'none'";

// An ETag for a file: its FNV-1a 64-bit hash (the file changes only with the binary).
std::string etag(std::string_view content) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : content) h = (h ^ c) * 1099511628211ull;
  char text[24];
  std::snprintf(text, sizeof text, "\"%016llx\"", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace

void serve_hub_page(httplib::Server& http) {
  for (const server::WebAsset& asset : hub_page_assets()) {
    const std::string path = asset.path == "/index.html" ? "/" : std::string(asset.path);
    http.Get(path, [asset, tag = etag(asset.content)](const httplib::Request& req,
                                                      httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("ETag", tag);
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy", kPolicy);
      if (req.get_header_value("If-None-Match") == tag) {
        res.status = 304;
        return;
      }
      res.set_content(std::string(asset.content), std::string(asset.content_type));
    });
  }
}

}  // namespace herd::hub
