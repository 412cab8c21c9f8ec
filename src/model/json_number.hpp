// Values read from JSON that faprobe may not have written itself (a JSONL to --resume, a case.json, result
// files given to report, compare and merge). nlohmann's get<std::int64_t>() turns a float such as 1e300 into
// an integer with a cast that is undefined behaviour when the value does not fit, and wraps an unsigned
// 18446744073709551615 to -1; these take JSON integers that fit and nothing else. Every reader here throws
// std::invalid_argument naming the field and what was expected ("device: expected a string, found 5"),
// where nlohmann's own errors name neither ("type must be string, but is number").
#pragma once
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace faprobe {

// "1e+300" for a number, its type ("string") for anything else, whose text may be long.
inline std::string json_value_text(const nlohmann::json& value) {
  return value.is_number() ? value.dump() : value.type_name();
}

// The member `key` of `object`, `name` in messages ("case.dtype"): missing, or `object` not an object, throws.
inline const nlohmann::json& json_member(const nlohmann::json& object, const char* key, std::string_view name) {
  if (!object.is_object() || !object.contains(key)) {
    throw std::invalid_argument(std::string(name) + ": missing" +
                                (object.is_object() ? "" : " (in " + std::string(object.type_name()) + ", not an object)"));
  }
  return object[key];
}

inline std::string json_string(const nlohmann::json& value, std::string_view name) {
  if (!value.is_string()) throw std::invalid_argument(std::string(name) + ": expected a string, found " + json_value_text(value));
  return value.get<std::string>();
}

inline double json_double(const nlohmann::json& value, std::string_view name) {
  if (!value.is_number()) throw std::invalid_argument(std::string(name) + ": expected a number, found " + json_value_text(value));
  return value.get<double>();
}

inline bool json_bool(const nlohmann::json& value, std::string_view name) {
  if (!value.is_boolean()) {
    throw std::invalid_argument(std::string(name) + ": expected true or false, found " + json_value_text(value));
  }
  return value.get<bool>();
}

// A list of strings (an absent list is read by the caller as empty).
inline std::vector<std::string> json_strings(const nlohmann::json& value, std::string_view name) {
  if (!value.is_array()) throw std::invalid_argument(std::string(name) + ": expected a list of strings, found " + json_value_text(value));
  std::vector<std::string> strings;
  for (const nlohmann::json& item : value) strings.push_back(json_string(item, name));
  return strings;
}

inline std::int64_t json_int64(const nlohmann::json& value, std::string_view name) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
      throw std::invalid_argument(std::string(name) + ": " + value.dump() + " is out of range (at most 2^63 - 1)");
    }
    return value.get<std::int64_t>();
  }
  throw std::invalid_argument(std::string(name) + ": not an integer (" + json_value_text(value) + ")");
}

inline std::uint64_t json_uint64(const nlohmann::json& value, std::string_view name) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {  // signed: parsed negative, or built in code from a signed type
    const std::int64_t signed_value = value.get<std::int64_t>();
    if (signed_value >= 0) return std::uint64_t(signed_value);
    throw std::invalid_argument(std::string(name) + ": " + value.dump() + " is negative");
  }
  throw std::invalid_argument(std::string(name) + ": not an integer (" + json_value_text(value) + ")");
}

}  // namespace faprobe
