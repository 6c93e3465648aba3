// Browsing and advertising through the dns_sd API (Bonjour; Avahi's compatibility library).
// Every DNSServiceRef has a socket; we poll them and call DNSServiceProcessResult on the
// readable ones, which runs the callbacks on this thread. Avahi's library lacks
// DNSServiceGetAddrInfo, so a host's IPv4 address is asked with DNSServiceQueryRecord (A).
#include <arpa/inet.h>
#include <dns_sd.h>
#include <net/if.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "net/discovery.h"
#include "net/interfaces.h"
#include "util/error.h"

namespace herd::net {

namespace {

using Clock = std::chrono::steady_clock;

// Avahi's compatibility library prints a warning to stderr on its first call unless this
// is set; herd says for itself what discovery does. Does not override a user's setting.
void quiet_avahi_warning() {
  setenv("AVAHI_COMPAT_NOWARN", "1", 0);
}

// Avahi's library answers kDNSServiceErr_Unknown when it cannot reach avahi-daemon (no
// daemon, no system bus); Bonjour's says ServiceNotRunning, which Avahi's older dns_sd.h
// does not name.
constexpr DNSServiceErrorType kServiceNotRunning = -65563;

Error dns_sd_error(const std::string& what, DNSServiceErrorType e) {
  if (e == kServiceNotRunning || e == kDNSServiceErr_Unknown) return Error("net", kNoDaemonMessage);
  return Error("net", "discovery: " + what + " failed (DNS-SD error " + std::to_string(e) + ")");
}

// Owns one DNSServiceRef.
struct Ref {
  DNSServiceRef ref = nullptr;
  Ref() = default;
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { reset(); }
  void reset() {
    if (ref) DNSServiceRefDeallocate(ref);
    ref = nullptr;
  }
  explicit operator bool() const { return ref != nullptr; }
};

// ---- browse ----------------------------------------------------------------------------

// One service instance as seen on one interface, through resolve and address lookup.
struct Service {
  uint32_t iface = 0;
  std::string name, type, domain;
  Ref resolve, query;
  bool removed = false, failed = false, resolved = false;
  std::string host;
  uint16_t port = 0;
  std::vector<uint8_t> txt;
  std::string address;
};

struct Browse {
  Ref browse;
  std::list<Service> services;  // stable addresses: callbacks hold pointers
  DNSServiceErrorType browse_error = kDNSServiceErr_NoError;
};

void on_browse(DNSServiceRef, DNSServiceFlags flags, uint32_t iface, DNSServiceErrorType err,
               const char* name, const char* type, const char* domain, void* context) {
  auto* b = static_cast<Browse*>(context);
  if (err != kDNSServiceErr_NoError) {
    b->browse_error = err;
    return;
  }
  for (Service& s : b->services) {
    if (!s.removed && s.iface == iface && s.name == name && s.type == type && s.domain == domain) {
      if (!(flags & kDNSServiceFlagsAdd)) s.removed = true;
      return;
    }
  }
  if (!(flags & kDNSServiceFlagsAdd)) return;
  Service& s = b->services.emplace_back();
  s.iface = iface;
  s.name = name;
  s.type = type;
  s.domain = domain;
}

void on_resolve(DNSServiceRef, DNSServiceFlags, uint32_t, DNSServiceErrorType err, const char*,
                const char* host, uint16_t port_be, uint16_t txt_len, const unsigned char* txt,
                void* context) {
  auto* s = static_cast<Service*>(context);
  if (s->resolved) return;
  if (err != kDNSServiceErr_NoError) {
    s->failed = true;
    return;
  }
  s->resolved = true;
  s->host = host;
  s->port = ntohs(port_be);
  s->txt.assign(txt, txt + txt_len);
}

void on_address(DNSServiceRef, DNSServiceFlags flags, uint32_t, DNSServiceErrorType err,
                const char*, uint16_t rrtype, uint16_t, uint16_t rdlen, const void* rdata, uint32_t,
                void* context) {
  auto* s = static_cast<Service*>(context);
  if (err != kDNSServiceErr_NoError || !(flags & kDNSServiceFlagsAdd)) return;
  if (rrtype != kDNSServiceType_A || rdlen != 4 || !s->address.empty()) return;
  char text[INET_ADDRSTRLEN];
  if (inet_ntop(AF_INET, rdata, text, sizeof text)) s->address = text;
}

// Starts what each service needs next and drops what is finished.
void advance(Service& s) {
  if (s.removed || s.failed) {
    s.resolve.reset();
    s.query.reset();
    return;
  }
  if (!s.resolved && !s.resolve) {
    const DNSServiceErrorType e =
        DNSServiceResolve(&s.resolve.ref, 0, s.iface, s.name.c_str(), s.type.c_str(),
                          s.domain.c_str(), on_resolve, &s);
    if (e != kDNSServiceErr_NoError) {
      s.resolve.ref = nullptr;
      s.failed = true;
    }
  } else if (s.resolved && s.address.empty() && !s.query) {
    s.resolve.reset();
    const DNSServiceErrorType e =
        DNSServiceQueryRecord(&s.query.ref, 0, s.iface, s.host.c_str(), kDNSServiceType_A,
                              kDNSServiceClass_IN, on_address, &s);
    if (e != kDNSServiceErr_NoError) {
      s.query.ref = nullptr;
      s.failed = true;
    }
  } else if (!s.address.empty()) {
    s.resolve.reset();
    s.query.reset();
  }
}

// The interface index to advertise on for a socket bound to `host` (see the header).
uint32_t advert_interface(const std::string& host) {
  if (host.empty() || host == "0.0.0.0" || host == "::") return kDNSServiceInterfaceIndexAny;
  const std::vector<NetInterface> on = interfaces_for_host(host, list_interfaces());
  if (on.size() != 1) return kDNSServiceInterfaceIndexAny;
#if defined(__APPLE__)
  if (on.front().loopback) return kDNSServiceInterfaceIndexAny;
#endif
  const unsigned index = if_nametoindex(on.front().name.c_str());
  return index == 0 ? kDNSServiceInterfaceIndexAny : index;
}

}  // namespace

std::vector<DiscoveredNode> browse_nodes(const BrowseOptions& options) {
  quiet_avahi_warning();
  Browse b;
  const DNSServiceErrorType e = DNSServiceBrowse(&b.browse.ref, 0, kDNSServiceInterfaceIndexAny,
                                                 kServiceType, nullptr, on_browse, &b);
  if (e != kDNSServiceErr_NoError) {
    b.browse.ref = nullptr;
    throw dns_sd_error("browsing " + std::string(kServiceType), e);
  }
  const Clock::time_point deadline = Clock::now() + options.wait;
  std::vector<pollfd> fds;
  std::vector<std::pair<DNSServiceRef, Service*>> owners;  // parallel to fds
  for (;;) {
    for (Service& s : b.services) advance(s);
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    fds.clear();
    owners.clear();
    fds.push_back({DNSServiceRefSockFD(b.browse.ref), POLLIN, 0});
    owners.emplace_back(b.browse.ref, nullptr);
    for (Service& s : b.services) {
      for (Ref* r : {&s.resolve, &s.query}) {
        if (!*r) continue;
        fds.push_back({DNSServiceRefSockFD(r->ref), POLLIN, 0});
        owners.emplace_back(r->ref, &s);
      }
    }
    const int n = poll(fds.data(), fds.size(), static_cast<int>(left));
    if (n < 0 && errno != EINTR) throw Error("net", "discovery: poll failed");
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const DNSServiceErrorType pe = DNSServiceProcessResult(owners[i].first);
      if (pe == kDNSServiceErr_NoError) continue;
      if (!owners[i].second) throw dns_sd_error("browsing", pe);
      owners[i].second->failed = true;
    }
    if (b.browse_error != kDNSServiceErr_NoError) throw dns_sd_error("browsing", b.browse_error);
  }

