#include "hub/pod_clients.h"

#include <httplib.h>

namespace herd::hub {

std::unique_ptr<httplib::Client> PodClients::make(const std::string& url,
                                                  time_t read_seconds) const {
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  auto client = std::make_unique<httplib::Client>(base);
  if (!client->is_valid()) return nullptr;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (!ca_file_.empty()) client->set_ca_cert_path(ca_file_.c_str());
#endif
  client->set_connection_timeout(5);
  client->set_read_timeout(read_seconds);
  return client;
}

}  // namespace herd::hub
