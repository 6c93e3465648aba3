// plan(): the pure planner. Model metadata, node profiles and options in; a Plan out. No
// I/O, no clocks, no randomness: the same input gives the same plan (the tests compare
// the JSON). docs/plan.md explains the algorithm; the contract is:
//
// - Every layer belongs to exactly one stage; stages are contiguous and in layer order.
// - Within a stage every query head, every FFN row of every expert, every expert and
//   every output-head row belongs to exactly one rank; each rank holds the KV heads its
//   query heads read (shared by several ranks when a GQA group is cut).
// - Every rank's estimated memory (rank_memory.h) is at most its node's free memory times
//   options.memory_headroom, its GPU's counted as device_ranks.h says (node_capacity).
// - A rank on a node with a GPU says where its part sits there (Rank::device, placement;
//   device_ranks.h), and plan.notes says why.
// - A model that cannot be placed is refused with herd::Error("[plan] ...") giving what
//   the model needs (weights + KV cache + scratch) and what the nodes offer.
//
// Nodes are stages and ranks in the order given: node 0 is the coordinator (the local
// machine) and runs the first stage unless options.use_local is false, in which case it
// holds nothing. A node the plan does not need, or that cannot hold even one layer, gets
// nothing and is named in plan.notes.
//
// A rank's time per token has two parts. Decoding a token reads every weight once: its
// bytes over its bandwidth. Prefill is compute bound: its matrix work per prompt token over
// its measured matmul speed, counted kPromptTokensPerReplyToken times (prompts, with their
// history and system text, are several times longer than replies). The two differ in one
// place: the output head is a large read per decoded token but runs for only the last
// prompt token, so a bytes-only split gives the last stage fewer layers and leaves prefill
// waiting on the first. When some node has not measured its matmul speed, time is bytes
// over bandwidth alone. Pipeline stages are sized so that the slowest stage is as fast as
// possible (then the sum of the stages' times is as small as possible), within each node's
// memory. Tensor ranks get shares of a stage proportional to bandwidth, capped by memory.
//
// kAuto picks, in this order:
//   1. one node: the one-stage, one-rank plan;
//   2. two to four nodes whose bandwidths are within 25% of each other: tensor parallelism
//      across all of them, if the model fits that way (each node reads 1/T of the weights
//      per token: lower latency, at the price of two all-reduces per layer);
//   3. otherwise a pipeline across the nodes (handles any mix of machines, and models
//      that fit no single node).
// NodeProfile does not know link speeds yet; when it does, rule 2 should weigh the
// all-reduce latency against the bytes saved.
#pragma once

#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// Throws herd::Error("[plan] ...") when the input is inconsistent (a bad model shape, a
// node with no bandwidth, more ranks asked for than nodes) or the model does not fit.
Plan plan(const PlanModel& model, const std::vector<NodeProfile>& nodes,
          const PlanOptions& options);

}  // namespace herd
