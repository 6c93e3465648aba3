// Discovery in a build without a DNS-SD library (CMake found no dns_sd.h): browsing and
// advertising say so. The TXT codec and cluster id (discovery.cpp) work as usual.
#include "net/discovery.h"
#include "util/error.h"

namespace herd::net {

namespace {

constexpr const char* kNoLibrary = "discovery: this build has no DNS-SD library";

}  // namespace

std::vector<DiscoveredNode> browse_nodes(const BrowseOptions&) {
  throw Error("net", kNoLibrary);
}

struct NodeAdvertiser::Impl {};

NodeAdvertiser::NodeAdvertiser(const std::string&, const std::string&, uint16_t, const NodeAdvert&,
                               LogFn) {
  throw Error("net", kNoLibrary);
}

NodeAdvertiser::~NodeAdvertiser() = default;

void NodeAdvertiser::update(const NodeAdvert&) {}

}  // namespace herd::net
