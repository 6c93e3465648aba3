// Activations on the wire (`--wire-dtype f32|f16`): conversions between the engine's f32
// rows and the bytes of a FORWARD/RESULT payload. F32 travels without a copy; F16 halves
// the bytes per token at the cost of one rounding (IEEE half, round to nearest even).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "net/messages.h"

namespace herd::net {

// Parses "f32" / "f16" (the --wire-dtype flag); throws herd::Error otherwise.
WireDType parse_wire_dtype(std::string_view text);

// Bytes of `values` ([rows, cols] row-major f32) in `dtype`. For F32 the result views
// `values` and `storage` stays empty; for F16 the halves are written to `storage`, which
// must outlive the returned view. REQUIRES: values.size() == rows * cols.
Activations encode_activations(std::span<const float> values, uint32_t rows, uint32_t cols,
                               WireDType dtype, std::vector<uint8_t>& storage);

// Widens received activations to f32. REQUIRES: out.size() == rows * cols.
void decode_activations(const Activations& activations, std::span<float> out);

// Bytes one token's row of `cols` values costs on the wire in `dtype`.
inline uint64_t wire_bytes_per_row(uint32_t cols, WireDType dtype) {
  return uint64_t{cols} * wire_dtype_size(dtype);
}

}  // namespace herd::net
