// What the hub charges and pays (issue 19; docs/network.md), as transfers of the ledger
// (ledger.h). Accounts, by name:
//
//   issuer               where credits come from: the grants to clients' keys
//   client:<key hmac>    a client's credits (HMAC-SHA256 of its API key under the hub's
//                        secret, hub_keys.h: keys are never stored, and an account cannot
//                        be found from a key without the secret); client:open on a hub
//                        without keys, which the issuer funds
//   pod:<id>:pending     what a pod earned and was not yet verified or settled
//   pod:<id>             what a pod earned for good
//   fee                  the hub's share
//   withheld             what pods caught cheating earned in their period
//
// A served request is charged once, under its request id (the transfer key: a retried
// request is never charged twice): the client pays prompt and completion tokens at their
// prices; the pod's pending account gets the completion tokens' share after the fee; the fee
// account the rest. A check that passes moves that request's share to the pod's own account
// at once; settle() moves what is pending of pods in good standing every period; a failed
// check moves everything pending of the pod to `withheld`.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "hub/ledger.h"
#include "net/api_keys.h"

namespace herd::hub {

struct Prices {
  int64_t prompt_token = 1;      // what a client pays per prompt token
  int64_t completion_token = 4;  // ... per generated token
  int64_t fee_percent = 10;      // the hub's part of the completion tokens' price
};

struct Charge {
  int64_t client_pays = 0;
  int64_t pod_earns = 0;
  int64_t fee = 0;
};

// The split of a request's price. Integer credits: the pod's share rounds down.
Charge price_of(const Prices& prices, int64_t prompt_tokens, int64_t completion_tokens);

class Credits {
 public:
  // REQUIRES: `ledger` outlives this. Opens the issuer, fee and withheld accounts.
  Credits(Ledger& ledger, Prices prices);

  // The account of the API key with this digest under the hub's secret (its first 16 bytes
  // in hex: ample against collisions between clients).
  static std::string client_account(const net::KeyDigest& digest);
  // The account of an API key under the hub's secret ("" on a hub without keys:
  // client:open). REQUIRES: secret.size() == net::kKeySecretBytes.
  static std::string client_account(std::string_view secret, std::string_view api_key);
  static std::string pod_account(const std::string& pod_id);
  static std::string pending_account(const std::string& pod_id);

  // Opens the client's account and grants it `credits` once (the grant's key is the
  // account's: again on every start, it is applied only the first time).
  void grant(const std::string& client, int64_t credits);
  // Opens a pod's accounts.
  void open_pod(const std::string& pod_id);
  // Whether the client has at least `credits` (an open hub's client always has).
  bool can_pay(const std::string& client, int64_t credits) const;
  // Charges a served request under `request_id`. False when it was charged before. Throws
  // herd::Error when the client cannot pay it (the ledger's message).
  bool charge(const std::string& request_id, const std::string& client, const std::string& pod_id,
              const Charge& charge, const std::string& memo);
  // A check of the request passed: its share leaves pending for the pod's own account (when
  // it is still pending: a settle, here or on another replica, may have moved it already).
  void verified(const std::string& request_id, const std::string& pod_id, int64_t share);
  // A check failed: everything pending of the pod is withheld. Returns the amount.
  int64_t withhold(const std::string& pod_id, const std::string& reason);
  // Moves what is pending of each pod in `pods` to its own account (`period` names the
  // transfer: once per pod and period; replicas use periods of their own). Returns what it
  // paid. Replicas settling the same pods at once never pay a credit twice: the ledger
  // refuses the later transfer (an overdraw), which reads the balance again and pays what
  // is left, if anything. Throws herd::Error only when the database fails.
  int64_t settle(const std::vector<std::string>& pods, const std::string& period);

  int64_t balance(const std::string& account) const;
  std::vector<std::string> verify() const;
  // Every account's balance, read at once (one query: they sum to zero); an account's
  // history (the audit trail: every entry with its transfer and the balance after it).
  std::vector<AccountBalance> accounts() const;
  std::vector<HistoryRow> history(const std::string& account) const;
  Ledger& ledger() { return ledger_; }
  const Prices& prices() const { return prices_; }

 private:
  Ledger& ledger_;
  Prices prices_;
  mutable std::mutex mutex_;  // the ledger's connection is used by one thread at a time
  uint64_t withholds_ = 0;
};

}  // namespace herd::hub
