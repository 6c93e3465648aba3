// The hub's routing core under a simulated network (issue 19, "Scale"): N pods with
// speeds, slots, round trips and models drawn at random, R requests arriving as a Poisson
// stream at a set share of the network's capacity, and churn (pods leaving, failing and
// joining). Time in the simulation is simulated; what is measured is wall time: each
// routing decision (Router::route), and the bookkeeping around it. Prints the figures
// docs/network.md records. Not a Google Benchmark: one run of one scenario.
//
//   build/bench/hub_sim [--pods 100000] [--requests 1000000] [--models 50] [--load 0.7]
//                       [--churn 0.01] [--seed 1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "hub/router.h"

namespace {

using herd::hub::ModelId;
using herd::hub::PodId;
using herd::hub::PodReport;
using herd::hub::Router;
using herd::hub::RouteRequest;
using Clock = std::chrono::steady_clock;

struct Options {
  size_t pods = 100000;
  size_t requests = 1000000;
  uint32_t models = 50;
  double load = 0.7;    // arrivals as a share of the network's capacity
  double churn = 0.01;  // pod departures (half of them failures) per request; as many join
  uint64_t seed = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--pods")
      o.pods = std::strtoull(value, nullptr, 10);
    else if (flag == "--requests")
      o.requests = std::strtoull(value, nullptr, 10);
    else if (flag == "--models")
      o.models = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    else if (flag == "--load")
      o.load = std::strtod(value, nullptr);
    else if (flag == "--churn")
      o.churn = std::strtod(value, nullptr);
    else if (flag == "--seed")
      o.seed = std::strtoull(value, nullptr, 10);
    else {
      std::fprintf(stderr, "hub_sim: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (o.pods < 2 || o.requests < 1 || o.models < 1 || !(o.load > 0)) {
    std::fprintf(stderr, "hub_sim: --pods >= 2, --requests >= 1, --models >= 1, --load > 0\n");
    std::exit(2);
  }
  return o;
}

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// A pod as the simulation knows it: what it reported and when its slots free up.
struct SimPod {
  PodReport report;
  std::vector<double> slot_free_at;  // simulated seconds
  uint32_t generation = 0;           // bumped when the id is reused
  bool live = false;
};

struct Completion {
  double at;
  PodId pod;
  uint32_t generation;
  bool operator>(const Completion& o) const { return at > o.at; }
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  // Model popularity: Zipf (s = 1) over the model list, for pods and requests alike.
  std::vector<double> zipf(o.models);
  for (uint32_t m = 0; m < o.models; ++m) zipf[m] = 1.0 / (m + 1);
  std::discrete_distribution<ModelId> popular(zipf.begin(), zipf.end());
  // Decode speed per sequence: log-normal around 25 tok/s (a Mac mini on a 7-8B model to
  // a pod of Studios on a big one); slots 1-8; round trips 5-150 ms from the hub.
  std::lognormal_distribution<double> decode_speed(std::log(25.0), 0.6);
  std::uniform_real_distribution<double> rtt(0.005, 0.15);
  const auto new_pod = [&] {
    SimPod p;
    p.report.models = {popular(rng)};
    if (unit(rng) < 0.3) {
      const ModelId second = popular(rng);
      if (second != p.report.models[0]) p.report.models.push_back(second);
    }
    p.report.slots = 1 + static_cast<int32_t>(rng() % 8);
    p.report.decode_tokens_per_s = std::clamp(decode_speed(rng), 2.0, 400.0);
    p.report.prefill_tokens_per_s = p.report.decode_tokens_per_s * 20;
    p.slot_free_at.assign(static_cast<size_t>(p.report.slots), 0.0);
    p.live = true;
    return p;
  };

  Router router;
  std::vector<SimPod> pods;
  std::vector<PodId> live;  // ids of live pods, for picking one to leave
  std::vector<size_t> where(0);
  const size_t rss_before = resident_bytes();
  const auto join = [&] {
    SimPod p = new_pod();
    const PodId id = router.add(p.report, rtt(rng));
    if (id >= pods.size()) {
      pods.resize(id + 1);
      where.resize(id + 1);
    }
    p.generation = pods[id].generation + 1;
    pods[id] = std::move(p);
    where[id] = live.size();
    live.push_back(id);
  };
  const auto t_join = Clock::now();
  for (size_t i = 0; i < o.pods; ++i) join();
  const double join_seconds = std::chrono::duration<double>(Clock::now() - t_join).count();
  const size_t rss_after = resident_bytes();

