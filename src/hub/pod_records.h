// What the hub knows of each pod beyond its registration (issue 28): the counts of its
// requests and of its checks, kept in the hub's database beside the ledger (database.h) so
// that a pod's record survives a hub restart and is shared by hub replicas on one
// PostgreSQL. A pod cannot wash its record by waiting for a restart, nor by registering
// with the other replica.
//
// The table holds counts only, each changed by adding (add(): one UPSERT that adds a delta,
// so two replicas counting at once lose nothing); the reputation and the flag are functions
// of the counts (checks.h: reputation_of), the same on every replica.
//
//   pod_records(pod TEXT PRIMARY KEY, requests, tokens, checked, passed, qualified_passes,
//               failed, overruled BIGINT, last_failure TEXT, updated_ms BIGINT)
//
// Thread-safe: calls are serialised on the connection (its own: not the ledger's).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "hub/database.h"

namespace herd::hub {

struct PodCounts {
  int64_t requests = 0, tokens = 0;  // answers that reached clients, their completion tokens
  int64_t checked = 0, passed = 0, failed = 0;
  // Passes decided by checkers that were themselves allowed to check (checks.h: may_check):
  // only these make a pod a checker.
  int64_t qualified_passes = 0;
  // Checks where this pod, as the checker, was overruled by the majority.
  int64_t overruled = 0;
  std::string last_failure;  // the latest failed check's reason ("" when none)

  // Adds `delta`'s counts (last_failure: replaced when delta has one).
  void add(const PodCounts& delta);
  bool operator==(const PodCounts&) const = default;
};

class PodRecords {
 public:
  // Creates the table in `db` when missing. REQUIRES: `db` outlives this and is used by
  // nothing else (one connection per thread: database.h).
  explicit PodRecords(Database& db);

  // The pod's counts, or nullopt when the database has no record of it.
  std::optional<PodCounts> load(const std::string& pod);
  // Adds `delta` to the pod's record (creating it).
  void add(const std::string& pod, const PodCounts& delta);

 private:
  Database& db_;
  std::mutex mutex_;
};

}  // namespace herd::hub
