#include "hub/pod_clients.h"

#include <httplib.h>

#include <exception>

namespace herd::hub {

std::unique_ptr<httplib::Client> PodClients::make(const PodAddress& address,
                                                  time_t read_seconds) const {
  try {
    auto client = std::make_unique<httplib::Client>(address.base_url());
    if (!client->is_valid()) return nullptr;
    if (!address.ip.empty() && address.ip != address.host) {
      client->set_hostname_addr_map({{address.host, address.ip}});
    }
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (!ca_file_.empty()) client->set_ca_cert_path(ca_file_.c_str());
#endif
    client->set_connection_timeout(5);
    client->set_read_timeout(read_seconds);
    return client;
  } catch (const std::exception&) {
    return nullptr;  // httplib parses the URL again (a port it cannot read throws)
  }
}

}  // namespace herd::hub
