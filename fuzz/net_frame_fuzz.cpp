// libFuzzer target: bytes from a peer given to the frame header and message decoders
// either decode or fail with herd::Error. Anything else (a crash, a sanitizer report,
// another exception type, an allocation beyond the frame limits) is a bug.
// Two paths: the input as a whole frame (header + payload), and the input's first byte
// choosing a message type whose payload decoder gets the rest (so payload decoders are
// reached without the fuzzer first having to find a valid header; for WEIGHTS, also the
// decoder of its fields alone).
#include <cstdint>
#include <cstdlib>
#include <span>

#include "net/messages.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::net;
  FrameLimits limits;
  limits.activations = 1 << 20;
  try {
    Message message = decode_frame(ConstBytes(data, size), limits);
    if (auto* weights = std::get_if<Weights>(&message)) {
      if (weights->data.data() < data ||
          weights->data.data() + weights->data.size() > data + size) {
        std::abort();
      }
    }
  } catch (const herd::Error&) {
  }
  if (size >= 1) {
    auto type = static_cast<MessageType>(1 + data[0] % kMaxMessageType);
    try {
      Message message = decode_message(type, ConstBytes(data + 1, size - 1));
      if (auto* forward = std::get_if<Forward>(&message)) {
        const Activations& a = forward->activations;
        if (a.data.size() != uint64_t{a.rows} * wire_row_bytes(a.cols, a.dtype)) std::abort();
        if (a.rows != 0 && a.rows != forward->batch.tokens.size()) std::abort();
      }
    } catch (const herd::Error&) {
    }
    // The fields of a WEIGHTS chunk alone, as a transport that places the data in a file
    // reads them (messages.h: decode_weights_head).
    if (type == MessageType::WEIGHTS) {
      try {
        const WeightsHead head = decode_weights_head(ConstBytes(data + 1, size - 1));
        if (head.n_bytes > kMaxWeightsChunkBytes || head.offset > head.total_size ||
            head.n_bytes > head.total_size - head.offset) {
          std::abort();
        }
      } catch (const herd::Error&) {
      }
    }
  }
  return 0;
}
