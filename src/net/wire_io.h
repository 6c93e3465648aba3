// Little-endian byte writing and bounded reading for frame payloads. The reader checks
// every read against the bytes that remain and every string or count against a maximum
// before it is used, and its errors name the message and the field:
//   [net] WEIGHTS: field 'tensor_name': length 9000 exceeds the maximum 256
// herd runs on little-endian hosts only (x86-64, ARM64), so arrays of floats travel as their
// in-memory bytes; the static_assert keeps a big-endian port from compiling silently wrong.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace herd::net {

static_assert(std::endian::native == std::endian::little, "herd's wire format assumes LE hosts");

template <typename T>
inline T load_le(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
inline void store_le(uint8_t* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

// Appends fields to a growing byte vector. Strings are `u32 length | bytes`.
class WireWriter {
 public:
  explicit WireWriter(size_t reserve = 64) { bytes_.reserve(reserve); }

  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v) { append(&v, sizeof v); }
  void u32(uint32_t v) { append(&v, sizeof v); }
  void u64(uint64_t v) { append(&v, sizeof v); }
  void i32(int32_t v) { append(&v, sizeof v); }
  void f64(double v) { append(&v, sizeof v); }
  void bytes(std::span<const uint8_t> b) { append(b.data(), b.size()); }
  void string(std::string_view s);

  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  void append(const void* p, size_t n);
  std::vector<uint8_t> bytes_;
};

// Reads fields from a payload; every read that would pass the end throws herd::Error.
class WireReader {
 public:
  // `message` names the payload in errors ("HELLO").
  WireReader(std::span<const uint8_t> bytes, std::string_view message)
      : bytes_(bytes), message_(message) {}

  uint8_t u8(std::string_view field) { return load_le<uint8_t>(take(1, field)); }
  uint16_t u16(std::string_view field) { return load_le<uint16_t>(take(2, field)); }
  uint32_t u32(std::string_view field) { return load_le<uint32_t>(take(4, field)); }
  uint64_t u64(std::string_view field) { return load_le<uint64_t>(take(8, field)); }
  int32_t i32(std::string_view field) { return load_le<int32_t>(take(4, field)); }
  // A finite, non-negative double (measurements: bandwidth, gflops).
  double f64_measure(std::string_view field);
  // 0 or 1; anything else is an error.
  bool boolean(std::string_view field);
  std::span<const uint8_t> bytes(uint64_t n, std::string_view field);
  // `u32 length | bytes`, length <= max_bytes.
  std::string string(uint32_t max_bytes, std::string_view field);
  // A string that must be 1..max_bytes bytes of printable ASCII (names end up in logs).
  std::string name(uint32_t max_bytes, std::string_view field);
  // A u32 count, <= max_count, whose records of `record_bytes` each fit in what remains:
  // checked before the caller allocates anything for them.
  uint32_t count(uint32_t max_count, uint64_t record_bytes, std::string_view field);

  uint64_t remaining() const { return bytes_.size() - pos_; }
  // Throws when bytes remain: a payload longer than its fields is malformed.
  void expect_end();

  [[noreturn]] void fail(std::string_view field, std::string_view problem) const;

 private:
  const uint8_t* take(uint64_t n, std::string_view field);

  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
  std::string_view message_;
};

}  // namespace herd::net
