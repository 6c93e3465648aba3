#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace herd::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr uint32_t kVersion = 3;

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  // resize + memcpy: g++ 12 warns falsely on insert() into a vector that starts empty.
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<uint8_t> typed(ValueType type) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(type));
  return out;
}

template <typename T>
std::vector<uint8_t> numeric_array(ValueType elem, std::span<const T> values) {
  std::vector<uint8_t> out = typed(ValueType::ARRAY);
  put<uint32_t>(out, static_cast<uint32_t>(elem));
  put<uint64_t>(out, values.size());
  for (T v : values) put<T>(out, v);
  return out;
}

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

}  // namespace

Writer::Writer(size_t alignment) : alignment_(alignment) {
  HERD_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0);
  if (alignment != 32) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void Writer::set(std::string_view key, std::vector<uint8_t> encoded) {
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  entries_.push_back({std::string(key), std::move(encoded)});
}

void Writer::set_u16(std::string_view key, uint16_t value) {
  auto out = typed(ValueType::U16);
  put(out, value);
  set(key, std::move(out));
}

void Writer::set_u32(std::string_view key, uint32_t value) {
  auto out = typed(ValueType::U32);
  put(out, value);
  set(key, std::move(out));
}

void Writer::set_i32(std::string_view key, int32_t value) {
  auto out = typed(ValueType::I32);
  put(out, value);
  set(key, std::move(out));
}

void Writer::set_u64(std::string_view key, uint64_t value) {
  auto out = typed(ValueType::U64);
  put(out, value);
  set(key, std::move(out));
}

void Writer::set_f32(std::string_view key, float value) {
  auto out = typed(ValueType::F32);
  put(out, value);
  set(key, std::move(out));
}

void Writer::set_bool(std::string_view key, bool value) {
  auto out = typed(ValueType::BOOL);
  put<uint8_t>(out, value ? 1 : 0);
  set(key, std::move(out));
}

void Writer::set_string(std::string_view key, std::string_view value) {
  auto out = typed(ValueType::STRING);
  put_string(out, value);
  set(key, std::move(out));
}

