#include "reference/explain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "model/eigen.hpp"
#include "reference/check_plan.hpp"

namespace faprobe {
namespace {

constexpr std::size_t kRows = 12;   // rows per head the hypotheses are tried on
constexpr std::size_t kHeads = 4;   // heads the hypotheses are tried on
constexpr double kLog2e = 1.4426950408889634;
constexpr std::size_t kPatternRows = 16384;  // rows at most the error pattern is found from
constexpr std::int64_t kBlockSizes[] = {128, 64, 32, 16};  // query block sizes kernels use, largest first

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
  bool transposed = false;   // Q, K, V and O all hold heads on axis 1 and seq on axis 2
};

struct KeyValues {
  Eigen::MatrixXd k, v;  // keys × head_dim, in logical order
};

class Explainer {
 public:
  Explainer(const Case& c, const InputSource& inputs, const HostTensor& output)
      : c_(c), inputs_(inputs), output_(output) {}

  // Loads K and V of (b, kv_head) ahead of rows computed in parallel (which then only read the cache).
  void load(std::int64_t b, std::int64_t kv_head) { key_values(b, kv_head); }

  // The row of attention for query row `row` of head `h` in batch entry `b` under `hyp`.
  // `query` is that row of Q (query()).
  Eigen::VectorXd row(const Hypothesis& hyp, std::int64_t b, std::int64_t h, std::int64_t row,
                      const Eigen::VectorXd& query) {
    const std::int64_t kv_head = hyp.modulo_gqa ? h % c_.kv_heads : c_.kv_head_of(h);
    const KeyValues& kv = key_values(b, kv_head);
    const Eigen::MatrixXd& keys = hyp.swap_kv ? kv.v : kv.k;
    const Eigen::MatrixXd& values = hyp.swap_kv ? kv.k : kv.v;
    const std::int64_t visible = visible_keys(hyp.mask.value_or(c_.mask), row, c_.seq_q, c_.seq_k_of(b), hyp.shift);
    return attend(query, keys, values, visible, hyp.scale > 0 ? hyp.scale : c_.scale(), hyp.normalize);
  }

  // Row `row` of head `h` of Q in batch entry `b` (the same place in the tensor under `transposed`).
  Eigen::VectorXd query(std::int64_t b, std::int64_t h, std::int64_t row) const {
    Eigen::VectorXd out(c_.head_dim);
    inputs_.row(TensorId::q, b, row, h, out.data());
    return out;
  }

  // The output's row at (b, h, row), as stored.
  Eigen::VectorXd stored(std::int64_t b, std::int64_t h, std::int64_t row) const {
    Eigen::VectorXd out(c_.head_dim);
    const std::int64_t base = output_.offset(b, row, h);
    for (std::int64_t d = 0; d < c_.head_dim; ++d) out(d) = output_.get(base + d);
    return out;
  }

  // Under `transposed` (every tensor (batch, heads, seq, head_dim), read as (batch, seq, heads, head_dim)):
  // the stored row at (b, h, row) is the true row of head `row` at position `h`. The true case has
  // c.seq_q heads over c.seq_k KV heads, c.heads query positions and c.kv_heads keys; key j of true KV
  // head g is the row read as (b, g, j).
  Eigen::VectorXd transposed_row(std::int64_t b, std::int64_t h, std::int64_t row, const Eigen::VectorXd& query) {
    const std::int64_t true_seq_q = c_.heads, true_seq_k = c_.kv_heads;
    const std::int64_t kv_head = row / (c_.seq_q / c_.seq_k);
    auto found = transposed_cache_.find({b, kv_head});
    if (found == transposed_cache_.end()) {
      found = transposed_cache_.emplace(std::pair{b, kv_head}, read_key_values(b, kv_head, true_seq_k, true)).first;
    }
    const std::int64_t visible = visible_keys(c_.mask, h, true_seq_q, true_seq_k, 0);
    return attend(query, found->second.k, found->second.v, visible, c_.scale(), 1);
  }

  // Under a (batch, heads, seq) output: which true row the stored row at (b, h, row) holds.
  std::tuple<std::int64_t, std::int64_t, std::int64_t> bhsd_source(std::int64_t b, std::int64_t h,
                                                                   std::int64_t row) const {
    const std::int64_t index = (b * c_.seq_q + row) * c_.heads + h;  // the row's place, in rows
    return {index / (c_.heads * c_.seq_q), (index / c_.seq_q) % c_.heads, index % c_.seq_q};
  }

