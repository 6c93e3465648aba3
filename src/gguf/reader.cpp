#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace herd::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
// Bounds that keep a hostile header from asking for absurd allocations before the
// per-item bounds checks catch it: every kv needs at least 12 bytes and every tensor 24.
constexpr uint64_t kMinKvBytes = 8 + 4;
constexpr uint64_t kMinTensorBytes = 8 + 4 + 4 + 8;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error("gguf", "'" + origin + "': " + what);
}

// A bounds-checked little-endian reader over the file's bytes.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& origin)
      : bytes_(bytes), origin_(origin) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  const uint8_t* take(uint64_t n, const char* what) {
    if (n > remaining()) {
      fail(origin_, std::string("truncated: ") + what + " needs " + std::to_string(n) +
                        " bytes at offset " + std::to_string(pos_) + " but only " +
                        std::to_string(remaining()) + " remain");
    }
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read(const char* what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what), sizeof(T));
    return value;
  }

  std::string_view read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > remaining()) {
      fail(origin_, std::string(what) + ": string length " + std::to_string(len) + " at offset " +
                        std::to_string(pos_ - 8) + " runs past the end of the file");
    }
    return {reinterpret_cast<const char*>(take(len, what)), len};
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& origin_;
  size_t pos_ = 0;
};

size_t scalar_size(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
    case ValueType::ARRAY:
      return 0;
  }
  return 0;
}

bool known_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::F64);
}

// Decodes one scalar element at p (unaligned, little-endian) into v.
void decode_scalar(ValueType type, const uint8_t* p, Value& v) {
  auto load = [p](auto sample) {
    decltype(sample) x;
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (type) {
    case ValueType::U8:
      v.u = load(uint8_t{});
      break;
    case ValueType::I8:
      v.i = load(int8_t{});
      break;
    case ValueType::U16:
      v.u = load(uint16_t{});
      break;
    case ValueType::I16:
      v.i = load(int16_t{});
      break;
    case ValueType::U32:
      v.u = load(uint32_t{});
      break;
    case ValueType::I32:
      v.i = load(int32_t{});
      break;
    case ValueType::F32:
      v.f = load(float{});
      break;
    case ValueType::BOOL:
      v.u = load(uint8_t{}) != 0;
      break;
    case ValueType::U64:
      v.u = load(uint64_t{});
      break;
    case ValueType::I64:
      v.i = load(int64_t{});
      break;
    case ValueType::F64:
      v.f = load(double{});
      break;
    case ValueType::STRING:
    case ValueType::ARRAY:
      break;
  }
}

Value read_value(Cursor& in, ValueType type, std::string_view key, const std::string& origin) {
  Value v;
  v.type = type;
  if (type == ValueType::STRING) {
    v.str = in.read_string("metadata string");
    return v;
  }
  if (type != ValueType::ARRAY) {
    decode_scalar(type, in.take(scalar_size(type), "metadata value"), v);
    return v;
  }
  uint32_t elem = in.read<uint32_t>("array type");
  if (!known_value_type(elem)) {
    fail(origin,
         "metadata '" + std::string(key) + "': unknown array element type " + std::to_string(elem));
  }
  v.elem_type = static_cast<ValueType>(elem);
  if (v.elem_type == ValueType::ARRAY) {
    fail(origin, "metadata '" + std::string(key) + "': nested arrays are not supported");
  }
  v.count = in.read<uint64_t>("array length");
  if (v.elem_type == ValueType::STRING) {
    // Each string needs at least its 8-byte length: reject impossible counts up front.
    if (v.count > in.remaining() / 8) {
      fail(origin, "metadata '" + std::string(key) + "': array length " + std::to_string(v.count) +
                       " runs past the end of the file");
    }
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(in.read_string("array string"));
  } else {
    size_t size = scalar_size(v.elem_type);
    if (v.count > in.remaining() / size) {
      fail(origin, "metadata '" + std::string(key) + "': array length " + std::to_string(v.count) +
                       " runs past the end of the file");
    }
    v.raw = in.take(v.count * size, "array data");
  }
  return v;
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  auto index = static_cast<uint32_t>(type);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
      return true;
    default:
      return false;
  }
}

int64_t TensorInfo::n_rows() const {
  int64_t rows = 1;
  for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
  return rows;
}

File File::open(const std::string& path) {
  return open_split(open_one(path));
}

File File::open_one(const std::string& path) {
  File file;
  file.mapping_ = std::make_unique<MappedFile>(MappedFile::open(path));
  file.bytes_ = file.mapping_->bytes();
  file.origin_ = path;
  file.parse_all();
  return file;
}

