#include "harness/io/range.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "model/errors.hpp"

namespace faprobe {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == separator) {
      parts.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  return parts;
}

// Multiplies with an overflow check against `limit`.
bool checked_multiply(std::int64_t a, std::int64_t b, std::int64_t limit, std::int64_t& out) {
  if (a != 0 && b > limit / a) return false;
  out = a * b;
  return out <= limit;
}

}  // namespace

std::int64_t parse_integer(std::string_view text, std::string_view what, std::int64_t min_value,
                           std::int64_t max_value) {
  const std::string_view original = text;
  text = trim(text);
  std::int64_t multiplier = 1;
  if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) {
    multiplier = 1024;
    text.remove_suffix(1);
  } else if (!text.empty() && (text.back() == 'm' || text.back() == 'M')) {
    multiplier = 1024 * 1024;
    text.remove_suffix(1);
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error == std::errc::invalid_argument || end != text.data() + text.size()) {
    throw UsageError(fmt::format("{}: '{}' is not an integer (examples: 512, 4k, 1m)", what, original));
  }
  std::int64_t scaled = 0;
  if (error == std::errc::result_out_of_range || value < 0 ||
      !checked_multiply(value, multiplier, std::numeric_limits<std::int64_t>::max(), scaled) ||
      scaled > max_value) {
    if (value < 0 && error != std::errc::result_out_of_range) {
      throw UsageError(fmt::format("{}: {} is below the minimum {}", what, original, min_value));
    }
    throw UsageError(fmt::format("{}: '{}' is too large (maximum {})", what, original, max_value));
  }
  if (scaled < min_value) {
    throw UsageError(fmt::format("{}: {} is below the minimum {}", what, original, min_value));
  }
  return scaled;
}

std::vector<std::int64_t> parse_integer_list(std::string_view text, std::string_view what,
                                             std::int64_t min_value, std::int64_t max_value) {
  return parse_integer_sequence(text, what, min_value, max_value, /*keep_duplicates=*/false);
}

std::vector<std::int64_t> parse_integer_sequence(std::string_view text, std::string_view what,
                                                 std::int64_t min_value, std::int64_t max_value,
                                                 bool keep_duplicates) {
  std::vector<std::int64_t> values;
  std::unordered_set<std::int64_t> seen;  // duplicates dropped in linear time, whatever the list's length
  auto append = [&](std::int64_t value) {
    if (keep_duplicates || seen.insert(value).second) values.push_back(value);
  };
  // The axis stays within kMaxAxisValues once `count` more values are added; an arithmetic range is counted
  // before any of its values is stored, so that an absurd one costs nothing but its error.
  auto check_count = [&](std::uint64_t count, std::string_view item) {
    if (count > kMaxAxisValues || values.size() + count > kMaxAxisValues) {
      throw UsageError(fmt::format("{}: '{}' gives {} values, and an axis takes at most {} (a sweep of that "
                                   "many cases would not finish); use a coarser step",
                                   what, item, values.size() + count, kMaxAxisValues));
    }
  };
  if (trim(text).empty()) throw UsageError(fmt::format("{}: empty value (examples: 512, 1,17,4097, 512..65536)", what));
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) throw UsageError(fmt::format("{}: empty item in '{}'", what, text));
    const std::size_t dots = item.find("..");
    if (dots == std::string_view::npos) {
      check_count(1, item);
      append(parse_integer(item, what, min_value, max_value));
      continue;
    }
    // A range: START..END[:*FACTOR | :+STEP]
    std::string_view bounds = item, step_text;
    const std::size_t colon = item.find(':');
    if (colon != std::string_view::npos && colon < dots) {  // "1:2..8": the step comes after the range
      throw UsageError(fmt::format("{}: '{}' is not a range (START..END, START..END:*FACTOR, START..END:+STEP)",
                                   what, item));
    }
    if (colon != std::string_view::npos) {
      bounds = item.substr(0, colon);
      step_text = trim(item.substr(colon + 1));
    }
    const std::int64_t start = parse_integer(bounds.substr(0, dots), what, min_value, max_value);
    const std::int64_t end = parse_integer(bounds.substr(dots + 2), what, min_value, max_value);
    if (end < start) {
      throw UsageError(fmt::format("{}: range '{}' is empty (end {} is below start {})", what, item, end, start));
    }
    bool geometric = true;
    std::int64_t step = 2;
    if (!step_text.empty()) {
      if (step_text.front() != '*' && step_text.front() != '+') {
        throw UsageError(fmt::format("{}: step '{}' in '{}' must be *FACTOR or +STEP (512..65536:*4, 1024..8192:+1024)",
                                     what, step_text, item));
      }
      geometric = step_text.front() == '*';
      step = parse_integer(step_text.substr(1), what, geometric ? 2 : 1, max_value);
    }
    if (geometric && start == 0) {  // 0, 0, 0, ...: a geometric range never leaves 0
      throw UsageError(fmt::format("{}: range '{}' starts at 0, and a geometric range (*FACTOR, the default) "
                                   "never leaves 0; give a step ('{}:+1') or start at 1",
                                   what, item, bounds));
    }
    if (!geometric) check_count(std::uint64_t(end - start) / std::uint64_t(step) + 1, item);
    for (std::int64_t value = start; value <= end;) {
      append(value);
      std::int64_t next = 0;
      if (geometric ? !checked_multiply(value, step, end, next) : (value > end - step)) break;
      value = geometric ? next : value + step;
    }
    if (geometric) check_count(0, item);  // at most 63 values, stored: check the total
  }
  return values;
}

