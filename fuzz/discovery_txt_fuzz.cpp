// libFuzzer target: a DNS-SD TXT record from the LAN (anyone may advertise _herd._tcp)
// given to the discovery decoder either decodes or fails with herd::Error. Anything else
// (a crash, a sanitizer report, another exception type) is a bug. What decodes must
// encode within the 255-byte strings and decode again to the same advert.
#include <cstdint>
#include <cstdlib>

#include "net/discovery.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::net;
  NodeAdvert advert;
  try {
    advert = decode_txt(ConstBytes(data, size));
  } catch (const herd::Error&) {
    return 0;
  }
  if (advert.n_models < advert.models.size()) std::abort();
  NodeAdvert again;
  try {
    again = decode_txt(encode_txt(advert));
  } catch (const herd::Error&) {
    std::abort();  // what decoded must survive its own encoding
  }
  // The model list may be cut to fit 255 bytes; everything else round-trips. bw is printed
  // with two decimals, so only its rounding may differ.
  if (again.name != advert.name || again.cluster != advert.cluster ||
      again.version != advert.version || again.cores != advert.cores ||
      again.free_memory_bytes != advert.free_memory_bytes || again.n_models != advert.n_models) {
    std::abort();
  }
  return 0;
}
