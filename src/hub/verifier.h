// The hub's verifier (issue 19's checks, issue 28's "the hub's state"): which served
// requests are checked, the queue of checks and the worker thread that runs them, asking
// other pods (checks.h judges their answers), and what a verdict does to the served pod: its
// record's reputation and counts (in the pod table) and its credits (credits.h). A pod that
// never passed a check is on probation while one of its checks is to come: the router
// gives it nothing more meanwhile unless no other pod can take the request.
//
//   served(request) -> consider(): sampled (should_check) -> queue -> run() -> check()
//   an untrusted pod's answer, before the client gets it -> check_now() -> check()
//   check(): a fault in the answer (billing.h) fails it at once; else checkers (live, may
//   check, serving the model; most trusted first, random among equals) -> votes until
//   wants_another() is done (a failure always confirmed, a first pass and a sample of
//   passes too, a third for two that disagree) -> decide(): the record, the overruled
//   checkers' records, and the books. A vote fails when the scores do, or when the text the
//   pod sent is not the text the checker renders for its ids (checks.h: text_mismatch).
//
// Thread-safe: its own lock guards the queue, probation and its counts; it calls the pod
// table (the innermost lock) while holding it, and nothing else. Checks themselves (HTTP to
// the checkers) and the books run outside its lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hub/checks.h"
#include "hub/credits.h"
#include "hub/pod_clients.h"
#include "hub/pod_table.h"

namespace herd::hub {

// Checks waiting for the worker; more are dropped (counted as skipped).
inline constexpr size_t kMaxQueuedChecks = 256;
// Of passes after a pod's first, those confirmed by a second checker.
inline constexpr double kConfirmRate = 0.1;

// Of a check. NONE: none could be made (no pod may check it, or it cannot be checked: a
// grammar); UNANSWERED: pods may check it, and none answered (an untrusted pod's answer is
// then not sent); INCONCLUSIVE: it passed on too little evidence (checks.h: too few sampled
// tokens), which proves nothing: an untrusted pod's answer is not sent, and a trusted pod's
// share waits for settling.
enum class Outcome { NONE, PASSED, FAILED, UNANSWERED, INCONCLUSIVE };

// A served request, as the checks and the books need it.
struct Served {
  std::string request_id, client, pod_id, pod_name, model, endpoint;
  nlohmann::json body;  // the client's request as a checker replays it
  std::vector<int32_t> token_ids;
  std::string text;   // the first choice's text as the client got it (AnswerFacts::text)
  std::string fault;  // what no honest pod answers (billing.h: bill); fails the check
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double seconds = 0;
  Charge charge;
};

struct VerifierOptions {
  double check_rate = 0.1;  // of requests checked, after a pod's first kAlwaysChecked
  CheckThresholds thresholds;
};

class Verifier {
 public:
  // REQUIRES: `pods`, `clients` and `credits` outlive the verifier. `rng` draws the sample
  // and orders equal checkers.
  Verifier(VerifierOptions options, std::mt19937_64 rng, PodTable& pods, const PodClients& clients,
           Credits& credits);

  // Whether a pod is not trusted (PodRecord::trusted): its answers are checked before a
  // client gets them.
  bool untrusted(const std::string& pod) const;
  // The pods on probation (node ids).
  std::vector<std::string> probation() const;

  // Checks an untrusted pod's answer now (on the caller's thread). NONE when no pod may
  // check it (the pod is served, and not paid until checks pass); UNANSWERED when none
  // answered, or it has no tokens to check, and INCONCLUSIVE when it passed on too few
  // sampled tokens (it is not sent).
  Outcome check_now(const Served& s);
  // A served request whose books are done (`checked`: it was checked before it went, with
  // this outcome): queued for a check when sampled.
  void consider(Served s, Outcome checked);

  // The worker: runs queued checks until stop(). Call from its own thread.
  void run();
  void stop();
  // Waits until every check queued so far was done, up to `timeout`.
  bool wait_idle(std::chrono::milliseconds timeout);

  // GET /api/network's "verification": counts, what is queued, the thresholds.
  nlohmann::json stats() const;

 private:
  Outcome check(const Served& s);
  std::optional<Verdict> ask(const PodAddress& checker, const Served& s, bool& unverifiable);
  std::optional<Verdict> ask_once(const PodAddress& checker, const Served& s, bool& unverifiable);
  std::vector<CheckerPod> checkers(const Served& s);
  void done_pending(const std::string& pod);         // under the lock
  int64_t pending_of(const std::string& pod) const;  // checks queued or running; under the lock

  const VerifierOptions options_;
  PodTable& pods_;
  const PodClients& clients_;
  Credits& credits_;

  mutable std::mutex mutex_;  // guards what follows
  std::mt19937_64 rng_;
  std::deque<Served> queue_;
  int64_t running_ = 0;
  std::map<std::string, int64_t> pending_;  // by pod: checks queued or running (never 0)
  std::set<std::string> probation_;         // pods never checked good, with a check to come
  bool stopping_ = false;
  std::condition_variable changed_;
  struct Totals {
    int64_t checks = 0, checks_failed = 0, checks_skipped = 0, check_errors = 0;
    int64_t checks_inconclusive = 0;
    int64_t disagreements = 0;
    // The least plausible tokens of passed checks, and the share of implausible tokens in
    // failed ones (docs/network.md sets the thresholds from these).
    double passed_min_probability = 1, passed_max_gap = 0, passed_min_z = 0;
    int64_t failed_tokens = 0, failed_implausible = 0;
  } totals_;
};

}  // namespace herd::hub