File File::parse(std::span<const uint8_t> bytes, std::string origin) {
  File file;
  file.bytes_ = bytes;
  file.origin_ = std::move(origin);
  file.parse_all();
  return file;
}

void File::parse_all() {
  Cursor in(bytes_, origin_);
  if (bytes_.size() < 4)
    fail(origin_, "truncated: file is " + std::to_string(bytes_.size()) +
                      " bytes, too short for a GGUF header");
  uint32_t magic = in.read<uint32_t>("magic");
  if (magic != kMagic) fail(origin_, "bad magic: not a GGUF file");
  version_ = in.read<uint32_t>("version");
  if (version_ == 1) fail(origin_, "GGUF version 1 is not supported (only 2 and 3)");
  if (version_ != 2 && version_ != 3) {
    fail(origin_, "unsupported GGUF version " + std::to_string(version_) + " (only 2 and 3)");
  }
  uint64_t n_tensors = in.read<uint64_t>("tensor count");
  uint64_t n_kv = in.read<uint64_t>("metadata count");
  if (n_kv > in.remaining() / kMinKvBytes) {
    fail(origin_, "truncated header: " + std::to_string(n_kv) + " metadata entries cannot fit in " +
                      std::to_string(in.remaining()) + " bytes");
  }
  if (n_tensors > in.remaining() / kMinTensorBytes) {
    fail(origin_, "truncated header: " + std::to_string(n_tensors) + " tensors cannot fit in " +
                      std::to_string(in.remaining()) + " bytes");
  }

  kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key = in.read_string("metadata key");
    uint32_t type = in.read<uint32_t>("metadata type");
    if (!known_value_type(type)) {
      fail(origin_,
           "metadata '" + std::string(key) + "': unknown value type " + std::to_string(type));
    }
    if (kv_index_.count(key)) fail(origin_, "duplicate metadata key '" + std::string(key) + "'");
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(key, read_value(in, static_cast<ValueType>(type), key, origin_));
  }

  if (const Value* a = find("general.alignment")) {
    if (!a->is_integer() || a->u == 0 || a->u > (1u << 30) || (a->u & (a->u - 1)) != 0) {
      fail(origin_, "general.alignment must be a power of two");
    }
    alignment_ = a->u;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = in.read_string("tensor name");
    std::string name(t.name);
    uint32_t n_dims = in.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail(origin_,
           "tensor '" + name + "': " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = in.read<uint64_t>("tensor shape");
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          static_cast<uint64_t>(t.n_elements) >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne) {
        fail(origin_, "tensor '" + name + "': shape overflows or has a zero dimension");
      }
      t.shape.push_back(static_cast<int64_t>(ne));
      t.n_elements *= static_cast<int64_t>(ne);
    }
    uint32_t type_id = in.read<uint32_t>("tensor type");
    const TypeTraits* traits = find_type_traits(type_id);
    if (traits == nullptr)
      fail(origin_, "tensor '" + name + "': unknown type " + std::to_string(type_id));
    t.type = traits->type;
    if (t.shape[0] % traits->block_size != 0) {
      fail(origin_, "tensor '" + name + "': row of " + std::to_string(t.shape[0]) +
                        " elements is not a multiple of the " + std::string(traits->name) +
                        " block size " + std::to_string(traits->block_size));
    }
    uint64_t blocks = static_cast<uint64_t>(t.n_elements / traits->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
      fail(origin_, "tensor '" + name + "': byte size overflows");
    }
    t.n_bytes = blocks * traits->block_bytes;
    t.offset = in.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0) {
      fail(origin_, "tensor '" + name + "': offset " + std::to_string(t.offset) +
                        " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    if (tensor_index_.count(t.name)) fail(origin_, "duplicate tensor '" + name + "'");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  size_t header_end = in.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset_ > bytes_.size()) {
    fail(origin_, "truncated: data section starts at " + std::to_string(data_offset_) +
                      " beyond file size " + std::to_string(bytes_.size()));
  }
  uint64_t data_size = bytes_.size() > data_offset_ ? bytes_.size() - data_offset_ : 0;
  for (TensorInfo& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      fail(origin_, "tensor '" + std::string(t.name) + "': data [" +
                        std::to_string(data_offset_ + t.offset) + ", +" +
                        std::to_string(t.n_bytes) + ") lies beyond file size " +
                        std::to_string(bytes_.size()));
    }
    t.data = bytes_.data() + data_offset_ + t.offset;
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v,
                             const char* want) {
  fail(f.origin(), "metadata '" + std::string(key) + "' is " +
                       std::string(value_type_name(v.type)) + ", expected " + want);
}

