// libFuzzer target: the text of an identity file (net/identity.h) and of an allow-list
// (net/allow_list.h), both read from files a user may have edited by hand, either parse or
// fail with herd::Error. Anything else (a crash, a sanitizer report, another exception
// type) is a bug. What parses must round-trip: an identity's file text gives the same id,
// every id of a list reads back from its text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/allow_list.h"
#include "net/identity.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::net;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    NodeIdentity identity = NodeIdentity::from_text(text, "fuzz");
    if (NodeIdentity::from_text(identity.to_text(), "again").id() != identity.id()) std::abort();
  } catch (const herd::Error&) {
  }
  try {
    AllowList list = AllowList::parse(text, "fuzz");
    if (list.ids().empty()) std::abort();
    for (const NodeId& id : list.ids()) {
      if (NodeId::from_text(id.to_text(), "again") != id) std::abort();
    }
  } catch (const herd::Error&) {
  }
  return 0;
}
