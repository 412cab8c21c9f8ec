// The online softmax helper shared by the CPU kernels (kernels/cpu/online_softmax.hpp) against the plain
// softmax in float64: the seed's exercise B ("verify that your online softmax over blocks equals the full
// softmax exactly — this is the piece people get wrong"). The accumulator here is the one-hot V = identity,
// so the final accumulator is the probability vector itself and every rescale shows up in it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/online_softmax.hpp"

namespace faprobe::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// softmax(x) in float64; a row of -inf gives zeros.
std::vector<double> full_softmax(const std::vector<float>& scores) {
  double row_max = -std::numeric_limits<double>::infinity();
  for (float s : scores) row_max = std::max(row_max, double(s));
  std::vector<double> p(scores.size(), 0.0);
  if (row_max == -std::numeric_limits<double>::infinity()) return p;
  double sum = 0;
  for (std::size_t j = 0; j < scores.size(); ++j) sum += p[j] = std::exp(double(scores[j]) - row_max);
  for (double& value : p) value /= sum;
  return p;
}

// Folds keys [begin, end) into `state` block_k at a time; acc[j] is the weight of key j (V = identity).
void fold(OnlineSoftmax& state, std::vector<float>& acc, const std::vector<float>& scores, std::size_t begin,
          std::size_t end, std::size_t block_k) {
  for (std::size_t k0 = begin; k0 < end; k0 += block_k) {
    const std::size_t count = std::min(block_k, end - k0);
    std::vector<float> block(scores.begin() + std::ptrdiff_t(k0), scores.begin() + std::ptrdiff_t(k0 + count));
    const float alpha = state.absorb(block.data(), std::int64_t(count));
    for (float& value : acc) value *= alpha;  // rescale what is accumulated to the new row_max
    for (std::size_t j = 0; j < count; ++j) acc[k0 + j] += block[j];
  }
}

std::vector<float> online_softmax(const std::vector<float>& scores, std::size_t block_k) {
  OnlineSoftmax state;
  std::vector<float> acc(scores.size(), 0.0f);
  fold(state, acc, scores, 0, scores.size(), block_k);
  for (float& value : acc) value *= state.inverse_sum();
  return acc;
}

void expect_matches(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t j = 0; j < got.size(); ++j) {
    ASSERT_TRUE(std::isfinite(got[j])) << "key " << j;
    EXPECT_NEAR(got[j], want[j], 1e-6 + 2e-6 * want[j]) << "key " << j;
  }
}

std::vector<float> random_row(std::size_t count, float spread, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> row(count);
  for (float& value : row) value = normal(engine);
  return row;
}

TEST(OnlineSoftmax, BlocksEqualFullSoftmax) {
  for (std::size_t count : {1u, 2u, 7u, 100u, 1000u}) {
    for (float spread : {1.0f, 8.0f, 60.0f}) {  // 60: exp would overflow without the max subtraction
      const std::vector<float> scores = random_row(count, spread, std::uint32_t(count) * 31u + std::uint32_t(spread));
      const std::vector<double> want = full_softmax(scores);
      for (std::size_t block_k : {std::size_t(1), std::size_t(3), std::size_t(16), std::size_t(64), count}) {
        SCOPED_TRACE(testing::Message() << "count " << count << " spread " << spread << " block_k " << block_k);
        expect_matches(online_softmax(scores, block_k), want);
      }
    }
  }
}

TEST(OnlineSoftmax, IncreasingScoresRescaleEveryBlock) {
  // Each block raises row_max, so a missing rescale of the accumulator or of row_sum would show.
  std::vector<float> scores(256);
  for (std::size_t j = 0; j < scores.size(); ++j) scores[j] = 0.05f * float(j);
  expect_matches(online_softmax(scores, 16), full_softmax(scores));
}

TEST(OnlineSoftmax, MinusInfinityEntriesGetZeroWeight) {
  std::vector<float> scores = random_row(50, 2.0f, 7);
  for (std::size_t j : {0u, 1u, 2u, 3u, 17u, 18u, 49u}) scores[j] = -kInf;  // masked keys
  for (std::size_t block_k : {1u, 4u, 16u, 50u}) {
    SCOPED_TRACE(testing::Message() << "block_k " << block_k);
    const std::vector<float> got = online_softmax(scores, block_k);
    expect_matches(got, full_softmax(scores));
    EXPECT_EQ(got[17], 0.0f);
  }
}

