#include "hub/pod_records.h"

#include <chrono>

namespace herd::hub {
namespace {

constexpr size_t kMaxFailureBytes = 1000;

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS pod_records (
  pod              TEXT PRIMARY KEY,
  requests         BIGINT NOT NULL DEFAULT 0,
  tokens           BIGINT NOT NULL DEFAULT 0,
  checked          BIGINT NOT NULL DEFAULT 0,
  passed           BIGINT NOT NULL DEFAULT 0,
  qualified_passes BIGINT NOT NULL DEFAULT 0,
  failed           BIGINT NOT NULL DEFAULT 0,
  overruled        BIGINT NOT NULL DEFAULT 0,
  last_failure     TEXT NOT NULL DEFAULT '',
  updated_ms       BIGINT NOT NULL DEFAULT 0
);
)sql";

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void PodCounts::add(const PodCounts& d) {
  requests += d.requests;
  tokens += d.tokens;
  checked += d.checked;
  passed += d.passed;
  failed += d.failed;
  qualified_passes += d.qualified_passes;
  overruled += d.overruled;
  if (!d.last_failure.empty()) last_failure = d.last_failure;
}

PodRecords::PodRecords(Database& db) : db_(db) {
  create_schema(db_, kSchema);  // two replicas at once: one after the other
}

std::optional<PodCounts> PodRecords::load(const std::string& pod) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Result r = db_.run(
      "SELECT requests, tokens, checked, passed, qualified_passes, failed, overruled, "
      "last_failure FROM pod_records WHERE pod = $1",
      {pod});
  if (r.rows.empty()) return std::nullopt;
  const Row& row = r.rows[0];
  PodCounts c;
  c.requests = row.integer(0);
  c.tokens = row.integer(1);
  c.checked = row.integer(2);
  c.passed = row.integer(3);
  c.qualified_passes = row.integer(4);
  c.failed = row.integer(5);
  c.overruled = row.integer(6);
  c.last_failure = row.text(7);
  return c;
}

void PodRecords::add(const std::string& pod, const PodCounts& d) {
  if (pod.empty() || pod.size() > 200) {
    throw Error("hub", "pod records: a pod id of " + std::to_string(pod.size()) + " bytes");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // One statement: the row is created or added to atomically (both databases' UPSERT), so
  // replicas adding at once both count. An empty last_failure keeps the stored one.
  db_.run(
      "INSERT INTO pod_records (pod, requests, tokens, checked, passed, qualified_passes, "
      "failed, overruled, last_failure, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
      "$10) ON CONFLICT (pod) DO UPDATE SET requests = pod_records.requests + "
      "excluded.requests, tokens = pod_records.tokens + excluded.tokens, checked = "
      "pod_records.checked + excluded.checked, passed = pod_records.passed + excluded.passed, "
      "qualified_passes = pod_records.qualified_passes + excluded.qualified_passes, failed = "
      "pod_records.failed + excluded.failed, overruled = pod_records.overruled + "
      "excluded.overruled, last_failure = CASE WHEN excluded.last_failure = '' THEN "
      "pod_records.last_failure ELSE excluded.last_failure END, updated_ms = "
      "excluded.updated_ms",
      {pod, d.requests, d.tokens, d.checked, d.passed, d.qualified_passes, d.failed, d.overruled,
       d.last_failure.substr(0, kMaxFailureBytes), unix_ms()});
}

}  // namespace herd::hub
