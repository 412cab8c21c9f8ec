// Integers read from JSON that faprobe may not have written itself (a JSONL to --resume, a case.json).
// nlohmann's get<std::int64_t>() turns a float such as 1e300 into an integer with a cast that is undefined
// behaviour when the value does not fit, and wraps an unsigned 18446744073709551615 to -1; these take JSON
// integers that fit and nothing else, and throw std::invalid_argument naming the field otherwise.
#pragma once
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace faprobe {

// "1e+300" for a number, its type ("string") for anything else, whose text may be long.
inline std::string json_value_text(const nlohmann::json& value) {
  return value.is_number() ? value.dump() : value.type_name();
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