  std::vector<DiscoveredNode> out;
  for (const Service& s : b.services) {
    if (s.removed || s.failed || s.address.empty()) continue;
    DiscoveredNode node;
    try {
      node.advert = decode_txt(s.txt);
    } catch (const Error&) {
      continue;  // a malformed or foreign record: not a node we can use
    }
    if (!options.cluster.empty() && node.advert.cluster != options.cluster) continue;
    node.instance = s.name;
    node.host = s.host;
    node.address = s.address;
    node.port = s.port;
    const std::string endpoint = node.endpoint();
    const bool seen = std::any_of(
        out.begin(), out.end(), [&](const DiscoveredNode& o) { return o.endpoint() == endpoint; });
    if (!seen) out.push_back(std::move(node));
  }
  std::sort(out.begin(), out.end(), [](const DiscoveredNode& a, const DiscoveredNode& b) {
    return a.advert.name != b.advert.name ? a.advert.name < b.advert.name
                                          : a.endpoint() < b.endpoint();
  });
  return out;
}

// ---- advertise ---------------------------------------------------------------------------

struct NodeAdvertiser::Impl {
  Ref ref;
  std::mutex mutex;  // guards ref's calls: ProcessResult on the thread, update() elsewhere
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};  // the daemon reported the registration lost
  std::thread thread;
  LogFn log;
  std::string instance;

  static void on_register(DNSServiceRef, DNSServiceFlags, DNSServiceErrorType err, const char* name,
                          const char*, const char*, void* context) {
    auto* impl = static_cast<Impl*>(context);
    if (err != kDNSServiceErr_NoError) impl->failed = true;
    if (!impl->log) return;
    if (err == kServiceNotRunning || err == kDNSServiceErr_Unknown) {
      impl->log("discovery: lost the mDNS daemon; no longer advertised on the LAN");
    } else if (err != kDNSServiceErr_NoError) {
      impl->log("discovery: advertising '" + impl->instance + "' failed (DNS-SD error " +
                std::to_string(err) + "); no longer advertised on the LAN");
    } else if (impl->instance != name) {
      impl->log("discovery: advertised as '" + std::string(name) + "' (the name was taken)");
    }
  }

  void serve() {
    const int fd = DNSServiceRefSockFD(ref.ref);
    while (!stop) {
      pollfd p{fd, POLLIN, 0};
      // Why a timeout: stop is a flag, not a pipe; 200 ms bounds the destructor's wait.
      if (poll(&p, 1, 200) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      std::lock_guard<std::mutex> lock(mutex);
      if (DNSServiceProcessResult(ref.ref) != kDNSServiceErr_NoError) {
        failed = true;
        if (log) log("discovery: lost the mDNS daemon; no longer advertised on the LAN");
      }
      if (failed) return;
    }
  }
};

