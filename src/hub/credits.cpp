#include "hub/credits.h"

#include <chrono>

#include "util/error.h"

namespace herd::hub {
namespace {

constexpr const char* kIssuer = "issuer";
constexpr const char* kFee = "fee";
constexpr const char* kWithheld = "withheld";
// Reads of a pending balance and moves of it, when another replica keeps moving it first.
constexpr int kMoveAttempts = 3;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Charge price_of(const Prices& prices, int64_t prompt_tokens, int64_t completion_tokens) {
  Charge c;
  c.client_pays = prompt_tokens * prices.prompt_token + completion_tokens * prices.completion_token;
  c.pod_earns = completion_tokens * prices.completion_token * (100 - prices.fee_percent) / 100;
  c.fee = c.client_pays - c.pod_earns;
  return c;
}

Credits::Credits(Ledger& ledger, Prices prices) : ledger_(ledger), prices_(prices) {
  if (prices_.prompt_token < 0 || prices_.completion_token < 0 || prices_.fee_percent < 0 ||
      prices_.fee_percent > 100) {
    throw Error("hub", "credits: prices must be >= 0 and the fee 0-100%");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.open_account(kIssuer, AccountKind::ISSUER);
  ledger_.open_account(kFee, AccountKind::FEE);
  ledger_.open_account(kWithheld, AccountKind::FEE);
}

std::string Credits::client_account(const net::KeyDigest& digest) {
  static const char* hex = "0123456789abcdef";
  std::string name = "client:";
  for (size_t i = 0; i < 16; ++i) {
    name += hex[digest[i] >> 4];
    name += hex[digest[i] & 15];
  }
  return name;
}

std::string Credits::client_account(std::string_view secret, std::string_view api_key) {
  if (api_key.empty()) return "client:open";
  return client_account(net::key_digest(secret, api_key));
}

std::string Credits::pod_account(const std::string& pod_id) {
  return "pod:" + pod_id;
}

std::string Credits::pending_account(const std::string& pod_id) {
  return "pod:" + pod_id + ":pending";
}

void Credits::grant(const std::string& client, int64_t credits) {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.open_account(client, AccountKind::CLIENT);
  if (credits <= 0) return;
  const Entry entries[] = {{kIssuer, -credits}, {client, credits}};
  try {
    ledger_.transfer("grant:" + client, entries, "credits granted to an API key");
  } catch (const Error&) {
    // Granted before with another amount (the hub restarted with a new --credits): the
    // first grant stands.
  }
}

void Credits::open_pod(const std::string& pod_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.open_account(pod_account(pod_id), AccountKind::POD);
  ledger_.open_account(pending_account(pod_id), AccountKind::POD);
}

bool Credits::can_pay(const std::string& client, int64_t credits) const {
  if (client == "client:open") return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.balance(client) >= credits;
}

bool Credits::charge(const std::string& request_id, const std::string& client,
                     const std::string& pod_id, const Charge& charge, const std::string& memo) {
  // An open hub's requests are paid by the issuer: pods earn all the same.
  const std::string payer = client == "client:open" ? kIssuer : client;
  std::vector<Entry> entries;
  if (charge.client_pays > 0) entries.push_back({payer, -charge.client_pays});
  if (charge.pod_earns > 0) entries.push_back({pending_account(pod_id), charge.pod_earns});
  if (charge.fee > 0) entries.push_back({kFee, charge.fee});
  if (entries.size() < 2) return false;  // nothing to move (free tokens)
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.transfer("request:" + request_id, entries, memo);
}

void Credits::verified(const std::string& request_id, const std::string& pod_id, int64_t share) {
  if (share <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string pending = pending_account(pod_id);
  if (ledger_.balance(pending) < share) return;  // settled or withheld already
  const Entry entries[] = {{pending, -share}, {pod_account(pod_id), share}};
  try {
    ledger_.transfer("verified:" + request_id, entries, "request " + request_id + " checked");
  } catch (const InsufficientFunds&) {
    // Another replica settled or withheld it between the balance and the transfer.
  }
}

int64_t Credits::withhold(const std::string& pod_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string pending = pending_account(pod_id);
  int64_t withheld = 0;
  // The balance read may be stale by the transfer (another replica charged, settled or
  // withheld meanwhile): refused whole, it is read again. Each attempt has its own key.
  for (int attempt = 0; attempt < kMoveAttempts; ++attempt) {
    const int64_t amount = ledger_.balance(pending);
    if (amount <= 0) break;
    const Entry entries[] = {{pending, -amount}, {kWithheld, amount}};
    try {
      ledger_.transfer("withhold:" + pod_id + ":" + std::to_string(unix_ms()) + ":" +
                           std::to_string(++withholds_),
                       entries, reason.substr(0, 900));
      withheld += amount;
      break;
    } catch (const InsufficientFunds&) {
    }
  }
  return withheld;
}

int64_t Credits::settle(const std::vector<std::string>& pods, const std::string& period) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t paid = 0;
  for (const std::string& pod : pods) {
    const std::string pending = pending_account(pod);
    // As withhold(): another replica settling the same pod at once moves the balance first
    // and this transfer is refused whole (no balance goes below zero), so it is read again;
    // what is left (new charges, or nothing) is paid. A refused transfer applied nothing,
    // so its key may be used again with other entries.
    for (int attempt = 0; attempt < kMoveAttempts; ++attempt) {
      const int64_t amount = ledger_.balance(pending);
      if (amount <= 0) break;
      const Entry entries[] = {{pending, -amount}, {pod_account(pod), amount}};
      try {
        if (ledger_.transfer("settle:" + pod + ":" + period, entries,
                             "period " + period + " settled")) {
          paid += amount;
        }
        break;
      } catch (const InsufficientFunds&) {
      }
    }
  }
  return paid;
}

std::vector<std::string> Credits::verify() const {
  std::lock_guard<std::mutex> lock(mutex_);  // GET /api/ledger runs beside charges
  return ledger_.verify();
}

int64_t Credits::balance(const std::string& account) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.balance(account);
}

std::vector<AccountBalance> Credits::accounts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.accounts();
}

std::vector<HistoryRow> Credits::history(const std::string& account) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.history(account);
}

}  // namespace herd::hub
