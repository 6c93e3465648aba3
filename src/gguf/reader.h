// GGUF v2/v3 reader. The file is memory-mapped; the header, metadata and tensor table are
// parsed and checked once at open time, tensor data is never touched until asked for.
// Every malformed input is a herd::Error("[gguf] ...") naming the problem, never a crash.
//
// File layout (little-endian):
//   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
//   n_kv x  { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
//   padding to `general.alignment` (default 32)
//   tensor data; each tensor at data_start + offset, offset a multiple of the alignment
// string = u64 length | bytes (not NUL-terminated)
// array  = u32 element_type | u64 count | elements
//
// A model split by llama.cpp's llama-gguf-split (NAME-00001-of-00003.gguf ...) is one File
// too: opening any of its files opens all of them (split.h says how and what is checked).
// Its metadata is the first file's; its tensors point into each file's own mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quant/types.h"
#include "util/mapped_file.h"

namespace herd::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view value_type_name(ValueType type);

// One metadata value. Scalars are widened (integers to i64/u64, floats to double); strings
// and array elements point into the mapped file, so a Value lives as long as its File.
struct Value {
  ValueType type = ValueType::U8;
  uint64_t u = 0;        // U8, U16, U32, U64, BOOL
  int64_t i = 0;         // I8, I16, I32, I64
  double f = 0;          // F32, F64
  std::string_view str;  // STRING
  // ARRAY: element type, count, and the raw little-endian elements (numeric arrays) or
  // the parsed strings (string arrays). Nested arrays are rejected as unsupported.
  ValueType elem_type = ValueType::U8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;
  std::vector<std::string_view> strings;

  bool is_integer() const;
  bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
};

// A tensor's entry in the table. shape[0] is the innermost (contiguous) dimension, as in
// GGUF: a [rows, cols] matrix is stored with shape = {cols, rows}.
struct TensorInfo {
  std::string_view name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of its file's data section
  uint32_t file = 0;    // which file of a split model holds it (0: the first, or the only)
  int64_t n_elements = 0;
  size_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapped file

  int64_t n_rows() const;  // product of shape[1..]
  std::span<const uint8_t> bytes() const { return {data, n_bytes}; }
};

class File {
 public:
  // Maps and parses the file at path; a file of a split model opens the whole set.
  static File open(const std::string& path);
  // Parses bytes that the caller keeps alive (fuzzing, tests). `origin` names the
  // input in error messages.
  static File parse(std::span<const uint8_t> bytes, std::string origin = "<memory>");

  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // The first (or only) file's version, alignment, data section and bytes.
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  const std::string& origin() const { return origin_; }

  // ---- files: one, or each file of a split model in order ----
  size_t n_files() const { return 1 + shards_.size(); }
  const std::string& file_origin(size_t index) const;
  // File `index`'s bytes before its tensor data: header, metadata and tensor table.
  std::span<const uint8_t> file_header(size_t index) const;
  std::vector<std::string> paths() const;

  // ---- metadata ----
  const std::vector<std::pair<std::string_view, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters throw herd::Error naming the key when it is absent or of another type.
  // Integer getters accept any integer type whose value fits.
  std::string_view get_string(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;  // any float or integer type
  bool get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string_or(std::string_view key) const;
  std::optional<uint64_t> get_u64_opt(std::string_view key) const;
  std::optional<float> get_f32_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;
  // Arrays: strings as views; numeric arrays converted element-wise (any numeric element
  // type is accepted and converted).
  const std::vector<std::string_view>& get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;

  // ---- tensors ----
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  // Throws when absent, naming the model (and, for a split model, its number of files).
  const TensorInfo& tensor(std::string_view name) const;
  // Drops the tensor's pages from the process's memory (they are re-read from the file if
  // touched again): for tensors whose data has been copied, e.g. repacked for the kernels.
  void release(const TensorInfo& t) const;

 private:
  File() = default;
  static File open_one(const std::string& path);
  // Opens every file of the split model `first` is a file of (split.cpp).
  static File open_split(File first);
  const File& file_at(size_t index) const { return index == 0 ? *this : shards_[index - 1]; }
  void parse_all();

  std::unique_ptr<MappedFile> mapping_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string origin_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, Value>> kv_;
  std::map<std::string_view, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string_view, size_t, std::less<>> tensor_index_;
  // A split model's files after the first, each parsed as a file of its own (their tensors
  // are listed in tensors_ too). Empty for a one-file model.
  std::vector<File> shards_;
};

}  // namespace herd::gguf
