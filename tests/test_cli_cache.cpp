// The KV cache end to end: `run --save` of paged and variable-length cases writes what flash-attention's
// flash_attn_with_kvcache takes (src/harness/io/kv_cache_files.hpp), `verify --k-cache ...` checks it, and a
// corrupted output, a corrupted block table, NaN planted in any input or in the output, and wrong flag
// combinations are caught; scripts/check_npy.py agrees on the same files.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "harness/io/npy.hpp"
#include "npy_support.hpp"

namespace faprobe {
namespace {

using npy_test::python_with_numpy;

constexpr const char* kQuick = " --min-samples 1 --min-time 0 --max-time 5 --warmup 0";
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Lengths 40, 17, 33 over pages of 16: entry 0 has two full pages and 8 keys on its third, entry 1 one full
// page and 1 key, entry 2 two full pages and 1 key; three block-table columns, entry 1's last unused (-1).
constexpr const char* kPaged = "run --impl cpu.decode-splitk --mode decode --seqlens 40,17,33 --page-size 16 "
                               "--heads 4 --kv-heads 2 --head-dim 24 --dtype fp16 --save paged";
constexpr const char* kVarlen = "run --impl cpu.decode --mode decode --seqlens 40,17,33 --heads 4 --kv-heads 2 "
                                "--head-dim 24 --dtype bf16 --save varlen";
constexpr const char* kPagedEqual = "run --impl cpu.decode-splitk --mode decode --batch 2 --seq 70 --page-size 32 "
                                    "--heads 2 --head-dim 16 --mask causal --save paged_equal";

// The verify flags for a saved directory's cache files, with `changes` replacing a flag's file (or adding a
// flag); an empty file drops the flag.
std::string cache_files(const std::string& dir, bool paged,
                        const std::vector<std::pair<std::string, std::string>>& changes = {}) {
  std::vector<std::pair<std::string, std::string>> flags{
      {"--q", dir + "/q.npy"}, {"--k-cache", dir + "/k_cache.npy"}, {"--v-cache", dir + "/v_cache.npy"}};
  if (paged) flags.emplace_back("--block-table", dir + "/block_table.npy");
  flags.emplace_back("--cache-seqlens", dir + "/cache_seqlens.npy");
  flags.emplace_back("--o", dir + "/o.npy");
  for (const auto& change : changes) {
    const auto at =
        std::find_if(flags.begin(), flags.end(), [&](const auto& given) { return given.first == change.first; });
    if (at == flags.end()) {
      flags.push_back(change);
    } else {
      at->second = change.second;
    }
  }
  std::string args;
  for (const auto& [flag, file] : flags) {
    if (!file.empty()) args += (args.empty() ? "" : " ") + flag + " " + file;
  }
  return args;
}

std::size_t lines(const std::string& text) { return std::size_t(std::count(text.begin(), text.end(), '\n')); }

class CliCache : public Cli {
 protected:
  void save(const char* command) {
    const Result run = faprobe(std::string(command) + kQuick);
    ASSERT_EQ(run.status, 0) << command << "\n" << run.out << run.err;
  }
  std::string file(const std::string& dir, const std::string& name) const { return (path(dir) / name).string(); }
  // Sets element `index` of a saved float array.
  void plant(const std::string& dir, const std::string& name, std::int64_t index, float value) const {
    HostTensor tensor = read_npy(file(dir, name), name);
    tensor.set(index, value);
    write_npy(file(dir, name), tensor);
  }
  Int32Array table(const std::string& dir) const {
    return read_npy_int32(file(dir, "block_table.npy"), "", 2, "(batch, max_blocks_per_seq)");
  }
  Result check_npy(const std::string& python, const std::string& dirs) const {
    Result result;
    const std::string command = "cd '" + directory_.string() + "' && '" + python + "' '" FAPROBE_SOURCE_DIR
                                "/scripts/check_npy.py' " + dirs + " >check.txt 2>&1";
    const int raw = std::system(command.c_str());
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = read_file(path("check.txt"));
    return result;
  }
};

TEST_F(CliCache, SavedPagedCaseIsAPoolWithABlockTableAndVerifies) {
  save(kPaged);
  EXPECT_FALSE(fs::exists(path("paged") / "k.npy"));
  const HostTensor k_cache = read_npy(file("paged", "k_cache.npy"), "k_cache");
  const Int32Array blocks = table("paged");
  const Int32Array lengths = read_npy_int32(file("paged", "cache_seqlens.npy"), "", 1, "(batch,)");
  // (num_blocks, page_size, kv_heads, head_dim): 3 + 2 + 3 pages of 16.
  EXPECT_EQ(k_cache.batch(), 8);
  EXPECT_EQ(k_cache.seq(), 16);
  EXPECT_EQ(k_cache.heads(), 2);
  EXPECT_EQ(k_cache.head_dim(), 24);
  EXPECT_EQ(k_cache.dtype(), DType::fp16);
  EXPECT_EQ(blocks.shape, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(lengths.values, (std::vector<std::int32_t>{40, 17, 33}));
  EXPECT_EQ(blocks.values[1 * 3 + 2], -1) << "entry 1 has two pages; its third column is unused";
  // The rows past each entry's length on its last page are NaN, the ones before it finite.
  for (std::int64_t b = 0; b < 3; ++b) {
    const std::int64_t length = lengths.values[std::size_t(b)], last = (length - 1) / 16;
    const std::int64_t block = blocks.values[std::size_t(b * 3 + last)];
    for (std::int64_t row = 0; row < 16; ++row) {
      const float value = k_cache.get(k_cache.offset(block, row, 1) + 7);
      EXPECT_EQ(std::isnan(value), last * 16 + row >= length) << "entry " << b << " row " << row;
    }
  }

  const Result good = faprobe("verify " + cache_files("paged", true));
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("page16"), std::string::npos) << good.out;
  EXPECT_NE(good.err.find("mode decode from"), std::string::npos) << good.err;

  // Only the first ceil(length / page_size) entries of a row are read: garbage past them changes nothing.
  Int32Array changed = blocks;
  changed.values[1 * 3 + 2] = 12345;
  write_npy_int32(file("paged", "block_table.npy"), changed);
  EXPECT_EQ(faprobe("verify " + cache_files("paged", true)).status, 0);

  save(kPagedEqual);  // equal lengths, causal: cache_seqlens all 70, no seqlens in the case
  const Result equal = faprobe("verify " + cache_files("paged_equal", true));
  EXPECT_EQ(equal.status, 0) << equal.out << equal.err;
}

TEST_F(CliCache, AnEmulatedGpuKernelSavesItsPagedCacheThatVerifies) {
  // The cuda.* / emu.* implementations hand their host inputs over by another path than the CPU ones.
  save("run --impl emu.decode-splitk --mode decode --seqlens 70,17 --page-size 16 --heads 4 --kv-heads 2 "
       "--head-dim 64 --dtype bf16 --save emu");
  EXPECT_EQ(table("emu").shape, (std::vector<std::int64_t>{2, 5}));
  const Result good = faprobe("verify " + cache_files("emu", true));
  EXPECT_EQ(good.status, 0) << good.out << good.err;
}

TEST_F(CliCache, SavedVariableLengthCaseIsAPaddedCacheAndVerifies) {
  save(kVarlen);
  EXPECT_FALSE(fs::exists(path("varlen") / "block_table.npy"));
  EXPECT_FALSE(fs::exists(path("varlen") / "k.npy"));
  const HostTensor v_cache = read_npy(file("varlen", "v_cache.npy"), "v_cache");
  EXPECT_EQ(v_cache.batch(), 3);  // (batch, max_seq_k, kv_heads, head_dim)
  EXPECT_EQ(v_cache.seq(), 40);
  EXPECT_EQ(v_cache.heads(), 2);
  EXPECT_EQ(v_cache.dtype(), DType::fp32) << "bf16 is saved as float32";
  for (std::int64_t key = 0; key < 40; ++key) {
    EXPECT_EQ(std::isnan(v_cache.get(v_cache.offset(1, key, 0))), key >= 17) << key;
    EXPECT_FALSE(std::isnan(v_cache.get(v_cache.offset(0, key, 1) + 23))) << key;
  }
  const Result good = faprobe("verify " + cache_files("varlen", false));
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("k[40,17,33]"), std::string::npos) << good.out;

