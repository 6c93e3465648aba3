#include "cluster/state_ops.h"

namespace herd::cluster {

int64_t run_state_op(engine::RecurrentStates& states, engine::Rank& rank, const net::StateOp& op) {
  switch (op.kind) {
    case net::StateOpKind::SAVE:
      states.save(rank, op.seq, op.pos);
      break;
    case net::StateOpKind::RESTORE:
      return states.restore(rank, op.seq, op.pos);
    case net::StateOpKind::HOLD:
      states.hold(rank, op.seq);
      break;
    case net::StateOpKind::RETURN:
      states.return_to_held(rank, op.seq);
      break;
  }
  return op.pos;
}

}  // namespace herd::cluster
