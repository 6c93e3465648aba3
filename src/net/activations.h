// Activations on the wire (`--wire-dtype f32|f16|q8_0`): conversions between the engine's
// f32 rows and the bytes of a FORWARD/RESULT payload or an all-reduce chunk. F32 travels
// without a copy; F16 halves the bytes per token at the cost of one rounding (IEEE half,
// round to nearest even); Q8_0 cuts them to 34/128 with an error of at most half a step
// (max |x| / 254) per value, with ggml's reference quantizer (equal floats, equal bytes).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "net/messages.h"

namespace herd::net {

// Parses "f32" / "f16" / "q8_0" (the --wire-dtype flag); throws herd::Error otherwise.
WireDType parse_wire_dtype(std::string_view text);

// Bytes of `values` ([rows, cols] row-major f32) in `dtype`. For F32 the result views
// `values` and `storage` stays empty; for F16 the halves are written to `storage`, which
// must outlive the returned view. REQUIRES: values.size() == rows * cols.
Activations encode_activations(std::span<const float> values, uint32_t rows, uint32_t cols,
                               WireDType dtype, std::vector<uint8_t>& storage);

// Widens received activations to f32. REQUIRES: out.size() == rows * cols.
void decode_activations(const Activations& activations, std::span<float> out);

// One row of values in `dtype`: out holds wire_row_bytes(values.size(), dtype) bytes (any
// alignment). A Q8_0 row's last block is padded with zeros.
void encode_row(std::span<const float> values, WireDType dtype, uint8_t* out);
// The values of one row (`in` holds wire_row_bytes(out.size(), dtype) bytes, any
// alignment): written to `out` (ADD: added to it).
enum class DecodeInto { COPY, ADD };
void decode_row(const uint8_t* in, WireDType dtype, std::span<float> out, DecodeInto into);

}  // namespace herd::net
