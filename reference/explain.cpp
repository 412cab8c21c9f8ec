#include "reference/explain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "reference/check.hpp"

namespace faprobe {
namespace {

constexpr std::size_t kRows = 12;   // rows per head the hypotheses are tried on
constexpr std::size_t kHeads = 4;   // heads the hypotheses are tried on
constexpr double kLog2e = 1.4426950408889634;

// The attention the case asks for with one thing done the other way (explain.hpp).
struct Hypothesis {
  std::string text;
  std::optional<Mask> mask;  // the mask, when it is another
  std::int64_t shift = 0;    // the diagonal moved by this many keys (each row sees `shift` more)
  double scale = 0;          // the softmax scale, when it is another
  bool swap_kv = false;
  bool modulo_gqa = false;
  int normalize = 1;         // divisions by the row sum: 0, 1 or 2
  bool bhsd_output = false;
};

struct KeyValues {
  Eigen::MatrixXd k, v;  // keys × head_dim, in logical order
};

class Explainer {
 public:
  Explainer(const Case& c, const InputSource& inputs, const HostTensor& output)
      : c_(c), inputs_(inputs), output_(output) {}

  // The row of attention for query row `row` of head `h` in batch entry `b` under `hyp`.
  Eigen::VectorXd row(const Hypothesis& hyp, std::int64_t b, std::int64_t h, std::int64_t row) {
    const std::int64_t kv_head = hyp.modulo_gqa ? h % c_.kv_heads : c_.kv_head_of(h);
    const KeyValues& kv = key_values(b, kv_head);
    const Eigen::MatrixXd& keys = hyp.swap_kv ? kv.v : kv.k;
    const Eigen::MatrixXd& values = hyp.swap_kv ? kv.k : kv.v;
    const std::int64_t length = c_.seq_k_of(b);
    const Mask mask = hyp.mask.value_or(c_.mask);
    std::int64_t visible = length;
    if (mask != Mask::none) {
      const std::int64_t diagonal = mask == Mask::causal_top_left ? 0 : length - c_.seq_q;
      visible = std::clamp<std::int64_t>(row + diagonal + 1 + hyp.shift, 0, length);
    }
    Eigen::VectorXd out = Eigen::VectorXd::Zero(c_.head_dim);
    if (visible == 0) return out;
    Eigen::VectorXd query(c_.head_dim);
    inputs_.row(TensorId::q, b, row, h, query.data());
    const double scale = hyp.scale > 0 ? hyp.scale : c_.scale();
    Eigen::ArrayXd scores = (keys.topRows(visible) * query).array() * scale;
    const double top = scores.maxCoeff();
    scores = (scores - top).exp();
    out = values.topRows(visible).transpose() * scores.matrix();
    for (int i = 0; i < hyp.normalize; ++i) out /= scores.sum();
    return out;
  }

  // The output's row at (b, h, row), as stored.
  Eigen::VectorXd stored(std::int64_t b, std::int64_t h, std::int64_t row) const {
    Eigen::VectorXd out(c_.head_dim);
    const std::int64_t base = output_.offset(b, row, h);
    for (std::int64_t d = 0; d < c_.head_dim; ++d) out(d) = output_.get(base + d);
    return out;
  }

  // Under a (batch, heads, seq) output: which true row the stored row at (b, h, row) holds.
  std::tuple<std::int64_t, std::int64_t, std::int64_t> bhsd_source(std::int64_t b, std::int64_t h,
                                                                   std::int64_t row) const {
    const std::int64_t index = (b * c_.seq_q + row) * c_.heads + h;  // the row's place, in rows
    return {index / (c_.heads * c_.seq_q), (index / c_.seq_q) % c_.heads, index % c_.seq_q};
  }

 private:
  const KeyValues& key_values(std::int64_t b, std::int64_t kv_head) {
    auto found = cache_.find({b, kv_head});
    if (found != cache_.end()) return found->second;
    const std::int64_t length = c_.seq_k_of(b);
    KeyValues kv{Eigen::MatrixXd(length, c_.head_dim), Eigen::MatrixXd(length, c_.head_dim)};
    Eigen::VectorXd buffer(c_.head_dim);
    for (std::int64_t s = 0; s < length; ++s) {
      inputs_.row(TensorId::k, b, s, kv_head, buffer.data());
      kv.k.row(s) = buffer.transpose();
      inputs_.row(TensorId::v, b, s, kv_head, buffer.data());
      kv.v.row(s) = buffer.transpose();
    }
    return cache_.emplace(std::pair{b, kv_head}, std::move(kv)).first->second;
  }

