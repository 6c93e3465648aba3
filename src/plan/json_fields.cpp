#include "plan/json_fields.h"

#include <cmath>

#include "util/error.h"

namespace herd::json_fields {

void bad_field(std::string_view key, const std::string& where, std::string_view problem) {
  throw Error("plan", where + ": field '" + std::string(key) + "' " + std::string(problem));
}

const nlohmann::json& field(const nlohmann::json& j, std::string_view key,
                            const std::string& where) {
  if (!j.is_object()) throw Error("plan", where + ": expected a JSON object");
  auto it = j.find(key);
  if (it == j.end()) bad_field(key, where, "is missing");
  return *it;
}

int64_t get_int(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad_field(key, where, "is too large");
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (!v.is_number_integer()) bad_field(key, where, "is not an integer");
  return v.get<int64_t>();
}

uint64_t get_uint(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) bad_field(key, where, "is negative");
  bad_field(key, where, "is not a non-negative integer");
}

double get_double(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_number()) bad_field(key, where, "is not a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_field(key, where, "is not finite");
  return d;
}

bool get_bool(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_boolean()) bad_field(key, where, "is not true or false");
  return v.get<bool>();
}

std::string get_string(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_string()) bad_field(key, where, "is not a string");
  return v.get<std::string>();
}

const nlohmann::json& get_array(const nlohmann::json& j, std::string_view key,
                                const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_array()) bad_field(key, where, "is not an array");
  return v;
}

std::pair<int64_t, int64_t> get_range(const nlohmann::json& j, std::string_view key,
                                      const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) {
    bad_field(key, where, "is not a [begin, end] pair of integers");
  }
  const int64_t begin = v[0].get<int64_t>(), end = v[1].get<int64_t>();
  if (begin < 0 || end < begin) bad_field(key, where, "is not a range with 0 <= begin <= end");
  return {begin, end};
}

}  // namespace herd::json_fields
