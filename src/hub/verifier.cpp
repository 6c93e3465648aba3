#include "hub/verifier.h"

#include <httplib.h>

#include <algorithm>
#include <tuple>

#include "http/bounded_json.h"
#include "hub/answer_limits.h"
#include "util/error.h"

namespace herd::hub {

using json = nlohmann::json;

Verifier::Verifier(VerifierOptions options, std::mt19937_64 rng, PodTable& pods,
                   const PodClients& clients, Credits& credits)
    : options_(options), pods_(pods), clients_(clients), credits_(credits), rng_(rng) {}

bool Verifier::untrusted(const std::string& pod) const {
  return !pods_.record(pod).trusted();
}

std::vector<std::string> Verifier::probation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {probation_.begin(), probation_.end()};
}

Outcome Verifier::check_now(const Served& s) {
  if (s.fault.empty() && s.token_ids.empty()) {
    // No tokens to score (an answer ended at once): not sent while a pod could check its
    // others, so no untrusted answer reaches a client unchecked where checks can be made.
    return pods_.checkers(s.model, s.pod_id).empty() ? Outcome::NONE : Outcome::UNANSWERED;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_[s.pod_id];
    probation_.insert(s.pod_id);
  }
  return check(s);
}

void Verifier::consider(Served s, Outcome checked) {
  // Checked: a sample of whole answers with tokens, and every answer with a fault.
  if (checked != Outcome::NONE || s.pod_id.empty() || (s.fault.empty() && s.token_ids.empty())) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const PodRecord record = pods_.record(s.pod_id);
  const double draw = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (s.fault.empty() &&
      !should_check(record.checked + pending_of(s.pod_id), options_.check_rate, draw)) {
    return;
  }
  if (queue_.size() >= kMaxQueuedChecks) {
    ++totals_.checks_skipped;
    return;
  }
  // A pod's first check goes first: until its verdict, the pod is on probation.
  const bool first_of_pod =
      (record.checked == 0 && !pending_.contains(s.pod_id)) || !s.fault.empty();
  ++pending_[s.pod_id];
  if (!record.trusted()) probation_.insert(s.pod_id);
  if (first_of_pod) {
    queue_.push_front(std::move(s));
  } else {
    queue_.push_back(std::move(s));
  }
  changed_.notify_all();
}

int64_t Verifier::pending_of(const std::string& pod) const {
  const auto it = pending_.find(pod);
  return it == pending_.end() ? 0 : it->second;
}

void Verifier::done_pending(const std::string& pod) {
  const auto it = pending_.find(pod);
  if (it != pending_.end() && --it->second > 0) return;
  if (it != pending_.end()) pending_.erase(it);
  probation_.erase(pod);
}

// Pods that may check a request: live, may check, others; the most trusted first, in random
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
std::optional<Verdict> Verifier::ask(const PodAddress& checker, const Served& s,
                                     bool& unverifiable) {
  try {
    return ask_once(checker, s, unverifiable);
  } catch (const std::exception&) {
    return std::nullopt;  // a request that cannot be sent (a body json cannot dump)
  }
}

