// predict(): how fast a plan will run, from the node profiles and the links between the
// nodes: decode tokens per second of one sequence and prefill tokens per second of a long
// prompt, with where the time goes. A pure function like the planner (no I/O, no clocks),
// so what-if plans (`herd plan --node-profile`) are predicted as well as real ones.
//
// The model of one decoded token: every stage in turn reads its weights (a rank's bytes
// over its memory bandwidth times the engine's efficiency); a tensor-parallel stage adds
// two ring all-reduces of the hidden state per layer (T - 1 steps of the whole vector, as
// net/ring.h runs a small one); every message between
// processes costs the link's one-way latency, its bytes over the link's bandwidth and a
// fixed cost (waking a thread, a system call; already in a measured link's round trip);
// the hidden state goes from stage to stage
// (straight, with stage links, or through the coordinator) and the logits from the last
// stage to the coordinator. Prefill is compute-bound: a rank's share of the matrix work
// over its measured matmul speed, with the pipeline's stages overlapping on micro-batches.
// docs/plan.md ("Predictions") gives the constants and how they were measured.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/runner_status.h"
#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// The link between the coordinator (node 0) and a node: measured when a session starts,
// or assumed (assumed_link()).
struct LinkProfile {
  double rtt_seconds = 0;          // round trip of a small frame
  double send_bytes_per_s = 0;     // coordinator -> node
  double receive_bytes_per_s = 0;  // node -> coordinator
  bool measured = false;
};

// What the links are when nothing was measured: a 1 Gbit/s LAN (117 MB/s each way, 0.2 ms
// round trip), the link most herds have.
LinkProfile assumed_link();

// Links from the coordinator: links[i] to node i ([0], the coordinator itself, unused).
// Between two nodes (stage links, rings): the link a node measured to the other when the
// coordinator asked it (PEER_PROBE), else they are taken to share a switch with the
// coordinator (one-way latency the mean of theirs, bandwidth the smaller).
struct Links {
  std::vector<LinkProfile> to_node;
  // Measured links between nodes a < b (both >= 1): send is a -> b, receive b -> a.
  std::map<std::pair<int, int>, LinkProfile> between;
  // The links among the first n nodes (a plan on a prefix of the node list).
  Links first(size_t n) const;
  // One-way seconds and bytes per second from node a to node b (a != b; either may be 0).
  double latency(int a, int b) const;
  double bandwidth(int a, int b) const;
  bool measured(int a, int b) const;  // both links were measured
};

// The engine's constants: fitted on the 2-core development machine under shaped links
// (tests/links_e2e_test.sh with HERD_LINKS_MEASURED=1; docs/plan.md "Predictions").
struct PredictCosts {
  double decode_efficiency = 1.0;   // share of the measured memory bandwidth decode reaches
  double prefill_efficiency = 0.6;  // share of the measured matmul speed prefill reaches
  double message_seconds = 40e-6;   // fixed cost of a message on a link not measured
  // A ring step waits for the later of two ranks, which finished their matrix work apart,
  // and wakes a thread on each: a cost a link's round trip does not hold.
  double ring_step_seconds = 40e-6;
  int64_t prompt_tokens = 256;  // the prompt prefill is predicted for
  // How the pod runs, not costs: bytes of a hidden-state value on the wire, between stages
  // and in all-reduces (--wire-dtype: 4 for f32, 2 for f16, 34/32 for q8_0), and whether
  // consecutive stages on nodes talk straight.
  double wire_bytes_per_value = 4;
  bool stage_links = true;
};

// The struct sits beside the runner's status (a runner reports its pod's prediction).
using Prediction = engine::Prediction;

// REQUIRES: `plan` is a plan of `model` on `nodes` (check_plan holds); links.to_node has
// an entry per node.
Prediction predict(const Plan& plan, const PlanModel& model, const std::vector<NodeProfile>& nodes,
                   const Links& links, const PlanOptions& options, const PredictCosts& costs = {});

// "42.1 tok/s decode (compute 20.1 ms, all-reduce 3.2 ms, wire 0.4 ms), 310 tok/s prefill".
std::string prediction_text(const Prediction& p);

}  // namespace herd
