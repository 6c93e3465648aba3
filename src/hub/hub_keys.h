// Who may do what at the hub (issue 28; docs/network.md, "Keys"): clients, by their API keys
// (--api-key-file), each with an account named by its key's HMAC-SHA256 under the hub's
// secret; and operators (--operator-key-file), who may read the ledger. Keys are looked up in
// constant time (net/api_keys.h).
//
//   GET /api/ledger              an operator key: 200; a client key: 403 (naming its own
//                                account); another key or none: 401
//   GET /api/ledger?account=A    an operator key, or the client key whose account A is: 200;
//                                another client's key: 403; another key or none: 401
// A hub without operator keys answers 403 to all but a client's own account.
//
// The secret makes an account name unguessable from a key and a key unfindable from the
// ledger (an unkeyed hash of a weak key is found by trying keys). Every replica of a hub
// needs the same secret: its account names are in the shared ledger.
//
// Secret file (text; mode 0600; created with kKeySecretBytes random bytes on first use, as a
// node identity is):
//   # comment lines and blank lines are ignored
//   herd-hub-secret-v1 <64 hex digits>
// Anything else is an error naming the file, which is never replaced (a new secret renames
// every client's account).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/api_keys.h"

namespace herd::hub {

// The secret at `path` (kKeySecretBytes bytes); created there when there is no file. Throws
// herd::Error("hub", ...) for a file every user may read or that is not a secret file.
std::string load_or_create_hub_secret(const std::filesystem::path& path);
// $XDG_DATA_HOME/herd/hub.secret, else $HOME/.local/share/herd/hub.secret (beside the
// default books). The caller passes the environment's values (null: unset).
std::filesystem::path default_hub_secret_path(const char* xdg_data_home, const char* home);

class HubKeys {
 public:
  // REQUIRES: secret.size() == net::kKeySecretBytes, or empty: a random secret (accounts
  // named for this object's life only: tests). Throws herd::Error naming a bad key.
  HubKeys(std::string_view secret, const std::vector<std::string>& client_keys,
          const std::vector<std::string>& operator_keys);

  // No client keys: every client is client:open.
  bool open() const { return clients_.empty(); }
  size_t n_clients() const { return clients_.size(); }
  size_t n_operators() const { return operators_.size(); }
  // The account of the client whose `Authorization` header this is ("client:open" on an
  // open hub); nullopt when it holds no client key.
  std::optional<std::string> client_account(std::string_view authorization) const;
  // Every client key's account, in the order the keys were given.
  std::vector<std::string> accounts() const;

  struct Refusal {
    int status = 401;
    std::string message;
  };
  // Why a request with this `Authorization` header may not read the ledger (`account`
  // empty: every balance; else that account's history); nullopt when it may.
  std::optional<Refusal> ledger_refusal(std::string_view authorization,
                                        std::string_view account) const;

 private:
  net::ApiKeys clients_;    // under the hub's secret: their digests name the accounts
  net::ApiKeys operators_;  // under a random secret
};

}  // namespace herd::hub