  // A --save into a directory that held another layout leaves no stale K/V files behind.
  save("run --impl cpu.tiled --seq 20 --heads 2 --head-dim 16 --save varlen");
  EXPECT_TRUE(fs::exists(path("varlen") / "k.npy"));
  EXPECT_FALSE(fs::exists(path("varlen") / "k_cache.npy"));
  EXPECT_FALSE(fs::exists(path("varlen") / "cache_seqlens.npy"));
}

TEST_F(CliCache, ACorruptedOutputFails) {
  save(kPaged);
  save(kVarlen);
  for (const auto& [dir, paged] : {std::pair{"paged", true}, {"varlen", false}}) {
    HostTensor o = read_npy(file(dir, "o.npy"), "o");
    const std::int64_t at = o.offset(2, 0, 3) + 5;
    o.set(at, o.get(at) + 0.05f);
    write_npy(file(dir, "o.npy"), o);
    const Result bad = faprobe(std::string("verify ") + cache_files(dir, paged));
    EXPECT_EQ(bad.status, 1) << dir << "\n" << bad.out << bad.err;
    EXPECT_NE(bad.out.find("batch 2 head 3 row 0"), std::string::npos) << bad.out;
  }
}

TEST_F(CliCache, ACorruptedBlockTableFailsOrIsRefused) {
  save(kPaged);
  const Int32Array blocks = table("paged");
  auto verify_with = [&](Int32Array changed) {
    write_npy_int32(file("paged", "block_table.npy"), changed);
    return faprobe("verify " + cache_files("paged", true));
  };
  // Entries 0 and 1 trade their first pages: both read real keys, the wrong ones. (Swapping two full pages
  // of one entry would not show without a mask: attention does not depend on the order of its keys.)
  Int32Array swapped = blocks;
  std::swap(swapped.values[0 * 3 + 0], swapped.values[1 * 3 + 0]);
  const Result across = verify_with(swapped);
  EXPECT_EQ(across.status, 1) << across.out << across.err;
  EXPECT_NE(across.out.find("mismatch"), std::string::npos) << across.out;

  // Entry 0's full first page traded with its partial last one: keys 8..15 now land on NaN padding.
  swapped = blocks;
  std::swap(swapped.values[0], swapped.values[2]);
  const Result padding = verify_with(swapped);
  EXPECT_EQ(padding.status, 1) << padding.out << padding.err;
  EXPECT_NE(padding.out.find("--k-cache paged/k_cache.npy: NaN at [" + std::to_string(blocks.values[2]) +
                             ", 8, 0, 0] (block, row, head, dim), key 8 of batch entry 0"),
            std::string::npos)
      << padding.out;

  // An entry a length reaches that is not a block of the pool: refused before any check.
  for (const std::int32_t outside : {-1, 8, 1 << 30}) {
    swapped = blocks;
    swapped.values[1 * 3 + 1] = outside;
    const Result refused = verify_with(swapped);
    EXPECT_EQ(refused.status, 2) << outside << "\n" << refused.err;
    EXPECT_NE(refused.err.find("--block-table: entry [1, 1] is " + std::to_string(outside) +
                               ", outside the pool's 8 blocks"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(lines(refused.err), 1u) << refused.err;
  }
}

TEST_F(CliCache, NanOrInfInAnyInputOrTheOutputFailsNamingTheTensor) {
  save(kPaged);
  const Int32Array blocks = table("paged");
  const std::string block = std::to_string(blocks.values[1]);  // entry 0's second page: keys 16..31

  struct Plant {
    std::string name;
    std::vector<std::int64_t> index;  // into the file's 4-D array
    float value;
    std::string note;
  };
  const Plant plants[] = {
      {"q.npy", {1, 0, 2, 5}, kNaN, "--q paged/q.npy: NaN at [1, 0, 2, 5] (batch, seq, head, dim)"},
      {"q.npy", {0, 0, 0, 0}, -std::numeric_limits<float>::infinity(),
       "--q paged/q.npy: -Inf at [0, 0, 0, 0] (batch, seq, head, dim)"},
      {"k_cache.npy", {blocks.values[1], 3, 1, 5}, kNaN,
       "--k-cache paged/k_cache.npy: NaN at [" + block + ", 3, 1, 5] (block, row, head, dim), key 19 of batch entry 0"},
      {"v_cache.npy", {blocks.values[1], 0, 0, 23}, std::numeric_limits<float>::infinity(),
       "--v-cache paged/v_cache.npy: Inf at [" + block + ", 0, 0, 23] (block, row, head, dim), key 16 of batch "
       "entry 0"},
      {"o.npy", {2, 0, 3, 1}, kNaN, "--o paged/o.npy: NaN at [2, 0, 3, 1] (batch, seq, head, dim)"},
  };
  for (const Plant& plant : plants) {
    SCOPED_TRACE(plant.note);
    const std::string saved = file("paged", plant.name), kept = saved + ".kept";
    fs::copy_file(saved, kept, fs::copy_options::overwrite_existing);
    HostTensor tensor = read_npy(saved, plant.name);
    tensor.set(tensor.offset(plant.index[0], plant.index[1], plant.index[2]) + plant.index[3], plant.value);
    write_npy(saved, tensor);
    const Result bad = faprobe("verify " + cache_files("paged", true));
    EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
    EXPECT_NE(bad.out.find("mismatch"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find(plant.note), std::string::npos) << bad.out;
    fs::rename(kept, saved);
  }
  // The NaN padding is no input: a finite value written there changes nothing either.
  const std::int64_t last = blocks.values[2];  // entry 0's third page: keys 32..39, rows 8..15 padding
  plant("paged", "k_cache.npy", read_npy(file("paged", "k_cache.npy"), "").offset(last, 12, 0), 1.0f);
  EXPECT_EQ(faprobe("verify " + cache_files("paged", true)).status, 0);

  // A padded cache names (batch, seq, head, dim); and --k/--v tensors the same way.
  save(kVarlen);
  plant("varlen", "v_cache.npy", read_npy(file("varlen", "v_cache.npy"), "").offset(2, 32, 1) + 4, kNaN);
  const Result varlen = faprobe("verify " + cache_files("varlen", false));
  EXPECT_EQ(varlen.status, 1) << varlen.out << varlen.err;
  EXPECT_NE(varlen.out.find("--v-cache varlen/v_cache.npy: NaN at [2, 32, 1, 4] (batch, seq, head, dim)"),
            std::string::npos)
      << varlen.out;

  save("run --impl cpu.tiled --seq 33 --seq-q 17 --heads 4 --kv-heads 2 --head-dim 24 --mask causal --save plain");
  const std::string plain = "--q plain/q.npy --k plain/k.npy --v plain/v.npy --o plain/o.npy";
  plant("plain", "v.npy", read_npy(file("plain", "v.npy"), "").offset(0, 17, 1) + 5, kNaN);
  const Result v = faprobe("verify " + plain);
  EXPECT_EQ(v.status, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("--v plain/v.npy: NaN at [0, 17, 1, 5] (batch, seq, head, dim)"), std::string::npos) << v.out;
  save("run --impl cpu.tiled --seq 33 --seq-q 17 --heads 4 --kv-heads 2 --head-dim 24 --mask causal --save plain");
  plant("plain", "k.npy", read_npy(file("plain", "k.npy"), "").offset(0, 32, 0), kNaN);
  const Result k = faprobe("verify " + plain);
  EXPECT_EQ(k.status, 1) << k.out << k.err;
  EXPECT_NE(k.out.find("--k plain/k.npy: NaN at [0, 32, 0, 0]"), std::string::npos) << k.out;
}

TEST_F(CliCache, BadFlagCombinationsAndShapesAreOneLineAndExitTwo) {
  save(kPaged);
  save(kVarlen);
  // Index arrays with another length or a wrong type, hand-written next to the saved ones.
  write_npy_int32(file("paged", "long.npy"), Int32Array{{3}, {40, 17, 49}});  // 49 > 3 pages of 16
  write_npy_int32(file("varlen", "long.npy"), Int32Array{{3}, {40, 41, 33}});  // 41 > max_seq_k 40
  write_npy_int32(file("varlen", "zero.npy"), Int32Array{{3}, {40, 0, 33}});
  write_npy_int32(file("varlen", "two.npy"), Int32Array{{2}, {40, 17}});
  auto paged = [](std::vector<std::pair<std::string, std::string>> changes) {
    return "verify " + cache_files("paged", true, changes);
  };
  auto varlen = [](std::vector<std::pair<std::string, std::string>> changes) {
    return "verify " + cache_files("varlen", false, changes);
  };
  const std::pair<std::string, std::string> cases[] = {
      {"verify --q paged/q.npy --k paged/q.npy --v-cache paged/v_cache.npy --o paged/o.npy",
       "--k cannot be combined with --v-cache"},
      {"verify --q paged/q.npy --k paged/q.npy --v paged/q.npy --cache-seqlens paged/cache_seqlens.npy "
       "--o paged/o.npy",
       "--k cannot be combined with --cache-seqlens"},
      {paged({{"--cache-seqlens", ""}}), "--cache-seqlens is missing"},
      {paged({{"--v-cache", ""}}), "--v-cache is missing"},
      {paged({{"--seq", "40"}}), "--seq cannot be combined with --q/--k-cache/--v-cache/--o"},
      // --block-table iff a pool: the shapes say which (and case.json, below).
      {paged({{"--block-table", ""}}), "--k-cache (8, 16, 2, 24) holds 8 entries, --q (3, 1, 4, 24) has batch 3"},
      {varlen({{"--block-table", "paged/block_table.npy"}}), "--k-cache (3, 40, 2, 24) with --block-table is a pool"},
      {paged({{"--cache-seqlens", "paged/long.npy"}}),
       "--cache-seqlens: entry 2 has length 49, more than the cache holds: 3 blocks of 16 keys per entry"},
      {varlen({{"--cache-seqlens", "varlen/long.npy"}}),
       "entry 1 has length 41, more than the cache holds: max_seq_k 40"},
      {varlen({{"--cache-seqlens", "varlen/zero.npy"}}), "entry 1 has length 0; every length must be at least 1"},
      {varlen({{"--cache-seqlens", "varlen/two.npy"}}),
       "--cache-seqlens (2,) has 2 lengths, --q (3, 1, 4, 24) has batch 3"},
      {varlen({{"--cache-seqlens", "varlen/q.npy"}}),
       "--cache-seqlens varlen/q.npy: dtype '<f4' is not supported (allowed: int32 '<i4'"},
      {paged({{"--block-table", "paged/cache_seqlens.npy"}}),
       "--block-table paged/cache_seqlens.npy: expected a 2-D array (batch, max_blocks_per_seq), got shape (3,)"},
      {paged({{"--v-cache", "varlen/v_cache.npy"}}),
       "--k-cache (8, 16, 2, 24) and --v-cache (3, 40, 2, 24) must have the same shape"},
      {varlen({{"--q", "varlen/k_cache.npy"}}), "--o (3, 1, 4, 24) must have the shape of --q (3, 40, 2, 24)"},
      {paged({{"--k-cache", "paged/block_table.npy"}}),
       "--k-cache paged/block_table.npy: dtype '<i4' is not supported (allowed: float32 '<f4', float16 '<f2', float64 '<f8')"},
  };
  for (const auto& [args, fragment] : cases) {
    const Result run = faprobe(args);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(fragment), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(lines(run.err), 1u) << args << "\n" << run.err;
  }

  // Files moved away from their case.json: the saved page_size and the flags disagree.
  fs::create_directories(path("mixed"));
  fs::copy_file(path("varlen") / "case.json", path("mixed") / "case.json");
  fs::copy_file(path("paged") / "o.npy", path("mixed") / "o.npy");
  const Result mixed = faprobe(paged({{"--o", "mixed/o.npy"}}));
  EXPECT_EQ(mixed.status, 2) << mixed.err;
  EXPECT_NE(mixed.err.find("--block-table: mixed/case.json says the case is not paged"), std::string::npos)
      << mixed.err;
  EXPECT_EQ(lines(mixed.err), 1u) << mixed.err;
}

TEST_F(CliCache, CheckNpyAgreesOnSavedPagedAndVariableLengthFiles) {
  const std::string python = python_with_numpy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  save(kPaged);
  save(kVarlen);
  save(kPagedEqual);
  save("run --impl cpu.decode-splitk --mode decode --seqlens 5,300 --page-size 64 --heads 2 --head-dim 16 "
       "--save paged_long");
  save("run --impl cpu.tiled --seq 33 --seq-q 17 --heads 4 --kv-heads 2 --head-dim 24 --mask causal "
       "--dtype fp16 --save plain");
  const Result good = check_npy(python, "paged varlen paged_equal paged_long plain");
  EXPECT_EQ(good.status, 0) << good.out;
  EXPECT_EQ(std::count(good.out.begin(), good.out.end(), '\n'), 5) << good.out;
  EXPECT_NE(good.out.find("k[40,17,33] d24 fp16 page16"), std::string::npos) << good.out;

  // The script fails what verify fails: a wrong output, a block table swapped across entries, a NaN input.
  HostTensor o = read_npy(file("varlen", "o.npy"), "o");
  o.set(o.offset(1, 0, 2), o.get(o.offset(1, 0, 2)) + 0.05f);
  write_npy(file("varlen", "o.npy"), o);
  Int32Array swapped = table("paged");
  std::swap(swapped.values[0], swapped.values[3]);
  write_npy_int32(file("paged", "block_table.npy"), swapped);
  plant("paged_equal", "q.npy", 3, kNaN);
  for (const char* dir : {"varlen", "paged", "paged_equal"}) {
    const Result bad = check_npy(python, dir);
    EXPECT_EQ(bad.status, 1) << dir << "\n" << bad.out;
    EXPECT_NE(bad.out.find("FAIL"), std::string::npos) << bad.out;
  }
  EXPECT_NE(check_npy(python, "paged_equal").out.find("non-finite input"), std::string::npos);
  // A block table that leaves the pool is malformed input, as in verify.
  swapped = table("paged");
  swapped.values[1 * 3 + 1] = 99;
  write_npy_int32(file("paged", "block_table.npy"), swapped);
  const Result malformed = check_npy(python, "paged");
  EXPECT_EQ(malformed.status, 2) << malformed.out;
  EXPECT_NE(malformed.out.find("leaves the pool"), std::string::npos) << malformed.out;
}

}  // namespace
}  // namespace faprobe