std::vector<std::string> parse_name_list(std::string_view text, std::string_view what) {
  std::vector<std::string> names;
  std::unordered_set<std::string_view> seen;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) throw UsageError(fmt::format("{}: empty name in '{}'", what, text));
    if (seen.insert(item).second) names.emplace_back(item);
  }
  return names;
}

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  const std::string_view original = trim(text);
  std::size_t digits = 0;
  while (digits < original.size() && (std::isdigit(static_cast<unsigned char>(original[digits])) || original[digits] == '.'))
    ++digits;
  const std::string number(original.substr(0, digits));
  const std::string_view unit = trim(original.substr(digits));
  // A unit with a B and no i is decimal (4GB = 4·10^9 bytes); a bare letter is binary, as `free -g`, Docker's
  // --memory and Slurm's --mem read it (4G = 4GiB = 4·2^30 bytes); so is Kubernetes' Gi.
  static constexpr double kKi = 1024.0, kMi = kKi * 1024.0, kGi = kMi * 1024.0, kTi = kGi * 1024.0;
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"", 1.0},   {"B", 1.0},   {"KB", 1e3},  {"kB", 1e3},  {"MB", 1e6},  {"GB", 1e9},  {"TB", 1e12},
      {"KiB", kKi}, {"MiB", kMi}, {"GiB", kGi}, {"TiB", kTi}, {"Ki", kKi},  {"Mi", kMi},  {"Gi", kGi},
      {"Ti", kTi},  {"K", kKi},   {"M", kMi},   {"G", kGi},   {"T", kTi},   {"k", kKi},   {"m", kMi},
      {"g", kGi},   {"t", kTi}};
  double scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || error != std::errc() || end != number.data() + number.size() || scale == 0) {
    throw UsageError(fmt::format("{}: '{}' is not a size (examples: 4G or 4GiB = 4·2^30 bytes, 4GB = 4·10^9 bytes, 512M, 1.5GB, 4096)", what, original));
  }
  const double bytes = value * scale;
  if (!(bytes >= 1.0) || bytes > 1e18) {
    throw UsageError(fmt::format("{}: '{}' is out of range (1 byte to 1 EB)", what, original));
  }
  return std::uint64_t(bytes);
}

double parse_number(std::string_view text, std::string_view what, double min_value, double max_value) {
  const std::string number(trim(text));
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || error != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    throw UsageError(fmt::format("{}: '{}' is not a number", what, text));
  }
  if (value < min_value || value > max_value) {
    throw UsageError(fmt::format("{}: {} is outside [{}, {}]", what, text, min_value, max_value));
  }
  return value;
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.3f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 5) {
    bytes /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

}  // namespace faprobe