  const Case& c_;
  const InputSource& inputs_;
  const HostTensor& output_;
  std::map<std::pair<std::int64_t, std::int64_t>, KeyValues> cache_;
};

Hypothesis named(std::string text) {
  Hypothesis hypothesis;
  hypothesis.text = std::move(text);
  return hypothesis;
}

std::vector<Hypothesis> hypotheses(const Case& c) {
  std::vector<Hypothesis> list;
  const bool square = c.seq_q == c.seq_k && !c.varlen();
  if (c.masked()) list.push_back({"matches no mask (--mask none): the causal mask was not applied", Mask::none});
  if (c.mask == Mask::none) {
    list.push_back({"matches causal (bottom-right, flash-attention's): a mask was applied", Mask::causal});
  }
  if (c.mask == Mask::causal && !square) {
    list.push_back({"matches causal-top-left (PyTorch's is_causal); faprobe's causal is bottom-right: give "
                    "--mask causal-top-left",
                    Mask::causal_top_left});
  }
  if (c.mask == Mask::causal_top_left && !square) {
    list.push_back({"matches causal bottom-right (flash-attention's, --mask causal), not top-left", Mask::causal});
  }
  if (c.mask == Mask::none && !square) {
    list.push_back({"matches causal-top-left (PyTorch's is_causal)", Mask::causal_top_left});
  }
  if (c.masked()) {
    list.push_back({"matches the causal diagonal one key later (each row sees one key too many)", std::nullopt, 1});
    list.push_back({"matches the causal diagonal one key earlier (each row misses its last key)", std::nullopt, -1});
  }
  const double scale = c.scale();
  list.push_back({"matches softmax scale 1 (the 1/sqrt(head_dim) was not applied)", std::nullopt, 0, 1.0});
  list.push_back({"matches softmax scale 1/head_dim (1/sqrt(head_dim) applied twice)", std::nullopt, 0,
                  1.0 / double(c.head_dim)});
  list.push_back({"matches log2(e) applied twice (exp2 of scores already in base 2)", std::nullopt, 0, scale * kLog2e});
  list.push_back({"matches log2(e) not applied (exp2 of natural-log scores)", std::nullopt, 0, scale / kLog2e});
  Hypothesis swapped = named("matches K and V swapped");
  swapped.swap_kv = true;
  list.push_back(swapped);
  if (c.kv_heads > 1 && c.group_size() > 1) {
    Hypothesis modulo = named("matches query head h reading KV head h % kv_heads (faprobe's GQA mapping: h / (heads / "
                      "kv_heads), as flash-attention's)");
    modulo.modulo_gqa = true;
    list.push_back(modulo);
  }
  Hypothesis unnormalized = named("matches the output left unnormalized (no division by the softmax row sum)");
  unnormalized.normalize = 0;
  list.push_back(unnormalized);
  Hypothesis twice = named("matches the output normalized twice (divided by the softmax row sum twice)");
  twice.normalize = 2;
  list.push_back(twice);
  if (c.heads > 1 && c.seq_q > 1) {
    Hypothesis layout = named("matches the output written (batch, heads, seq, head_dim) where (batch, seq, heads, "
                      "head_dim) is expected (a missing transpose)");
    layout.bhsd_output = true;
    list.push_back(layout);
  }
  return list;
}

// The largest |a − b|, NaN when either holds one.
double max_difference(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  double worst = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a(i) - b(i));
    if (!(diff <= worst)) worst = diff;  // keeps a NaN
  }
  return worst;
}

struct RowError {
  std::int64_t b = 0, h = 0, row = 0;
  double error = 0;            // max over the columns; NaN when the output holds a NaN
  bool non_finite = false;     // the stored row holds NaN or Inf
  std::vector<double> columns;  // |output − reference| per column
};

