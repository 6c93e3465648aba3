#include "hub/verifier.h"

#include <httplib.h>

#include <algorithm>
#include <tuple>

#include "util/error.h"

namespace herd::hub {

using json = nlohmann::json;

Verifier::Verifier(VerifierOptions options, std::mt19937_64 rng, PodTable& pods,
                   const PodClients& clients, Credits& credits)
    : options_(options), pods_(pods), clients_(clients), credits_(credits), rng_(rng) {}

bool Verifier::untrusted(const std::string& pod) const {
  return pods_.record(pod).passed == 0;
}

std::vector<std::string> Verifier::probation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {probation_.begin(), probation_.end()};
}

Outcome Verifier::check_now(const Served& s) {
  if (s.token_ids.empty() || static_cast<int64_t>(s.token_ids.size()) != s.completion_tokens) {
    return Outcome::NONE;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_[s.pod_id];
    probation_.insert(s.pod_id);
  }
  return check(s);
}

void Verifier::consider(Served s, Outcome checked) {
  // Checked: a sample, whole answers with tokens (ids the pod gave for every one it was
  // paid for).
  if (checked != Outcome::NONE || s.pod_id.empty() || s.token_ids.empty() ||
      static_cast<int64_t>(s.token_ids.size()) != s.completion_tokens) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const PodRecord record = pods_.record(s.pod_id);
  const double draw = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (!should_check(record.checked + static_cast<int64_t>(queued_checks_of(s.pod_id)),
                    options_.check_rate, draw)) {
    return;
  }
  if (queue_.size() >= kMaxQueuedChecks) {
    ++totals_.checks_skipped;
    return;
  }
  // A pod's first check goes first: until its verdict, the pod is on probation.
  const bool first_of_pod = record.checked == 0 && !pending_.contains(s.pod_id);
  ++pending_[s.pod_id];
  if (record.passed == 0) probation_.insert(s.pod_id);
  if (first_of_pod) {
    queue_.push_front(std::move(s));
  } else {
    queue_.push_back(std::move(s));
  }
  changed_.notify_all();
}

size_t Verifier::queued_checks_of(const std::string& pod) const {
  return static_cast<size_t>(std::count_if(queue_.begin(), queue_.end(),
                                           [&](const Served& c) { return c.pod_id == pod; }));
}

void Verifier::done_pending(const std::string& pod) {
  const auto it = pending_.find(pod);
  if (it != pending_.end() && --it->second > 0) return;
  if (it != pending_.end()) pending_.erase(it);
  probation_.erase(pod);
}

// Pods that may check a request: live, trusted, others; the most trusted first, in random
// order among equals (a pod cannot know which pod will check it, nor two pods agree to
// check each other).
std::vector<CheckerPod> Verifier::checkers(const Served& s) {
  std::vector<CheckerPod> found = pods_.checkers(s.model, s.pod_id);
  std::vector<std::tuple<double, uint64_t, size_t>> order;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < found.size(); ++i) order.emplace_back(-found[i].reputation, rng_(), i);
  }
  std::sort(order.begin(), order.end());
  std::vector<CheckerPod> out;
  for (const auto& [rep, draw, i] : order) out.push_back(std::move(found[i]));
  return out;
}

// Asks one checker; nullopt when it could not answer (not a verdict on the pod).
std::optional<Verdict> Verifier::ask(const std::string& url, const Served& s, bool& unverifiable) {
  const auto client = clients_.make(url, 300);
  if (!client) return std::nullopt;
  const json request = {
      {"endpoint", s.endpoint}, {"request", s.body}, {"completion_token_ids", s.token_ids}};
  const httplib::Result r = client->Post("/api/verify", request.dump(), "application/json");
  if (!r) return std::nullopt;
  if (r->status == 422) {
    unverifiable = true;
    return std::nullopt;
  }
  if (r->status == 400) {
    // The checker's vocabulary has no such token: invented, or another model's.
    const json answer = json::parse(r->body, nullptr, false);
    const std::string message =
        answer.is_object() ? answer["error"].value("message", std::string()) : std::string();
    if (message.find("completion_token_ids") != std::string::npos) {
      Verdict v;
      v.tokens = static_cast<int64_t>(s.token_ids.size());
      v.implausible = v.tokens;
      v.detail = message;
      return v;
    }
    return std::nullopt;
  }
  if (r->status != 200) return std::nullopt;
  try {
    return judge(json::parse(r->body), s.token_ids.size(), options_.thresholds);
  } catch (const std::exception&) {
    return std::nullopt;  // not an answer: the checker's fault, not the pod's
  }
}

