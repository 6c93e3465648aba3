// libFuzzer target: a pod's registration as the hub receives it from the network
// (hub/registration.h): any bytes either parse or fail with herd::Error; anything else (a
// crash, a sanitizer report, another exception type) is a bug. What parses must
// round-trip: its body, written again, parses to the same fields. A signature made of the
// input's first bytes must never verify.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hub/registration.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::hub;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Registration r = parse_registration(text);
    const Registration again = parse_registration(registration_body(r));
    if (again.id != r.id || again.name != r.name || again.url != r.url ||
        again.models.size() != r.models.size() || again.slots != r.slots ||
        again.memory_bytes != r.memory_bytes || again.time_ms != r.time_ms ||
        again.loadable != r.loadable) {
      std::abort();
    }
    try {
      verify_registration(text, std::string(text.substr(0, 86)), r.time_ms);
      std::abort();  // a forged signature verified
    } catch (const herd::Error&) {
    }
  } catch (const herd::Error&) {
  }
  return 0;
}
