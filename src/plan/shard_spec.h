// What one rank of a Plan runs, as the engine's ShardSpec: the stage's layers, embedding
// and output, and (with several ranks) the rank's slice of heads, FFN rows, experts and
// vocabulary. Every rank of the embedding stage embeds the tokens itself, so that no rank
// waits for another's activations.
#pragma once

#include "engine/shard.h"
#include "plan/plan.h"

namespace herd {

// moe: the model has experts (the slice then lists the rank's experts).
engine::ShardSpec shard_spec(const Stage& stage, const Rank& rank, bool moe);

}  // namespace herd