std::optional<Verdict> Verifier::ask_once(const PodAddress& checker, const Served& s,
                                          bool& unverifiable) {
  const json request = {
      {"endpoint", s.endpoint}, {"request", s.body}, {"completion_token_ids", s.token_ids}};
  // A checker answering past its cap is no answer (answer_limits.h): another is asked.
  const PodAnswer r = clients_.post(checker, "/api/verify", request.dump(),
                                    verify_answer_limits(s.token_ids.size()));
  if (!r.answered()) return std::nullopt;
  if (r.status == 422) {
    unverifiable = true;
    return std::nullopt;
  }
  if (r.status == 400) {
    // The checker's vocabulary has no such token: invented, or another model's.
    const json answer = http::parse_bounded_json(r.body);
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
  if (r.status != 200) return std::nullopt;
  const json answer = http::parse_bounded_json(r.body);
  if (answer.is_discarded()) return std::nullopt;  // not JSON: the checker's fault
  try {
    Verdict v = judge(answer, s.token_ids.size(), options_.thresholds);
    const std::string mismatch = v.passed ? text_mismatch(s.text, answer) : "";
    if (!mismatch.empty()) {
      v.passed = false;
      v.conclusive = true;
      v.implausible = std::max<int64_t>(v.implausible, 1);
      v.detail = mismatch;
    }
    return v;
  } catch (const std::exception&) {
    return std::nullopt;  // not an answer: the checker's fault, not the pod's
  }
}

Outcome Verifier::check(const Served& s) {
  // The votes, in the order asked, and the first verdict of each side (for the counts).
  std::vector<Vote> votes;
  std::optional<Verdict> passing, failing;
  bool unverifiable = false, no_checker = false;
  if (!s.fault.empty()) {
    // What no honest pod answers: failed without asking anyone.
    Verdict v;
    v.tokens = static_cast<int64_t>(s.token_ids.size());
    v.implausible = v.tokens;
    v.detail = s.fault;
    failing = v;
    votes.push_back({"", false});
  } else {
    const std::vector<CheckerPod> candidates = checkers(s);
    no_checker = candidates.empty();
    bool confirm = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      confirm = std::uniform_real_distribution<double>(0, 1)(rng_) < kConfirmRate;
    }
    confirm = confirm || !pods_.record(s.pod_id).trusted();
    for (size_t next = 0; next < candidates.size() && !unverifiable &&
                          (votes.empty() || wants_another(votes, confirm));
         ++next) {
      const std::optional<Verdict> v = ask(candidates[next].address, s, unverifiable);
      if (!v) continue;
      votes.push_back({candidates[next].id, v->passed});
      std::optional<Verdict>& side = v->passed ? passing : failing;
      if (!side) side = v;
    }
  }
  const Decision d = decide(votes);
  // A pass on too few sampled tokens proves nothing (checks.h): no trust, no payment now.
  const bool inconclusive = d.decided && d.passed && passing && !passing->conclusive;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!d.decided) {
    done_pending(s.pod_id);
    if (unverifiable || no_checker) {
      ++totals_.checks_skipped;
      return Outcome::NONE;
    }
    ++totals_.check_errors;
    return Outcome::UNANSWERED;
  }
  ++totals_.checks;
  if (passing && failing) ++totals_.disagreements;
  if (inconclusive) {
    ++totals_.checks_inconclusive;
  } else if (d.passed) {
    totals_.passed_min_probability =
        std::min(totals_.passed_min_probability, passing->min_probability);
    totals_.passed_max_gap = std::max(totals_.passed_max_gap, passing->max_gap);
    totals_.passed_min_z = std::min(totals_.passed_min_z, passing->z);
    probation_.erase(s.pod_id);
  } else {
    ++totals_.checks_failed;
    totals_.failed_tokens += failing->tokens;
    totals_.failed_implausible += failing->implausible;
  }
  // The record changes with the pending count under this lock (consider() counts both).
  std::string failure;
  pods_.update_record(s.pod_id, [&](PodRecord& record) {
    ++record.checked;
    if (inconclusive) {
      // checked, neither passed nor failed
    } else if (d.passed) {
      ++record.passed;
      ++record.qualified_passes;  // its checkers may check (PodTable::checkers)
    } else {
      ++record.failed;
      record.last_failure =
          "request " + s.request_id + ": " +
          (s.fault.empty() ? std::to_string(failing->implausible) + " of " +
                                 std::to_string(failing->tokens) + " tokens implausible; "
                           : std::string()) +
          failing->detail;
    }
    failure = record.last_failure;
  });
  done_pending(s.pod_id);
  lock.unlock();  // the checkers' records and the books, outside the verifier's lock
  for (const std::string& checker : d.overruled) {
    pods_.update_record(checker, [](PodRecord& record) { ++record.overruled; });
  }
  try {
    if (!d.passed) {
      credits_.withhold(s.pod_id, "failed check: " + failure);
    } else if (!inconclusive) {
      credits_.verified(s.request_id, s.pod_id, s.charge.pod_earns);
    }
  } catch (const Error&) {
  }
  if (inconclusive) return Outcome::INCONCLUSIVE;
  return d.passed ? Outcome::PASSED : Outcome::FAILED;
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
    try {
      check(s);
    } catch (const std::exception&) {
      // Out of memory at worst (ask() catches what a checker's answer can throw): the
      // check is not made, and the worker goes on.
      lock.lock();
      done_pending(s.pod_id);
      lock.unlock();
    }
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
          {"inconclusive", totals_.checks_inconclusive},
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
          {"min_z", options_.thresholds.min_z},
          {"min_sampled_tokens", options_.thresholds.min_sampled_tokens}};
}

}  // namespace herd::hub
