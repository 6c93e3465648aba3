#include "net/activations.h"

#include <cstring>

#include "quant/float16.h"
#include "util/error.h"

namespace herd::net {

WireDType parse_wire_dtype(std::string_view text) {
  if (text == "f32" || text == "F32") return WireDType::F32;
  if (text == "f16" || text == "F16") return WireDType::F16;
  throw Error("net", "unknown wire dtype '" + std::string(text) + "' (expected f32 or f16)");
}

Activations encode_activations(std::span<const float> values, uint32_t rows, uint32_t cols,
                               WireDType dtype, std::vector<uint8_t>& storage) {
  HERD_CHECK_MSG(values.size() == uint64_t{rows} * cols, "values=" + std::to_string(values.size()) +
                                                             " rows=" + std::to_string(rows) +
                                                             " cols=" + std::to_string(cols));
  Activations a{dtype, rows, cols, {}};
  if (dtype == WireDType::F32) {
    a.data = ConstBytes(reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes());
    return a;
  }
  storage.resize(values.size() * sizeof(uint16_t));
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t h = fp32_to_fp16(values[i]);
    std::memcpy(storage.data() + 2 * i, &h, sizeof h);
  }
  a.data = storage;
  return a;
}

void decode_activations(const Activations& a, std::span<float> out) {
  HERD_CHECK(out.size() == uint64_t{a.rows} * a.cols);
  HERD_CHECK(a.data.size() == out.size() * wire_dtype_size(a.dtype));
  if (a.dtype == WireDType::F32) {
    if (!out.empty()) std::memcpy(out.data(), a.data.data(), a.data.size());
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, a.data.data() + 2 * i, sizeof h);
    out[i] = fp16_to_fp32(h);
  }
}

}  // namespace herd::net