NodeAdvertiser::NodeAdvertiser(const std::string& instance, const std::string& listen_host,
                               uint16_t port, const NodeAdvert& advert, LogFn log)
    : impl_(std::make_unique<Impl>()) {
  quiet_avahi_warning();
  impl_->log = std::move(log);
  // DNS-SD instance names are at most 63 bytes.
  impl_->instance = instance.substr(0, 63);
  const std::vector<uint8_t> txt = encode_txt(advert);
  const DNSServiceErrorType e = DNSServiceRegister(
      &impl_->ref.ref, 0, advert_interface(listen_host), impl_->instance.c_str(), kServiceType,
      nullptr, nullptr, htons(port), static_cast<uint16_t>(txt.size()), txt.data(),
      &Impl::on_register, impl_.get());
  if (e != kDNSServiceErr_NoError) {
    impl_->ref.ref = nullptr;
    throw dns_sd_error("advertising " + std::string(kServiceType), e);
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

NodeAdvertiser::~NodeAdvertiser() {
  impl_->stop = true;
  if (impl_->thread.joinable()) impl_->thread.join();
}

void NodeAdvertiser::update(const NodeAdvert& advert) {
  const std::vector<uint8_t> txt = encode_txt(advert);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->failed) return;  // said once, by the thread
  const DNSServiceErrorType e = DNSServiceUpdateRecord(
      impl_->ref.ref, nullptr, 0, static_cast<uint16_t>(txt.size()), txt.data(), 0);
  if (e != kDNSServiceErr_NoError) throw dns_sd_error("updating the TXT record", e);
}

}  // namespace herd::net
