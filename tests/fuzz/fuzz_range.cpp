// Fuzz target: the value grammar (harness/io/range.hpp). The first byte picks the parser, the rest is the text.
#include <string_view>

#include "fuzz_targets.hpp"
#include "harness/io/range.hpp"
#include "model/errors.hpp"

namespace faprobe::fuzz {

int range_grammar(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 6) {
      case 0: (void)parse_integer_list(text, "--seq"); break;
      case 1: (void)parse_integer_sequence(text, "--seqlens", 1, std::int64_t(1) << 31, /*keep_duplicates=*/true); break;
      case 2: (void)parse_integer_list(text, "--seed", 0, std::int64_t(1) << 62); break;  // admits 0 (0..59 once hung)
      case 3: (void)format_bytes(double(parse_size(text, "--mem-limit"))); break;
      case 4: (void)parse_number(text, "--max-time", 0.001, 86400.0); break;
      default: (void)parse_name_list(text, "--impl"); break;
    }
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace faprobe::fuzz
