// The pod as GET /api/cluster reports it (the schema is in docs/server.md): the nodes, the
// plan, per-stage figures and the events. Across nodes the coordinator's runner provides it
// (ServedModel::cluster_status); one process is the one-node, one-stage view built here, so
// that the page has one shape to draw. Pure functions of JSON: the server module knows no
// cluster types.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/scheduler.h"

namespace herd::server {

// One process: {"state": "ok", "reason": "", "parallel": "single", "plan": one stage of one
// rank on node 0, "nodes": [this machine], "stages": [the scheduler's forward passes],
// "forward_seconds", "events": []}, from what /api/node reports (ServedModel::node_info).
nlohmann::json single_node_status(const nlohmann::json& node_info,
                                  const engine::Scheduler::ForwardStats& forward);

// Adds the figures the page shows and the runner does not compute:
//   nodes[i].memory_used_bytes: the memory_bytes of the plan's ranks on node i, summed;
//   stages[i].ms_per_token, busy_ms_per_token: compute (busy) milliseconds per token;
//   stages[i].tokens_per_second: tokens per second of the stage's compute time.
// Figures of a stage without tokens are 0. Ignores what is missing or malformed (a status
// of another shape is passed on, not refused).
void add_derived_figures(nlohmann::json& status);

}  // namespace herd::server
