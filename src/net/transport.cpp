#include "net/transport.h"

#include "util/error.h"

namespace herd::net {

void Connection::send_frame(MessageType type, uint64_t id, ConstBytes payload) {
  send_frame_parts(FrameHeader{type, 0, id, payload.size()},
                   std::span<const ConstBytes>(&payload, 1));
}

Frame Connection::recv_frame(Millis timeout) {
  std::optional<Frame> frame = try_recv_frame(timeout);
  if (!frame) {
    throw Error("net", "peer '" + peer_name() + "': no frame within " +
                           std::to_string(timeout.count()) + " ms");
  }
  return std::move(*frame);
}

void throw_unexpected(const Frame& frame, MessageType expected, std::string_view peer) {
  if (frame.header.type == MessageType::ERROR && expected != MessageType::ERROR) {
    ErrorReply reply = decode_error(frame.payload());
    throw Error("net", "peer '" + std::string(peer) + "' reported " + error_code_name(reply.code) +
                           ": " + printable(reply.message));
  }
  throw Error("net", "peer '" + std::string(peer) + "' sent " +
                         std::string(message_type_name(frame.header.type)) + " where " +
                         std::string(message_type_name(expected)) + " was expected");
}

}  // namespace herd::net
