#include "server/request_fields.h"

#include <cmath>

#include "http/bounded_json.h"
#include "server/request.h"

namespace herd::server::fields {

void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

json parse_object(std::string_view body) {
  std::string problem;
  json value = http::parse_bounded_json<json>(body, &problem);
  if (value.is_discarded()) bad("", "the request body: " + problem);
  if (!value.is_object()) bad("", "the request body must be a JSON object");
  return value;
}

bool given(const json& o, const char* name) {
  return o.contains(name) && !o[name].is_null();
}

std::optional<double> number(const json& o, const char* name, double lo, double hi,
                             const std::string& where) {
  if (!given(o, name)) return std::nullopt;
  const std::string field = where + name;
  const json& v = o[name];
  if (!v.is_number()) bad(field, "'" + field + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(field,
        "'" + field + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return x;
}

std::optional<int64_t> integer(const json& o, const char* name, int64_t lo, int64_t hi,
                               const std::string& where, Integers form) {
  if (!given(o, name)) return std::nullopt;
  const std::string field = where + name;
  const json& v = o[name];
  const bool whole_float = form == Integers::kWholeFloats && v.is_number_float() &&
                           std::isfinite(v.get<double>()) &&
                           std::trunc(v.get<double>()) == v.get<double>();
  if (!v.is_number_integer() && !whole_float) bad(field, "'" + field + "' must be an integer");
  const auto range_error = [&] {
    bad(field,
        "'" + field + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  };
  if (whole_float) {
    const double x = v.get<double>();
    // 2^63 itself is above every int64_t (INT64_MAX as a double rounds up to it).
    if (x < static_cast<double>(lo) || x > static_cast<double>(hi) || x >= 0x1p63) range_error();
    return static_cast<int64_t>(x);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) range_error();
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) range_error();
  return x;
}

std::optional<bool> boolean(const json& o, const char* name, const std::string& where) {
  if (!given(o, name)) return std::nullopt;
  const std::string field = where + name;
  if (!o[name].is_boolean()) bad(field, "'" + field + "' must be a boolean");
  return o[name].get<bool>();
}

}  // namespace herd::server::fields