// Where the error lives, from the rows the check covers (explain.hpp).
std::vector<std::string> error_pattern(const Case& c, const std::vector<RowError>& rows, double tolerance) {
  std::vector<std::string> lines;
  std::vector<const RowError*> bad, good;
  std::int64_t non_finite = 0;
  for (const RowError& r : rows) {
    (r.error <= tolerance ? good : bad).push_back(&r);
    non_finite += r.non_finite;
  }
  if (bad.empty()) return lines;
  if (non_finite > 0) {
    lines.push_back(fmt::format("{} of {} rows checked hold NaN or Inf", non_finite, rows.size()));
  }
  if (good.empty()) {
    lines.push_back(fmt::format("every row checked is wrong ({} rows)", rows.size()));
  } else {
    std::int64_t first_bad = std::numeric_limits<std::int64_t>::max(), last_good = -1;
    for (const RowError* r : bad) first_bad = std::min(first_bad, r->row);
    for (const RowError* r : good) last_good = std::max(last_good, r->row);
    if (first_bad > last_good) {
      std::string block;
      for (const std::int64_t size : {128, 64}) {
        if (c.seq_q % size != 0 && first_bad > (c.seq_q / size) * size - size &&
            first_bad <= (c.seq_q / size) * size) {
          block = fmt::format(": the last, partial query block of {} (rows {}..{})", size, (c.seq_q / size) * size,
                              c.seq_q - 1);
          break;
        }
        if (first_bad % size == 0 && block.empty()) block = fmt::format(" (a multiple of {})", size);
      }
      lines.push_back(fmt::format("rows from {} on are wrong, the rows before are right{}", first_bad, block));
    }
    if (c.masked()) {
      bool bad_cut = true, good_full = false;
      for (const RowError* r : bad) bad_cut = bad_cut && c.visible_keys(r->b, r->row) < c.seq_k_of(r->b);
      for (const RowError* r : good) good_full = good_full || c.visible_keys(r->b, r->row) == c.seq_k_of(r->b);
      if (bad_cut && good_full) {
        lines.push_back("only rows the causal mask cuts are wrong (the rows that see every key are right): look at "
                        "the masked, diagonal blocks");
      }
    }
    std::set<std::int64_t> bad_batches, bad_heads, batches, heads;
    for (const RowError& r : rows) {
      batches.insert(r.b);
      heads.insert(r.h);
    }
    for (const RowError* r : bad) {
      bad_batches.insert(r->b);
      bad_heads.insert(r->h);
    }
    if (batches.size() > 1 && bad_batches.size() == 1) {
      lines.push_back(
          fmt::format("only batch entry {} is wrong (of {} checked)", *bad_batches.begin(), batches.size()));
    }
    if (heads.size() > 1 && bad_heads.size() == 1) {
      lines.push_back(fmt::format("only query head {} is wrong (of {} checked)", *bad_heads.begin(), heads.size()));
    }
  }
  if (non_finite == 0) {  // columns: the wrong ones all from some column on
    std::int64_t first_bad_col = c.head_dim, last_good_col = -1;
    for (std::int64_t col = 0; col < c.head_dim; ++col) {
      double worst = 0;
      for (const RowError* r : bad) worst = std::max(worst, r->columns[std::size_t(col)]);
      if (worst > tolerance) {
        first_bad_col = std::min(first_bad_col, col);
      } else {
        last_good_col = col;
      }
    }
    if (first_bad_col > last_good_col && last_good_col >= 0) {
      lines.push_back(fmt::format("only columns from {} on are wrong (of head_dim {})", first_bad_col, c.head_dim));
    }
  }
  return lines;
}

}  // namespace

std::vector<std::string> explain_mismatch(const Case& c, const InputSource& inputs, const HostTensor& output,
                                          double tolerance, const CheckLimits& limits) {
  if (!(tolerance > 0)) return {};
  const CheckPlan plan = plan_check(c, limits);
  Explainer explainer(c, inputs, output);
  const Hypothesis truth = named("the case as given");

  // Every row the check covers, against the true reference: where the error lives.
  std::vector<RowError> errors;
  for (const auto& [b, h] : plan.heads) {
    for (const std::int64_t row : plan.rows) {
      const Eigen::VectorXd expected = explainer.row(truth, b, h, row);
      const Eigen::VectorXd got = explainer.stored(b, h, row);
      RowError error{b, h, row, max_difference(got, expected), !got.allFinite(), {}};
      for (std::int64_t col = 0; col < c.head_dim; ++col) error.columns.push_back(std::abs(got(col) - expected(col)));
      errors.push_back(std::move(error));
    }
  }
  std::vector<std::string> lines;

  // The hypotheses, on the worst rows of a few heads and rows spread over the rest.
  std::vector<const RowError*> sample;
  {
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const RowError*>> by_head;
    for (const RowError& error : errors) by_head[{error.b, error.h}].push_back(&error);
    for (auto& [head, rows] : by_head) {
      if (sample.size() >= kHeads * kRows) break;
      std::vector<const RowError*> worst = rows;
      std::stable_sort(worst.begin(), worst.end(), [](const RowError* a, const RowError* b) {
        return std::isnan(a->error) ? !std::isnan(b->error) : a->error > b->error;
      });
      std::set<const RowError*> chosen(worst.begin(), worst.begin() + std::min(worst.size(), kRows / 2));
      for (std::size_t i = 0; chosen.size() < std::min(rows.size(), kRows); ++i) {
        chosen.insert(rows[i * rows.size() / kRows % rows.size()]);
        if (i > 2 * kRows) break;
      }
      sample.insert(sample.end(), chosen.begin(), chosen.end());
    }
  }
  for (const Hypothesis& hyp : hypotheses(c)) {
    double worst = 0;
    for (const RowError* r : sample) {
      Eigen::VectorXd expected;
      if (hyp.bhsd_output) {
        const auto [b, h, row] = explainer.bhsd_source(r->b, r->h, r->row);
        expected = explainer.row(truth, b, h, row);
      } else {
        expected = explainer.row(hyp, r->b, r->h, r->row);
      }
      const double diff = max_difference(explainer.stored(r->b, r->h, r->row), expected);
      if (!(diff <= worst)) worst = diff;
      if (!(worst <= tolerance)) break;
    }
    if (worst <= tolerance) lines.push_back(hyp.text);
  }
  for (std::string& line : error_pattern(c, errors, tolerance)) lines.push_back(std::move(line));
  return lines;
}

}  // namespace faprobe
