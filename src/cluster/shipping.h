// Weight shipping: the coordinator sends a node exactly the tensors of its assignment, and
// the node writes them, with the model's metadata, into one GGUF file in its cache. Chunks
// travel as WEIGHTS frames (each verified against its XXH3-64 by the decoder); the first
// "tensor" is the model's metadata as a GGUF file without tensors (kMetadataName), then
// the tensors follow in the assignment's order. The file is written to "<path>.tmp" and
// renamed only when complete, so an interrupted transfer leaves nothing behind.
//
// A tensor-parallel rank is sent only its cut of each weight (the assignment's TensorDesc
// shapes are the cuts'), and the metadata then records the slice (herd.slice.*), so that
// the node's file is loaded as that slice of the model and never taken for another.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "cluster/assignment.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "net/transport.h"

namespace herd::cluster {

inline constexpr const char* kMetadataName = "gguf.metadata";

// Called as bytes go: (bytes done, bytes in all).
using ShipProgress = std::function<void(uint64_t done, uint64_t total)>;

struct ShipStats {
  uint64_t bytes = 0;         // tensor and metadata bytes sent (or received)
  uint64_t placed_bytes = 0;  // of those received, the bytes the transport put in the file
  double seconds = 0;
};

// Bytes ship_weights() sends for the tensors of `a` (the metadata comes on top).
uint64_t tensor_bytes(const Assignment& a);

// Sends the metadata of `file` (the model `info`) and the tensors of `a`, each cut to a's
// slice. Throws herd::Error naming the peer or the tensor on failure.
ShipStats ship_weights(net::Connection& connection, const gguf::File& file, const ModelInfo& info,
                       const Assignment& a, const ShipProgress& progress = {});

// Receives what ship_weights sends and writes it to `path`. Every frame is checked against
// the assignment (tensor names in order, offsets contiguous, sizes as declared, a slice in
// the metadata equal to the assignment's); anything else is an error naming the problem,
// and no file is left behind. Returns the bytes
// received and the time from the first frame to the file renamed into place.
ShipStats receive_weights(net::Connection& connection, const Assignment& a,
                          const std::filesystem::path& path, net::Millis timeout);

}  // namespace herd::cluster