const Value& require(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (v == nullptr) fail(f.origin(), "missing metadata '" + std::string(key) + "'");
  return *v;
}

bool is_signed(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

// The integer value of v as i64 and whether it is non-negative, for range checks.
int64_t integer_as_i64(const File& f, std::string_view key, const Value& v) {
  if (!v.is_integer()) wrong_type(f, key, v, "an integer");
  if (is_signed(v.type)) return v.i;
  if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(f.origin(),
         "metadata '" + std::string(key) + "' = " + std::to_string(v.u) + " is out of range");
  }
  return static_cast<int64_t>(v.u);
}

}  // namespace

std::string_view File::get_string(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.type != ValueType::STRING) wrong_type(*this, key, v, "a string");
  return v.str;
}

uint64_t File::get_u64(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.is_integer() && !is_signed(v.type)) return v.u;
  int64_t i = integer_as_i64(*this, key, v);
  if (i < 0)
    fail(origin_,
         "metadata '" + std::string(key) + "' = " + std::to_string(i) + " must not be negative");
  return static_cast<uint64_t>(i);
}

uint32_t File::get_u32(std::string_view key) const {
  uint64_t u = get_u64(key);
  if (u > std::numeric_limits<uint32_t>::max()) {
    fail(origin_,
         "metadata '" + std::string(key) + "' = " + std::to_string(u) + " is out of range");
  }
  return static_cast<uint32_t>(u);
}

int64_t File::get_i64(std::string_view key) const {
  return integer_as_i64(*this, key, require(*this, key));
}

float File::get_f32(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.is_float()) return static_cast<float>(v.f);
  if (v.is_integer()) return is_signed(v.type) ? static_cast<float>(v.i) : static_cast<float>(v.u);
  wrong_type(*this, key, v, "a number");
}

bool File::get_bool(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.type != ValueType::BOOL) wrong_type(*this, key, v, "a bool");
  return v.u != 0;
}

std::optional<std::string_view> File::get_string_or(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

std::optional<uint64_t> File::get_u64_opt(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_u64(key);
}

std::optional<float> File::get_f32_opt(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_f32(key);
}

std::optional<bool> File::get_bool_opt(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

const std::vector<std::string_view>& File::get_string_array(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.type != ValueType::ARRAY || v.elem_type != ValueType::STRING) {
    wrong_type(*this, key, v, "an array of strings");
  }
  return v.strings;
}

namespace {

template <typename Out>
std::vector<Out> numeric_array(const File& f, std::string_view key) {
  const Value& v = require(f, key);
  if (v.type != ValueType::ARRAY || v.elem_type == ValueType::STRING) {
    wrong_type(f, key, v, "a numeric array");
  }
  std::vector<Out> out(v.count);
  size_t size = scalar_size(v.elem_type);
  for (uint64_t i = 0; i < v.count; ++i) {
    Value e;
    e.type = v.elem_type;
    decode_scalar(v.elem_type, v.raw + i * size, e);
    if (e.is_float()) {
      out[i] = static_cast<Out>(e.f);
    } else if (is_signed(v.elem_type)) {
      out[i] = static_cast<Out>(e.i);
    } else {
      out[i] = static_cast<Out>(e.u);
    }
  }
  return out;
}

}  // namespace

std::vector<float> File::get_f32_array(std::string_view key) const {
  return numeric_array<float>(*this, key);
}

std::vector<int32_t> File::get_i32_array(std::string_view key) const {
  return numeric_array<int32_t>(*this, key);
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void File::release(const TensorInfo& t) const {
  const File& holder = file_at(t.file);
  if (holder.mapping_) holder.mapping_->release(t.data, t.n_bytes);
}

const TensorInfo& File::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (t == nullptr) {
    fail(origin_, "missing tensor '" + std::string(name) + "'" +
                      (shards_.empty() ? std::string()
                                       : " (in none of the " + std::to_string(n_files()) +
                                             " files of the split model)"));
  }
  return *t;
}

const std::string& File::file_origin(size_t index) const {
  HERD_CHECK(index < n_files());
  return file_at(index).origin_;
}

std::span<const uint8_t> File::file_header(size_t index) const {
  HERD_CHECK(index < n_files());
  const File& f = file_at(index);
  return f.bytes_.first(std::min(f.data_offset_, f.bytes_.size()));
}

std::vector<std::string> File::paths() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < n_files(); ++i) out.push_back(file_origin(i));
  return out;
}

}  // namespace herd::gguf
