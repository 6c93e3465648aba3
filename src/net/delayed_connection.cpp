#include "net/delayed_connection.h"

#include <thread>

namespace herd::net {

void DelayedConnection::send_frame_parts(const FrameHeader& header,
                                         std::span<const ConstBytes> parts) {
  // Sleeping in the sender stands for the time the frame spends on the wire: the
  // exchanges herd times (a batch and its result, the steps of a ring all-reduce) wait
  // for each frame, so each pays the delay once, as on a slower link.
  std::this_thread::sleep_for(delay_);
  inner_->send_frame_parts(header, parts);
}

std::shared_ptr<Connection> delayed(std::shared_ptr<Connection> connection,
                                    std::chrono::microseconds delay) {
  if (delay.count() <= 0) return connection;
  return std::make_shared<DelayedConnection>(std::move(connection), delay);
}

}  // namespace herd::net