TEST(OnlineSoftmax, LeadingMaskedBlocksThenKeys) {
  // The first blocks see no key (row_max stays -inf); exp(-inf - -inf) must not poison the state.
  std::vector<float> scores(40, -kInf);
  scores[33] = 1.5f;
  scores[39] = -0.5f;
  const std::vector<float> got = online_softmax(scores, 8);
  expect_matches(got, full_softmax(scores));
}

TEST(OnlineSoftmax, RowThatSeesNoKeyGivesZeros) {
  const std::vector<float> scores(37, -kInf);
  for (std::size_t block_k : {1u, 8u, 37u}) {
    OnlineSoftmax state;
    std::vector<float> acc(scores.size(), 0.0f);
    fold(state, acc, scores, 0, scores.size(), block_k);
    EXPECT_EQ(state.row_max, -kInf);
    EXPECT_EQ(state.row_sum, 0.0f);
    EXPECT_EQ(state.inverse_sum(), 0.0f);
    for (float value : acc) EXPECT_EQ(value * state.inverse_sum(), 0.0f);  // zeros, not NaN
  }
  OnlineSoftmax untouched;  // no key at all (e.g. an empty key range)
  EXPECT_EQ(untouched.inverse_sum(), 0.0f);
  float nothing = 0.0f;
  EXPECT_EQ(untouched.absorb(&nothing, 0), 1.0f);
}

// Split-K: partial states over disjoint key ranges, merged, equal the full softmax.
std::vector<float> merged_softmax(const std::vector<float>& scores, const std::vector<std::size_t>& bounds,
                                  std::size_t block_k) {
  OnlineSoftmax total;
  std::vector<float> total_acc(scores.size(), 0.0f);
  for (std::size_t part = 0; part + 1 < bounds.size(); ++part) {
    OnlineSoftmax state;
    std::vector<float> acc(scores.size(), 0.0f);
    fold(state, acc, scores, bounds[part], bounds[part + 1], block_k);
    const OnlineSoftmax::MergeFactors factors = total.merge(state);
    for (std::size_t j = 0; j < acc.size(); ++j) total_acc[j] = factors.self * total_acc[j] + factors.other * acc[j];
  }
  for (float& value : total_acc) value *= total.inverse_sum();
  return total_acc;
}

TEST(OnlineSoftmax, MergeOfPartialStatesEqualsFullSoftmax) {
  const std::vector<float> scores = random_row(1000, 6.0f, 11);
  const std::vector<double> want = full_softmax(scores);
  expect_matches(merged_softmax(scores, {0, 500, 1000}, 64), want);
  expect_matches(merged_softmax(scores, {0, 1, 2, 333, 999, 1000}, 16), want);
  expect_matches(merged_softmax(scores, {0, 0, 1000, 1000}, 128), want);  // empty ranges merge as nothing
}

TEST(OnlineSoftmax, MergeWithMaskedPartials) {
  std::vector<float> scores = random_row(64, 3.0f, 5);
  std::fill(scores.begin(), scores.begin() + 32, -kInf);  // the first range sees no key
  const std::vector<double> want = full_softmax(scores);
  expect_matches(merged_softmax(scores, {0, 32, 64}, 8), want);
  expect_matches(merged_softmax(scores, {0, 16, 32, 64}, 8), want);

  const std::vector<float> none(20, -kInf);  // no range sees a key: zeros
  for (float value : merged_softmax(none, {0, 10, 20}, 4)) EXPECT_EQ(value, 0.0f);
}

TEST(OnlineSoftmax, MergeOrderDoesNotMatter) {
  const std::vector<float> scores = random_row(300, 4.0f, 3);
  OnlineSoftmax a, b;
  std::vector<float> acc_a(scores.size(), 0.0f), acc_b(scores.size(), 0.0f);
  fold(a, acc_a, scores, 0, 100, 32);
  fold(b, acc_b, scores, 100, 300, 32);
  OnlineSoftmax ab = a, ba = b;
  ab.merge(b);
  ba.merge(a);
  EXPECT_EQ(ab.row_max, ba.row_max);
  EXPECT_NEAR(ab.row_sum, ba.row_sum, 1e-5f * ab.row_sum);
}

}  // namespace
}  // namespace faprobe::cpu
