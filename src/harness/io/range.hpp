// The value grammar of the command line and of configs (docs/DESIGN.md, "Command line"):
//   a list        1,17,4097
//   a range       512..65536 (doubling), 512..65536:*4 (times 4), 1024..8192:+1024 (plus 1024)
//   suffixes      k = ×1024, m = ×1048576 (1k..64k)
//   combinations  lists and ranges joined by commas (1,17,512..4096)
// Every error is a UsageError naming `what` (the flag or config key) and the offending text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faprobe {

// The most values one axis may have (after expansion, duplicates counted once). A range that would give
// more is refused before any value is stored: `--seq 1..2147483648:+1` is an error, not 16 GiB of lengths.
inline constexpr std::uint64_t kMaxAxisValues = 100000;

// One integer with an optional k/m suffix, in [min_value, max_value].
std::int64_t parse_integer(std::string_view text, std::string_view what, std::int64_t min_value,
                           std::int64_t max_value);

// Integers in order of appearance, duplicates dropped; at most kMaxAxisValues of them.
std::vector<std::int64_t> parse_integer_list(std::string_view text, std::string_view what,
                                             std::int64_t min_value = 1,
                                             std::int64_t max_value = std::int64_t(1) << 40);

// The same grammar with a choice: duplicates kept (a sequence such as one length per batch entry) or dropped.
std::vector<std::int64_t> parse_integer_sequence(std::string_view text, std::string_view what,
                                                 std::int64_t min_value, std::int64_t max_value,
                                                 bool keep_duplicates);

// Comma-separated names, trimmed, none empty, duplicates dropped.
std::vector<std::string> parse_name_list(std::string_view text, std::string_view what);

// A size such as 20GiB, 512MB, 1.5GB, 4096 (bytes). Units: B, KB/MB/GB/TB (10^3), KiB/MiB/GiB/TiB (2^10).
std::uint64_t parse_size(std::string_view text, std::string_view what);

// A non-negative decimal number (seconds, percent).
double parse_number(std::string_view text, std::string_view what, double min_value, double max_value);

std::string format_bytes(double bytes);  // "137.4 GB", "512.0 MB" (decimal units, like the seed's table)
std::string format_seconds(double seconds);  // "1.234 s", "12.345 ms", "13.2 us"

}  // namespace faprobe