 private:
  // Keys query row `row` of `seq_q` sees among `seq_k` under `mask` (Case::visible_keys' rule), with the
  // causal diagonal moved by `shift` keys.
  static std::int64_t visible_keys(Mask mask, std::int64_t row, std::int64_t seq_q, std::int64_t seq_k,
                                   std::int64_t shift) {
    if (mask == Mask::none) return seq_k;
    const std::int64_t diagonal = mask == Mask::causal_top_left ? 0 : seq_k - seq_q;
    return std::clamp<std::int64_t>(row + diagonal + 1 + shift, 0, seq_k);
  }

  // softmax(scale · keys[:visible] · query) · values[:visible], divided by the row sum `normalize` times.
  static Eigen::VectorXd attend(const Eigen::VectorXd& query, const Eigen::MatrixXd& keys,
                                const Eigen::MatrixXd& values, std::int64_t visible, double scale, int normalize) {
    Eigen::VectorXd out = Eigen::VectorXd::Zero(query.size());
    if (visible == 0) return out;
    Eigen::ArrayXd scores = (keys.topRows(visible) * query).array() * scale;
    const double top = scores.maxCoeff();
    scores = (scores - top).exp();
    out = values.topRows(visible).transpose() * scores.matrix();
    for (int i = 0; i < normalize; ++i) out /= scores.sum();
    return out;
  }

  // The first `length` keys and values of KV head `kv_head` in batch entry b; `transposed`: key j is the
  // row read as (b, kv_head, j).
  KeyValues read_key_values(std::int64_t b, std::int64_t kv_head, std::int64_t length, bool transposed) const {
    KeyValues kv{Eigen::MatrixXd(length, c_.head_dim), Eigen::MatrixXd(length, c_.head_dim)};
    Eigen::VectorXd buffer(c_.head_dim);
    for (std::int64_t j = 0; j < length; ++j) {
      const std::int64_t s = transposed ? kv_head : j, h = transposed ? j : kv_head;
      inputs_.row(TensorId::k, b, s, h, buffer.data());
      kv.k.row(j) = buffer.transpose();
      inputs_.row(TensorId::v, b, s, h, buffer.data());
      kv.v.row(j) = buffer.transpose();
    }
    return kv;
  }

  const KeyValues& key_values(std::int64_t b, std::int64_t kv_head) {
    auto found = cache_.find({b, kv_head});
    if (found != cache_.end()) return found->second;
    return cache_.emplace(std::pair{b, kv_head}, read_key_values(b, kv_head, c_.seq_k_of(b), false)).first->second;
  }

