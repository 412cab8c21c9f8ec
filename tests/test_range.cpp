// The range grammar of docs/DESIGN.md and its errors.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "harness/io/range.hpp"
#include "model/dtype.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

using Values = std::vector<std::int64_t>;

TEST(Range, ListsRangesStepsAndSuffixes) {
  EXPECT_EQ(parse_integer_list("1,17,4097", "--seq"), (Values{1, 17, 4097}));
  EXPECT_EQ(parse_integer_list("512..4096", "--seq"), (Values{512, 1024, 2048, 4096}));
  EXPECT_EQ(parse_integer_list("512..65536:*4", "--seq"), (Values{512, 2048, 8192, 32768}));
  EXPECT_EQ(parse_integer_list("1024..4096:+1024", "--seq"), (Values{1024, 2048, 3072, 4096}));
  EXPECT_EQ(parse_integer_list("1k..4k", "--seq"), (Values{1024, 2048, 4096}));
  EXPECT_EQ(parse_integer_list("1m", "--seq"), (Values{1048576}));
  EXPECT_EQ(parse_integer_list("1, 17, 512..2048, 17", "--seq"), (Values{1, 17, 512, 1024, 2048}));
  EXPECT_EQ(parse_integer_list("100..1000", "--seq"), (Values{100, 200, 400, 800}));  // stops below the end
  EXPECT_EQ(parse_integer_list("7..7", "--seq"), (Values{7}));
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    parse_integer_list(text, "--seq");
    FAIL() << "'" << text << "' was accepted";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("--seq"), std::string::npos) << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

TEST(Range, ErrorsNameTheFlagAndTheProblem) {
  expect_error("512..64", "empty");
  expect_error("", "empty");
  expect_error("1,,2", "empty item");
  expect_error("abc", "not an integer");
  expect_error("12x", "not an integer");
  expect_error("0", "below the minimum");
  expect_error("-5", "below the minimum");
  expect_error("99999999999999999999", "too large");
  expect_error("9000000000000000k", "too large");
  expect_error("512..4096:*1", "below the minimum");
  expect_error("512..4096:+0", "below the minimum");
  expect_error("512..4096:/2", "must be *FACTOR or +STEP");
  expect_error("1:2..8", "'1:2..8' is not a range");  // found by the range fuzzer: it escaped as out_of_range
  expect_error("102192:+1024'4..8192:+1024", "is not a range");
}

// An axis that admits 0 (--seed) once hung on '0..59': 0 doubled is 0, and the range never ended.
TEST(Range, AGeometricRangeFromZeroIsRefusedAndAnArithmeticOneWorks) {
  EXPECT_EQ(parse_integer_sequence("0..3:+1", "--seed", 0, 100, false), (Values{0, 1, 2, 3}));
  for (const std::string text : {"0..59", "0..59:*4"}) {
    try {
      parse_integer_sequence(text, "--seed", 0, 100, false);
      FAIL() << "'" << text << "' was accepted";
    } catch (const UsageError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("--seed: range '" + text + "' starts at 0"), std::string::npos) << message;
      EXPECT_NE(message.find("'0..59:+1'"), std::string::npos) << message;
    }
  }
}

TEST(Range, DtypesInFaprobesAndPyTorchsNames) {
  EXPECT_EQ(parse_dtype("bf16", "--dtype"), DType::bf16);
  EXPECT_EQ(parse_dtype("bfloat16", "--dtype"), DType::bf16);
  EXPECT_EQ(parse_dtype("torch.bfloat16", "--dtype"), DType::bf16);
  EXPECT_EQ(parse_dtype("float16", "--dtype"), DType::fp16);
  EXPECT_EQ(parse_dtype("torch.half", "--dtype"), DType::fp16);
  EXPECT_EQ(parse_dtype("float32", "--dtype"), DType::fp32);
  EXPECT_EQ(parse_dtype("torch.float", "--dtype"), DType::fp32);
  EXPECT_EQ(parse_dtype("float8_e4m3fn", "--dtype"), DType::fp8_e4m3);
  EXPECT_THROW(parse_dtype("float64", "--dtype"), UsageError);
  EXPECT_THROW(parse_dtype("torch.", "--dtype"), UsageError);
  EXPECT_THROW(parse_dtype("numpy.float32", "--dtype"), UsageError);
}

TEST(Range, SizesAndNumbers) {
  EXPECT_EQ(parse_size("20GiB", "--mem-limit"), 20ull << 30);
  EXPECT_EQ(parse_size("512MB", "--mem-limit"), 512000000ull);
  EXPECT_EQ(parse_size("1.5GB", "--mem-limit"), 1500000000ull);
  EXPECT_EQ(parse_size("4096", "--mem-limit"), 4096ull);
  // A bare letter (and Kubernetes' Gi) is binary, as `free -g`, Docker and Slurm read it; with a B and no i,
  // decimal.
  EXPECT_EQ(parse_size("4G", "--mem-limit"), 4ull << 30);
  EXPECT_EQ(parse_size("4g", "--mem-limit"), 4ull << 30);
  EXPECT_EQ(parse_size("4Gi", "--mem-limit"), 4ull << 30);
  EXPECT_EQ(parse_size("4GiB", "--mem-limit"), 4ull << 30);
  EXPECT_EQ(parse_size("4GB", "--mem-limit"), 4000000000ull);
  EXPECT_EQ(parse_size("512M", "--mem-limit"), 512ull << 20);
  EXPECT_EQ(parse_size("64k", "--mem-limit"), 64ull << 10);
  EXPECT_EQ(parse_size("64kB", "--mem-limit"), 64000ull);
  EXPECT_EQ(parse_size("1T", "--mem-limit"), 1ull << 40);
  EXPECT_THROW(parse_size("4Gb", "--mem-limit"), UsageError);  // bits or bytes: not guessed
  EXPECT_THROW(parse_size("20 furlongs", "--mem-limit"), UsageError);
  EXPECT_THROW(parse_size("0", "--mem-limit"), UsageError);
  EXPECT_DOUBLE_EQ(parse_number("0.5", "--max-noise", 0, 100), 0.5);
  EXPECT_THROW(parse_number("150", "--max-noise", 0, 100), UsageError);
  EXPECT_THROW(parse_number("nan", "--max-noise", 0, 100), UsageError);
  EXPECT_EQ(format_bytes(137.4e9), "137.4 GB");
}

// An absurd range is refused from its count, before any value is stored (this one would be 16 GiB), and a
// long list is de-duplicated in linear time: 100 000 values, most of them repeats, in well under a second
// (the quadratic search it replaces took minutes).
TEST(Range, AbsurdRangesAreRefusedAtOnceAndLongListsStayLinear) {
  const auto start = std::chrono::steady_clock::now();
  expect_error("1..2147483648:+1", "gives 2147483648 values, and an axis takes at most 100000");
  expect_error("1..100000:+1,100001", "at most 100000");
  std::string list;
  for (int i = 0; i < 200000; ++i) list += (i ? "," : "") + std::to_string(1 + i % 50000);
  EXPECT_EQ(parse_integer_list(list, "--seq").size(), 50000u);
  EXPECT_EQ(parse_integer_list("1..100000:+1", "--seq").size(), 100000u);
  EXPECT_EQ(parse_integer_list("1..4611686018427387904", "--seq", 1, std::int64_t(1) << 62).size(), 63u);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);  // a bound that only a quadratic (or unbounded) expansion breaks, not a benchmark
}

}  // namespace
}  // namespace faprobe
