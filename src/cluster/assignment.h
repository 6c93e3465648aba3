// Assignment: one node's part of a Plan, as the LOAD message carries it (LOAD.plan_json):
// which layers it runs, whether it embeds tokens or computes logits, its KV cache size,
// the tensors it needs (so a node without the file can be sent exactly those), and the
// wire format of activations. Every field from the network is checked before use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/device_placement.h"
#include "engine/shard.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "net/messages.h"
#include "plan/plan.h"
#include "quant/types.h"

namespace herd::cluster {

// A weight the node needs: enough to declare it in the file the node writes when the
// weights are shipped to it. A tensor-parallel rank needs only its cut of a weight
// (model/tensor_slice.h): the shape is the cut's.
struct TensorDesc {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the innermost dimension
};

// Bytes of the tensor's GGUF data.
uint64_t data_bytes(const TensorDesc& t);

// The links of a tensor-parallel rank's ring all-reduce: to the next rank and from the
// previous one. A link is dialled by one side (`connect` names the address to dial) and
// accepted by the other (`connect` empty: the neighbour dials in and says RING first).
// With two ranks, next and previous are the same link (`prev` unused).
struct RingLink {
  std::string connect;
};
struct RingSpec {
  uint64_t token = 0;  // identifies this plan's ring: RING frames must carry it
  RingLink next, prev;
};

// Direct links between consecutive stages that both run on nodes (docs/cluster.md "Stage
// to stage"): rank 0 of a stage dials every rank of the next stage at load time, says RING
// {token, its stage} first, and then sends each batch's hidden states straight to them
// (FORWARD); the coordinator sends to the first stage of such a chain and hears from its
// last. Stages next to one the coordinator runs talk to the coordinator as before.
struct FlowSpec {
  uint64_t token = 0;             // identifies this plan's stage links: their RING carries it
  std::vector<std::string> next;  // the next stage's ranks, in rank order ("host:port"):
                                  // this stage's output goes to them, not the coordinator
  int prev = 0;  // links to accept from the previous stage (0 or 1: its rank 0): the input
                 // comes over it, not from the coordinator
};

struct Assignment {
  int stage = 0;     // index in the plan's pipeline
  int n_stages = 1;  // stages in the plan
  int rank = 0;      // tensor-parallel rank within the stage
  int n_ranks = 1;   // ranks of the stage (1: not tensor-parallel)
  RingSpec ring;     // when n_ranks > 1
  FlowSpec flow;     // stage-to-stage links (absent in the JSON: none)
  // A spare (--spare): the node loads this rank's weights and KV cache and stands by, so
  // that it can take the rank's place when its node is lost without a shipment. It joins no
  // ring, has no stage links and runs no batch. Absent in the JSON: false.
  bool standby = false;
  engine::ShardSpec shard;
  // Where the plan puts the part on the node (Rank::device): "cpu", or a GPU ("vulkan:0")
  // the node's profile named; nullopt (absent in the JSON, and for a spare, whose node is not
  // the one planned for): the node's own --device.
  std::optional<std::string> device;
  // How the part sits over the node's GPU and CPU (Rank::placement, engine/rank.h):
  // "device" (all on `device`), "experts-on-cpu" (the routed experts on the CPU, the rest on
  // `device`), "first-layers" (its first device_layers layers on `device`, the rest and the
  // head on the CPU). Absent in the JSON: "device". A split needs a GPU `device` and a
  // one-rank stage (a tensor-parallel rank runs on one device); without a `device` (a spare)
  // the node places the part as its own options say.
  std::string placement = "device";
  int64_t device_layers = 0;  // first-layers: 1 to the part's layers - 1
  int64_t n_ctx = 0;
  int64_t n_seq = 1;
  // Of the hidden states it returns and of its tensor-parallel all-reduces.
  net::WireDType wire_dtype = net::WireDType::F32;
  std::vector<TensorDesc> tensors;  // the weights it reads, in file order
};

nlohmann::json to_json(const Assignment& a);

// The placement over the node's GPU and CPU that the assignment carries (kDevice: whole).
engine::DevicePlacement planned_placement(const Assignment& a);

// Throws herd::Error("cluster", "assignment: field '...' ...") on anything missing,
// mistyped or out of range (a hostile coordinator gets an error, never a crash).
Assignment assignment_from_json(const nlohmann::json& j);

// The tensors a shard of `file` reads: every blk.N.* of its layers, token_embd when it
// embeds (or computes logits with a tied head), output_norm and output when it computes
// logits, and the tensors every layer uses (rope_freqs; with per-layer inputs token_embd and
// per_layer_*). In file order, each cut to the
// spec's slice (a weight of which the slice holds nothing is left out). Throws
// herd::Error("model", ...) naming the tensor when the slice cuts a quant block.
std::vector<TensorDesc> shard_tensors(const gguf::File& file, const ModelInfo& info,
                                      const engine::ShardSpec& spec);

// The assignment of rank `rank` of stage `stage` of `plan` (without ring links: the
// coordinator fills them in, knowing the nodes' addresses). Every rank of the embedding
// stage embeds tokens itself, so each gets token_embd.
Assignment assignment_for(const Plan& plan, int stage, int rank, const gguf::File& file,
                          const ModelInfo& info, net::WireDType wire_dtype);

}  // namespace herd::cluster
