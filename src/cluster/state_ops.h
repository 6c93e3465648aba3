// One STATE operation (net/messages.h) on a rank's recurrent states: how a node does what a
// STATE frame lists, and how the coordinator does the same on its own ranks.
#pragma once

#include <cstdint>

#include "engine/rank.h"
#include "engine/recurrent_states.h"
#include "net/messages.h"

namespace herd::cluster {

// The outcome as a STATE answer carries it: a restore's position, else op.pos. Throws
// herd::Error naming the problem (a slot the rank does not have, a return with nothing held).
int64_t run_state_op(engine::RecurrentStates& states, engine::Rank& rank, const net::StateOp& op);

}  // namespace herd::cluster