  const Case& c_;
  const InputSource& inputs_;
  const HostTensor& output_;
  std::map<std::pair<std::int64_t, std::int64_t>, KeyValues> cache_;
  std::map<std::pair<std::int64_t, std::int64_t>, KeyValues> transposed_cache_;  // by (b, true KV head)
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
  // Every tensor (batch, heads, seq, head_dim), as PyTorch keeps them, read as (batch, seq, heads, head_dim):
  // possible when the shapes read that way are a case too (the true heads, c.seq_q, a multiple of the true
  // KV heads, c.seq_k) and the reading is not the identity.
  if (!c.varlen() && c.seq_k > 0 && c.seq_q % c.seq_k == 0 && (c.seq_q > 1 || c.heads > 1)) {
    Hypothesis transposed = named("matches Q, K, V and O in (batch, heads, seq, head_dim) read as (batch, seq, heads, "
                                  "head_dim): seq and heads exchanged (numpy: x.transpose(0, 2, 1, 3) before saving)");
    transposed.transposed = true;
    list.push_back(transposed);
  }
  return list;
}

// Keeps at most `most` of `items`, evenly spread, the first and the last among them.
template <typename T>
void thin_out(std::vector<T>& items, std::size_t most) {
  if (items.size() <= most) return;
  std::vector<T> kept;
  for (std::size_t i = 0; i < most; ++i) kept.push_back(items[most == 1 ? 0 : i * (items.size() - 1) / (most - 1)]);
  items = std::move(kept);
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
  std::vector<double> columns;  // |output − reference| per column, for a row beyond the tolerance
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
      // The last partial block starts at (seq_q / size) · size; the error starts there when every checked
      // row before it is right and every one from it on is wrong.
      std::string block;
      for (const std::int64_t size : kBlockSizes) {
        const std::int64_t start = (c.seq_q / size) * size;
        if (c.seq_q % size != 0 && start > 0 && last_good < start && first_bad >= start) {
          block = fmt::format(": the last, partial query block of {} (rows {}..{})", size, start, c.seq_q - 1);
          break;
        }
      }
      for (const std::int64_t size : kBlockSizes) {
        if (block.empty() && first_bad % size == 0) block = fmt::format(" (a multiple of {})", size);
      }
      lines.push_back(fmt::format("rows from {} on are wrong, the rows before are right{}", first_bad, block));
    } else if (bad.size() >= 2) {
      // Rows at block boundaries: every wrong row the first (or the last) of a block of `size` rows, and
      // rows inside blocks right; the largest such size.
      std::string boundary;
      for (const std::int64_t size : kBlockSizes) {
        for (const std::int64_t place : {std::int64_t{0}, size - 1}) {
          bool all_at = true, good_elsewhere = false;
          for (const RowError* r : bad) all_at = all_at && r->row % size == place;
          for (const RowError* r : good) good_elsewhere = good_elsewhere || r->row % size != place;
          if (all_at && good_elsewhere && boundary.empty()) {
            boundary = fmt::format("only rows at block boundaries are wrong: the {} row of each block of {} ({} "
                                   "wrong rows checked)",
                                   place == 0 ? "first" : "last", size, bad.size());
          }
        }
      }
      if (!boundary.empty()) lines.push_back(boundary);
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

  // The rows the check covers, against the true reference: where the error lives. At most kPatternRows
  // of them (heads spread over the plan's, then rows spread over each head's), so that a full check of
  // a very long case does not hold a row error for each of its rows; K and V are loaded first, then the
  // rows computed in parallel, as the check does.
  std::vector<std::pair<std::int64_t, std::int64_t>> heads = plan.heads;
  std::vector<std::int64_t> rows = plan.rows;
  thin_out(heads, std::max<std::size_t>(1, kPatternRows / rows.size()));
  thin_out(rows, kPatternRows);
  for (const auto& [b, h] : heads) explainer.load(b, c.kv_head_of(h));
  std::vector<RowError> errors(heads.size() * rows.size());
#pragma omp parallel for schedule(dynamic)
  for (std::size_t i = 0; i < errors.size(); ++i) {
    const auto [b, h] = heads[i / rows.size()];
    const std::int64_t row = rows[i % rows.size()];
    const Eigen::VectorXd expected = explainer.row(truth, b, h, row, explainer.query(b, h, row));
    const Eigen::VectorXd got = explainer.stored(b, h, row);
    RowError& error = errors[i];
    error = RowError{b, h, row, max_difference(got, expected), !got.allFinite(), {}};
    if (!(error.error <= tolerance)) {  // the columns of wrong rows, for the column pattern
      for (std::int64_t col = 0; col < c.head_dim; ++col) error.columns.push_back(std::abs(got(col) - expected(col)));
    }
  }
  std::vector<std::string> lines;

  // The hypotheses, on the worst rows of a few heads and rows spread over the rest.
  std::vector<const RowError*> sample;
  {
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const RowError*>> by_head;
    for (const RowError& error : errors) by_head[{error.b, error.h}].push_back(&error);
    for (auto& [head, head_rows] : by_head) {
      if (sample.size() >= kHeads * kRows) break;
      std::vector<const RowError*> worst = head_rows;
      std::stable_sort(worst.begin(), worst.end(), [](const RowError* a, const RowError* b) {
        return std::isnan(a->error) ? !std::isnan(b->error) : a->error > b->error;
      });
      std::set<const RowError*> chosen(worst.begin(), worst.begin() + std::min(worst.size(), kRows / 2));
      for (std::size_t i = 0; chosen.size() < std::min(head_rows.size(), kRows); ++i) {
        chosen.insert(head_rows[i * head_rows.size() / kRows % head_rows.size()]);
        if (i > 2 * kRows) break;
      }
      sample.insert(sample.end(), chosen.begin(), chosen.end());
    }
  }
  std::vector<Eigen::VectorXd> queries;  // each sampled row's, read once for every hypothesis
  for (const RowError* r : sample) queries.push_back(explainer.query(r->b, r->h, r->row));
  for (const Hypothesis& hyp : hypotheses(c)) {
    double worst = 0;
    for (std::size_t i = 0; i < sample.size(); ++i) {
      const RowError* r = sample[i];
      Eigen::VectorXd expected;
      if (hyp.transposed) {
        expected = explainer.transposed_row(r->b, r->h, r->row, queries[i]);
      } else if (hyp.bhsd_output) {
        const auto [b, h, row] = explainer.bhsd_source(r->b, r->h, r->row);
        expected = explainer.row(truth, b, h, row, explainer.query(b, h, row));
      } else {
        expected = explainer.row(hyp, r->b, r->h, r->row, queries[i]);
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
