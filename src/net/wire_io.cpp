#include "net/wire_io.h"

#include <cmath>

#include "util/error.h"

namespace herd::net {

void WireWriter::append(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  bytes_.insert(bytes_.end(), b, b + n);
}

void WireWriter::string(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  append(s.data(), s.size());
}

void WireReader::fail(std::string_view field, std::string_view problem) const {
  std::string message(message_);
  message.append(": field '").append(field).append("': ").append(problem);
  throw Error("net", message);
}

const uint8_t* WireReader::take(uint64_t n, std::string_view field) {
  if (n > remaining()) {
    fail(field, "truncated (needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) +
                    " left)");
  }
  const uint8_t* p = bytes_.data() + pos_;
  pos_ += n;
  return p;
}

double WireReader::f64_measure(std::string_view field) {
  double v;
  std::memcpy(&v, take(8, field), 8);
  if (!std::isfinite(v) || v < 0) fail(field, "not a finite non-negative number");
  return v;
}

bool WireReader::boolean(std::string_view field) {
  uint8_t v = u8(field);
  if (v > 1) fail(field, "boolean is " + std::to_string(v) + ", not 0 or 1");
  return v == 1;
}

std::span<const uint8_t> WireReader::bytes(uint64_t n, std::string_view field) {
  const uint8_t* p = take(n, field);
  return {p, static_cast<size_t>(n)};
}

std::string WireReader::string(uint32_t max_bytes, std::string_view field) {
  uint32_t n = u32(field);
  if (n > max_bytes) {
    fail(field,
         "length " + std::to_string(n) + " exceeds the maximum " + std::to_string(max_bytes));
  }
  const uint8_t* p = take(n, field);
  return std::string(reinterpret_cast<const char*>(p), n);
}

std::string WireReader::name(uint32_t max_bytes, std::string_view field) {
  std::string s = string(max_bytes, field);
  if (s.empty()) fail(field, "empty");
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) fail(field, "contains a byte that is not printable ASCII");
  }
  return s;
}

uint32_t WireReader::count(uint32_t max_count, uint64_t record_bytes, std::string_view field) {
  uint32_t n = u32(field);
  if (n > max_count) {
    fail(field, "count " + std::to_string(n) + " exceeds the maximum " + std::to_string(max_count));
  }
  // n <= 2^32 and record_bytes is a small constant: the product cannot overflow u64.
  if (uint64_t{n} * record_bytes > remaining()) {
    fail(field, "count " + std::to_string(n) + " needs " + std::to_string(n * record_bytes) +
                    " bytes, " + std::to_string(remaining()) + " left");
  }
  return n;
}

void WireReader::expect_end() {
  if (remaining() != 0) {
    std::string message(message_);
    message += ": " + std::to_string(remaining()) + " trailing bytes after the last field";
    throw Error("net", message);
  }
}

}  // namespace herd::net
