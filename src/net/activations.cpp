#include "net/activations.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "quant/float16.h"
#include "quant/legacy_quants.h"
#include "util/error.h"

namespace herd::net {

WireDType parse_wire_dtype(std::string_view text) {
  if (text == "f32" || text == "F32") return WireDType::F32;
  if (text == "f16" || text == "F16") return WireDType::F16;
  if (text == "q8_0" || text == "Q8_0") return WireDType::Q8_0;
  throw Error("net", "unknown wire dtype '" + std::string(text) + "' (expected f32, f16 or q8_0)");
}

void encode_row(std::span<const float> values, WireDType dtype, uint8_t* out) {
  if (values.empty()) return;
  if (dtype == WireDType::F32) {
    std::memcpy(out, values.data(), values.size_bytes());
    return;
  }
  if (dtype == WireDType::F16) {
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h = fp32_to_fp16(values[i]);
      std::memcpy(out + 2 * i, &h, sizeof h);
    }
    return;
  }
  // Q8_0: block by block through aligned locals (`out` may sit at any offset of a payload).
  std::array<float, kQ8Block> x{};
  quant::BlockQ8_0 block;
  for (size_t begin = 0; begin < values.size(); begin += kQ8Block) {
    const size_t n = std::min<size_t>(kQ8Block, values.size() - begin);
    std::copy_n(values.data() + begin, n, x.begin());
    std::fill(x.begin() + static_cast<ptrdiff_t>(n), x.end(), 0.0f);
    quant::quantize_row_q8_0(x.data(), &block, kQ8Block);
    std::memcpy(out + begin / kQ8Block * kQ8BlockBytes, &block, kQ8BlockBytes);
  }
}

void decode_row(const uint8_t* in, WireDType dtype, std::span<float> out, DecodeInto into) {
  const bool add = into == DecodeInto::ADD;
  if (dtype == WireDType::F32) {
    if (!add) {
      if (!out.empty()) std::memcpy(out.data(), in, out.size_bytes());
      return;
    }
    for (size_t i = 0; i < out.size(); ++i) {
      float v;
      std::memcpy(&v, in + 4 * i, sizeof v);
      out[i] += v;
    }
    return;
  }
  if (dtype == WireDType::F16) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, sizeof h);
      out[i] = (add ? out[i] : 0.0f) + fp16_to_fp32(h);
    }
    return;
  }
  quant::BlockQ8_0 block;
  for (size_t begin = 0; begin < out.size(); begin += kQ8Block) {
    std::memcpy(&block, in + begin / kQ8Block * kQ8BlockBytes, kQ8BlockBytes);
    const float d = fp16_to_fp32(block.d);
    const size_t n = std::min<size_t>(kQ8Block, out.size() - begin);
    float* y = out.data() + begin;
    for (size_t i = 0; i < n; ++i) y[i] = (add ? y[i] : 0.0f) + d * block.qs[i];
  }
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
  const uint64_t row_bytes = wire_row_bytes(cols, dtype);
  storage.resize(rows * row_bytes);
  for (uint32_t r = 0; r < rows; ++r) {
    encode_row(values.subspan(uint64_t{r} * cols, cols), dtype, storage.data() + r * row_bytes);
  }
  a.data = storage;
  return a;
}

void decode_activations(const Activations& a, std::span<float> out) {
  HERD_CHECK(out.size() == uint64_t{a.rows} * a.cols);
  const uint64_t row_bytes = wire_row_bytes(a.cols, a.dtype);
  HERD_CHECK(a.data.size() == a.rows * row_bytes);
  for (uint32_t r = 0; r < a.rows; ++r) {
    decode_row(a.data.data() + r * row_bytes, a.dtype, out.subspan(uint64_t{r} * a.cols, a.cols),
               DecodeInto::COPY);
  }
}

}  // namespace herd::net
