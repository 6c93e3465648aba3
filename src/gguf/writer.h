// GGUF v3 writer. Metadata and the tensor table are declared first; the file is then
// written in one pass, tensor data streamed from a callback so that a model larger than
// memory can be written. The output goes to "<path>.tmp" and is renamed into place only
// when complete, so a failed write never leaves a partial model behind.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "quant/types.h"

namespace herd::gguf {

class Writer {
 public:
  explicit Writer(size_t alignment = 32);

  // Metadata, kept in insertion order; setting a key again replaces its value in place.
  void set_u16(std::string_view key, uint16_t value);
  void set_u32(std::string_view key, uint32_t value);
  void set_i32(std::string_view key, int32_t value);
  void set_u64(std::string_view key, uint64_t value);
  void set_f32(std::string_view key, float value);
  void set_bool(std::string_view key, bool value);
  void set_string(std::string_view key, std::string_view value);
  void set_string_array(std::string_view key, const std::vector<std::string>& values);
  void set_f32_array(std::string_view key, std::span<const float> values);
  void set_i32_array(std::string_view key, std::span<const int32_t> values);
  void set_bool_array(std::string_view key, std::span<const uint8_t> values);  // 0: false
  // Copies a value read from another file (e.g. a vocabulary's tokenizer.* keys).
  void set_value(std::string_view key, const Value& value);
  // Appends (or replaces) every metadata entry of `other`, in its order.
  void append(const Writer& other);

  // Declares a tensor; shape[0] is the innermost dimension (GGUF order). Returns its index.
  // Throws herd::Error when the shape does not fit the type's block size.
  size_t add_tensor(std::string_view name, TensorType type, std::vector<int64_t> shape);
  size_t n_tensors() const { return tensors_.size(); }
  size_t tensor_bytes(size_t index) const { return tensors_[index].n_bytes; }
  // Where tensor `index`'s data starts, from the end of header() (aligned).
  uint64_t tensor_offset(size_t index) const { return tensors_[index].offset; }
  uint64_t total_tensor_bytes() const;

  // fill(index, out) writes exactly out.size() bytes of tensor `index`; tensors are
  // requested in declaration order, one at a time.
  using FillTensor = std::function<void(size_t index, std::span<uint8_t> out)>;
  void write(const std::string& path, const FillTensor& fill) const;
  // As write(), but tensor `index` arrives in pieces: stream(index, emit) calls emit(bytes)
  // until exactly tensor_bytes(index) bytes have been given (no whole-tensor buffer: for
  // tensors that arrive over the network). Throws herd::Error when the sizes disagree.
  using Emit = std::function<void(std::span<const uint8_t> bytes)>;
  using StreamTensor = std::function<void(size_t index, const Emit& emit)>;
  void write_streamed(const std::string& path, const StreamTensor& stream) const;
  // The bytes before the tensor data: header, metadata, tensor table, padding. With no
  // tensors declared this is a complete metadata-only GGUF file.
  std::vector<uint8_t> header() const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> encoded;  // u32 type | value, as in the file
  };
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;
    size_t n_bytes;
    uint64_t offset;
  };
  void set(std::string_view key, std::vector<uint8_t> encoded);

  size_t alignment_;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace herd::gguf