void Writer::set_string_array(std::string_view key, const std::vector<std::string>& values) {
  auto out = typed(ValueType::ARRAY);
  put<uint32_t>(out, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(out, values.size());
  for (const std::string& s : values) put_string(out, s);
  set(key, std::move(out));
}

void Writer::set_f32_array(std::string_view key, std::span<const float> values) {
  set(key, numeric_array<float>(ValueType::F32, values));
}

void Writer::set_i32_array(std::string_view key, std::span<const int32_t> values) {
  set(key, numeric_array<int32_t>(ValueType::I32, values));
}

void Writer::set_bool_array(std::string_view key, std::span<const uint8_t> values) {
  std::vector<uint8_t> bools(values.begin(), values.end());
  for (uint8_t& b : bools) b = b != 0 ? 1 : 0;
  set(key, numeric_array<uint8_t>(ValueType::BOOL, std::span<const uint8_t>(bools)));
}

void Writer::set_value(std::string_view key, const Value& value) {
  auto out = typed(value.type);
  switch (value.type) {
    case ValueType::U8:
    case ValueType::BOOL:
      put<uint8_t>(out, static_cast<uint8_t>(value.u));
      break;
    case ValueType::I8:
      put<int8_t>(out, static_cast<int8_t>(value.i));
      break;
    case ValueType::U16:
      put<uint16_t>(out, static_cast<uint16_t>(value.u));
      break;
    case ValueType::I16:
      put<int16_t>(out, static_cast<int16_t>(value.i));
      break;
    case ValueType::U32:
      put<uint32_t>(out, static_cast<uint32_t>(value.u));
      break;
    case ValueType::I32:
      put<int32_t>(out, static_cast<int32_t>(value.i));
      break;
    case ValueType::U64:
      put<uint64_t>(out, value.u);
      break;
    case ValueType::I64:
      put<int64_t>(out, value.i);
      break;
    case ValueType::F32:
      put<float>(out, static_cast<float>(value.f));
      break;
    case ValueType::F64:
      put<double>(out, value.f);
      break;
    case ValueType::STRING:
      put_string(out, value.str);
      break;
    case ValueType::ARRAY: {
      put<uint32_t>(out, static_cast<uint32_t>(value.elem_type));
      put<uint64_t>(out, value.count);
      if (value.elem_type == ValueType::STRING) {
        for (std::string_view s : value.strings) put_string(out, s);
      } else {
        size_t elem_bytes = 0;
        switch (value.elem_type) {
          case ValueType::U8:
          case ValueType::I8:
          case ValueType::BOOL:
            elem_bytes = 1;
            break;
          case ValueType::U16:
          case ValueType::I16:
            elem_bytes = 2;
            break;
          case ValueType::U32:
          case ValueType::I32:
          case ValueType::F32:
            elem_bytes = 4;
            break;
          default:
            elem_bytes = 8;
            break;
        }
        out.insert(out.end(), value.raw, value.raw + value.count * elem_bytes);
      }
      break;
    }
  }
  set(key, std::move(out));
}

void Writer::append(const Writer& other) {
  for (const Entry& e : other.entries_) set(e.key, e.encoded);
}

size_t Writer::add_tensor(std::string_view name, TensorType type, std::vector<int64_t> shape) {
  if (shape.empty() || shape.size() > 4) {
    throw Error("gguf", "tensor '" + std::string(name) + "': 1 to 4 dimensions allowed");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw Error("gguf", "tensor '" + std::string(name) + "': non-positive dimension");
    n *= d;
  }
  const TypeTraits& traits = type_traits(type);
  if (shape[0] % traits.block_size != 0) {
    throw Error("gguf", "tensor '" + std::string(name) + "': row of " + std::to_string(shape[0]) +
                            " is not a multiple of the " + std::string(traits.name) +
                            " block size " + std::to_string(traits.block_size));
  }
  size_t n_bytes = static_cast<size_t>(n / traits.block_size) * traits.block_bytes;
  tensors_.push_back({std::string(name), type, std::move(shape), n_bytes, data_size_});
  data_size_ += (n_bytes + alignment_ - 1) / alignment_ * alignment_;
  return tensors_.size() - 1;
}

uint64_t Writer::total_tensor_bytes() const {
  return data_size_;
}

std::vector<uint8_t> Writer::header() const {
  std::vector<uint8_t> header;
  put<uint32_t>(header, kMagic);
  put<uint32_t>(header, kVersion);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, entries_.size());
  for (const Entry& e : entries_) {
    put_string(header, e.key);
    header.insert(header.end(), e.encoded.begin(), e.encoded.end());
  }
  for (const Tensor& t : tensors_) {
    put_string(header, t.name);
    put<uint32_t>(header, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(header, static_cast<uint64_t>(d));
    put<uint32_t>(header, static_cast<uint32_t>(t.type));
    put<uint64_t>(header, t.offset);
  }
  header.resize((header.size() + alignment_ - 1) / alignment_ * alignment_, 0);

  return header;
}

void Writer::write(const std::string& path, const FillTensor& fill) const {
  std::vector<uint8_t> buffer;
  write_streamed(path, [&](size_t index, const Emit& emit) {
    buffer.resize(tensors_[index].n_bytes);
    fill(index, std::span<uint8_t>(buffer.data(), buffer.size()));
    emit(buffer);
  });
}

void Writer::write_streamed(const std::string& path, const StreamTensor& stream) const {
  const std::vector<uint8_t> header = this->header();

  std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, FileCloser> out(std::fopen(tmp.c_str(), "wb"));
  if (!out) throw Error("gguf", "cannot create '" + tmp + "': " + std::strerror(errno));
  auto abandon = [&](int err) {
    out.reset();
    std::remove(tmp.c_str());
    throw Error("gguf", "cannot write '" + tmp + "': " + std::strerror(err));
  };
  auto write_bytes = [&](const void* data, size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, out.get()) != n) abandon(errno);
  };
  write_bytes(header.data(), header.size());
  const std::vector<uint8_t> padding(alignment_, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    size_t written = 0;
    try {
      stream(i, [&](std::span<const uint8_t> bytes) {
        if (bytes.size() > t.n_bytes - written) {
          throw Error("gguf", "tensor '" + t.name + "' got more than its " +
                                  std::to_string(t.n_bytes) + " bytes");
        }
        write_bytes(bytes.data(), bytes.size());
        written += bytes.size();
      });
      if (written != t.n_bytes) {
        throw Error("gguf", "tensor '" + t.name + "' got " + std::to_string(written) + " of its " +
                                std::to_string(t.n_bytes) + " bytes");
      }
    } catch (...) {
      out.reset();
      std::remove(tmp.c_str());
      throw;
    }
    const size_t padded = (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
    write_bytes(padding.data(), padded - t.n_bytes);
  }
  if (std::fflush(out.get()) != 0) abandon(errno);
  if (std::fclose(out.release()) != 0) abandon(errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error("gguf", "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
}

}  // namespace herd::gguf