Outcome Verifier::check(const Served& s) {
  const std::vector<CheckerPod> candidates = checkers(s);
  // A failed check is confirmed by a second checker when there is one: a lone checker
  // that lies cannot take an honest pod's reputation when others can say otherwise.
  std::optional<Verdict> first, second;
  bool unverifiable = false;
  size_t next = 0;
  while (!first && next < candidates.size() && !unverifiable) {
    first = ask(candidates[next++].url, s, unverifiable);
  }
  if (first && !first->passed) {
    while (!second && next < candidates.size() && !unverifiable) {
      second = ask(candidates[next++].url, s, unverifiable);
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_pending(s.pod_id);
  if (!first) {
    ++(unverifiable || candidates.empty() ? totals_.checks_skipped : totals_.check_errors);
    return Outcome::NONE;
  }
  ++totals_.checks;
  const bool failed = !first->passed && (!second || !second->passed);
  if (!first->passed && second && second->passed) ++totals_.disagreements;
  if (!failed) {
    const Verdict& pass = first->passed ? *first : *second;
    totals_.passed_min_probability = std::min(totals_.passed_min_probability, pass.min_probability);
    totals_.passed_max_gap = std::max(totals_.passed_max_gap, pass.max_gap);
    totals_.passed_min_z = std::min(totals_.passed_min_z, pass.z);
    probation_.erase(s.pod_id);
  } else {
    ++totals_.checks_failed;
    totals_.failed_tokens += first->tokens;
    totals_.failed_implausible += first->implausible;
  }
  std::string failure;
  pods_.update_record(s.pod_id, [&](PodRecord& record) {
    ++record.checked;
    if (!failed) {
      ++record.passed;
      // A pod caught once stays below kMinReputation: checks of its requests that were
      // queued before the verdict do not bring it back.
      if (record.failed == 0)
        record.reputation = std::min(1.0, record.reputation + kReputationGain);
    } else {
      ++record.failed;
      record.reputation *= kReputationLoss;
      record.last_failure = "request " + s.request_id + ": " + std::to_string(first->implausible) +
                            " of " + std::to_string(first->tokens) + " tokens implausible; " +
                            first->detail;
    }
    failure = record.last_failure;
  });
  lock.unlock();  // the books, outside the verifier's lock
  try {
    if (failed) {
      credits_.withhold(s.pod_id, "failed check: " + failure);
    } else {
      credits_.verified(s.request_id, s.pod_id, s.charge.pod_earns);
    }
  } catch (const Error&) {
  }
  return failed ? Outcome::FAILED : Outcome::PASSED;
}

void Verifier::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Served s = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    check(s);
    lock.lock();
    --running_;
    changed_.notify_all();
  }
}

void Verifier::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
}

bool Verifier::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return queue_.empty() && running_ == 0; });
}

json Verifier::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {{"checked", totals_.checks},
          {"failed", totals_.checks_failed},
          {"skipped", totals_.checks_skipped},
          {"errors", totals_.check_errors},
          {"disagreements", totals_.disagreements},
          {"passed_min_probability", totals_.passed_min_probability},
          {"passed_max_gap", totals_.passed_max_gap},
          {"passed_min_z", totals_.passed_min_z},
          {"failed_tokens", totals_.failed_tokens},
          {"failed_implausible", totals_.failed_implausible},
          {"queued", queue_.size()},
          {"sample_rate", options_.check_rate},
          {"always_checked", kAlwaysChecked},
          {"min_probability", options_.thresholds.min_probability},
          {"greedy_gap", options_.thresholds.greedy_gap},
          {"min_z", options_.thresholds.min_z}};
}

}  // namespace herd::hub