  // Requests: prompts of 64-2048 tokens, answers of 16-1024 (log-uniform).
  const auto log_uniform = [&](double lo, double hi) {
    return static_cast<int64_t>(std::exp(std::log(lo) + unit(rng) * (std::log(hi) - std::log(lo))));
  };
  // Capacity in requests per second: each pod's slots over a typical request's seconds.
  double capacity = 0;
  for (PodId id : live) {
    const PodReport& r = pods[id].report;
    capacity += r.slots / (500.0 / r.prefill_tokens_per_s + 200.0 / r.decode_tokens_per_s);
  }
  std::exponential_distribution<double> gap(o.load * capacity);

  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> in_flight;
  std::vector<double> route_ns, update_ns, completion_s, wait_s;
  route_ns.reserve(o.requests);
  update_ns.reserve(o.requests);
  completion_s.reserve(o.requests);
  wait_s.reserve(o.requests);
  size_t unrouted = 0, departures = 0, failures = 0;
  double now = 0;
  const auto t_run = Clock::now();
  for (size_t n = 0; n < o.requests; ++n) {
    now += gap(rng);
    // Requests that ended by now free their pod's slot in the router.
    while (!in_flight.empty() && in_flight.top().at <= now) {
      const Completion c = in_flight.top();
      in_flight.pop();
      if (pods[c.pod].live && pods[c.pod].generation == c.generation) {
        const auto t = Clock::now();
        router.finished(c.pod);
        update_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t).count());
      }
    }
    // Churn: a pod leaves (half the time by failing; to the router both are a removal:
    // retrying a failed request elsewhere is the hub's, not measured here), another joins.
    if (unit(rng) < o.churn) {
      const PodId gone = live[rng() % live.size()];
      const bool failed = unit(rng) < 0.5;
      router.remove(gone);
      pods[gone].live = false;
      live[where[gone]] = live.back();
      where[live.back()] = where[gone];
      live.pop_back();
      ++departures;
      if (failed) ++failures;
      join();
    }
    RouteRequest request{popular(rng), log_uniform(64, 2048), log_uniform(16, 1024)};
    auto t = Clock::now();
    std::optional<PodId> chosen = router.route(request);
    route_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t).count());
    if (!chosen) {
      ++unrouted;
      continue;
    }
    SimPod& p = pods[*chosen];
    // The pod's real speed differs from its report by up to 10% either way.
    const double truth = 0.9 + 0.2 * unit(rng);
    const double service =
        (static_cast<double>(request.prompt_tokens) / p.report.prefill_tokens_per_s +
         static_cast<double>(request.max_tokens) / p.report.decode_tokens_per_s) /
        truth;
    auto slot = std::min_element(p.slot_free_at.begin(), p.slot_free_at.end());
    const double start = std::max(now, *slot);
    *slot = start + service;
    t = Clock::now();
    router.started(*chosen);
    update_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t).count());
    in_flight.push({*slot, *chosen, p.generation});
    wait_s.push_back(start - now);
    completion_s.push_back(*slot - now);
  }
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t_run).count();

  std::printf(
      "hub_sim: %zu pods, %u models (Zipf), %zu requests at %.0f%% of capacity "
      "(%.0f requests/s simulated), churn %.3g per request\n",
      o.pods, o.models, o.requests, o.load * 100, o.load * capacity, o.churn);
  std::printf(
      "routing decision (Router::route): p50 %.2f us, p99 %.2f us, p99.9 %.2f us, "
      "max %.1f us\n",
      percentile(route_ns, 0.5) / 1e3, percentile(route_ns, 0.99) / 1e3,
      percentile(route_ns, 0.999) / 1e3, *std::max_element(route_ns.begin(), route_ns.end()) / 1e3);
  std::printf("bookkeeping (started/finished): p50 %.2f us, p99 %.2f us\n",
              percentile(update_ns, 0.5) / 1e3, percentile(update_ns, 0.99) / 1e3);
  std::printf(
      "memory: router %.0f bytes per pod (its estimate), process %.0f bytes per pod "
      "(resident growth while adding them, the simulation's own tables included)\n",
      static_cast<double>(router.memory_bytes()) / static_cast<double>(router.size()),
      static_cast<double>(rss_after - rss_before) / static_cast<double>(o.pods));
  std::printf("churn: %zu pods left (%zu failed), as many joined; %zu requests found no pod\n",
              departures, failures, unrouted);
  std::printf(
      "simulated: wait for a slot p50 %.2f s, p99 %.2f s; completion p50 %.1f s, "
      "p99 %.1f s\n",
      percentile(wait_s, 0.5), percentile(wait_s, 0.99), percentile(completion_s, 0.5),
      percentile(completion_s, 0.99));
  std::printf("wall: %.2f s to add the pods, %.2f s for the requests (%.2f us each in all)\n",
              join_seconds, run_seconds, run_seconds / static_cast<double>(o.requests) * 1e6);
  return 0;
}
