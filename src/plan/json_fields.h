// Typed reads of JSON fields that fail as herd::Error naming the field. Node profiles and
// plans arrive from other machines, so every field is checked before it is trusted:
// "[plan] plan.stages[1].ranks[0]: field 'heads' is missing or not a [begin, end] pair".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace herd::json_fields {

// `where` names the object in messages, e.g. "node profile 'a.json'[2]".
// REQUIRES: j is an object (checked: an Error otherwise).
const nlohmann::json& field(const nlohmann::json& j, std::string_view key,
                            const std::string& where);
int64_t get_int(const nlohmann::json& j, std::string_view key, const std::string& where);
uint64_t get_uint(const nlohmann::json& j, std::string_view key, const std::string& where);
double get_double(const nlohmann::json& j, std::string_view key, const std::string& where);
bool get_bool(const nlohmann::json& j, std::string_view key, const std::string& where);
std::string get_string(const nlohmann::json& j, std::string_view key, const std::string& where);
const nlohmann::json& get_array(const nlohmann::json& j, std::string_view key,
                                const std::string& where);
// A half-open range written as [begin, end] with 0 <= begin <= end.
std::pair<int64_t, int64_t> get_range(const nlohmann::json& j, std::string_view key,
                                      const std::string& where);

// Throws Error("plan", where + ": field 'key' " + problem).
[[noreturn]] void bad_field(std::string_view key, const std::string& where,
                            std::string_view problem);

}  // namespace herd::json_fields
