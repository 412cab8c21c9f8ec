// The KV cache files (src/harness/io/kv_cache_files.hpp) and the int32 .npy arrays they use (npy.hpp): int32
// round trips and the header against the specification, the int32 reader as strict as the float one
// (every malformed, truncated or hostile file a one-line UsageError naming the flag, never a crash), the
// float reader not loosened by it, NumPy interoperability, what save_kv_cache writes for paged and
// variable-length cases, and check_kv_cache's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "case_support.hpp"
#include "harness/io/kv_cache_files.hpp"
#include "harness/io/npy.hpp"
#include "model/errors.hpp"
#include "model/kv_layout.hpp"
#include "npy_support.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;
using namespace npy_test;

std::string i4_bytes(std::initializer_list<std::int32_t> values) {
  std::string out;
  for (std::int32_t value : values) out += le32(std::uint32_t(value));
  return out;
}

std::string dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

class KvCacheFilesTest : public test_support::TempDirTest {
 protected:

  // Reads `bytes` as a 1-D --cache-seqlens (or a 2-D --block-table) and returns the UsageError's message.
  std::string int32_error(const std::string& bytes, std::size_t dims = 1) {
    const std::string flag = dims == 1 ? "--cache-seqlens" : "--block-table";
    write_bytes(path("bad.npy"), bytes);
    try {
      read_npy_int32(path("bad.npy"), flag, dims, dims == 1 ? "(batch,)" : "(batch, max_blocks_per_seq)");
    } catch (const UsageError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
      EXPECT_EQ(message.rfind(flag + " " + path("bad.npy") + ": ", 0), 0u) << message;
      return message;
    }
    ADD_FAILURE() << "accepted";
    return "";
  }
};

// ---------------------------------------------------------------------------------------------------------
// int32 arrays

TEST_F(KvCacheFilesTest, Int32RoundTripAndHeaderFollowTheSpec) {
  const Int32Array table{{2, 3}, {7, -1, 2147483647, -2147483647 - 1, 0, 5}};
  write_npy_int32(path("t.npy"), table);
  const std::string bytes = read_bytes(path("t.npy"));
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len = std::size_t(std::uint8_t(bytes[8])) | std::size_t(std::uint8_t(bytes[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes.substr(10, header_len).rfind(dict("<i4", "(2, 3)"), 0), 0u) << bytes.substr(10, header_len);
  EXPECT_EQ(bytes.substr(10 + header_len), i4_bytes({7, -1, 2147483647, -2147483647 - 1, 0, 5}));
  const Int32Array back = read_npy_int32(path("t.npy"), "--block-table", 2, "(batch, max_blocks_per_seq)");
  EXPECT_EQ(back.shape, table.shape);
  EXPECT_EQ(back.values, table.values);

  write_npy_int32(path("l.npy"), Int32Array{{3}, {40, 17, 33}});
  EXPECT_NE(read_bytes(path("l.npy")).find(dict("<i4", "(3,)")), std::string::npos);
  EXPECT_EQ(read_npy_int32(path("l.npy"), "--cache-seqlens", 1, "(batch,)").values,
            (std::vector<std::int32_t>{40, 17, 33}));
}

TEST_F(KvCacheFilesTest, Int32ReaderRefusesWhatIsNotAnInt32ArrayOfItsShape) {
  const std::string data = i4_bytes({1, 2, 3});
  EXPECT_NE(int32_error(hand_built(dict("<i8", "(3,)"), std::string(24, '\0')))
                .find("dtype '<i8' is not supported (allowed: int32 '<i4'; save a.astype(numpy.int32))"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict(">i4", "(3,)"), data)).find("dtype '>i4' is not supported"), std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<f4", "(3,)"), data)).find("dtype '<f4' is not supported"), std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<u4", "(3,)"), data)).find("dtype '<u4'"), std::string::npos);
  EXPECT_NE(int32_error(hand_built("{'descr': [('x', '<i4')], 'fortran_order': False, 'shape': (3,), }", data))
                .find("structured dtypes are not supported"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(1, 3)"), data))
                .find("expected a 1-D array (batch,), got shape (1, 3)"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(3,)"), data), 2)
                .find("expected a 2-D array (batch, max_blocks_per_seq), got shape (3,)"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(1, 1, 3)"), data), 2).find("got shape (1, 1, 3)"), std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "()"), i4_bytes({1}))).find("got shape ()"), std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(0,)"), "")).find("zero dimension"), std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(3, 0)"), ""), 2).find("zero dimension"), std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(-3,)"), "")).find("negative dimension"), std::string::npos);
  EXPECT_NE(int32_error(hand_built("{'descr': '<i4', 'fortran_order': True, 'shape': (1, 3), }", data), 2)
                .find("fortran_order arrays are not supported"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(4,)"), data))
                .find("file is truncated (expected 16 bytes of data, found 12)"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(2,)"), data)).find("trailing data"), std::string::npos);
  // A huge shape over a tiny file is refused before anything is allocated, and a product past 2^63 at all.
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(4294967296, 4294967296)"), data), 2).find("is too large"),
            std::string::npos);
  EXPECT_NE(int32_error(hand_built(dict("<i4", "(1099511627776,)"), data))
                .find("file is truncated (expected 4398046511104 bytes of data, found 12)"),
            std::string::npos);
  std::string long_header = "\x93NUMPY\x02";
  long_header += '\0';
  long_header += le32(0xfffffff0u) + "{";
  EXPECT_NE(int32_error(long_header).find("header length 4294967280 is implausible"), std::string::npos);
  EXPECT_NE(int32_error("garbage").find("not a .npy file (bad magic)"), std::string::npos);
}

TEST_F(KvCacheFilesTest, EachReaderRefusesTheOthersFiles) {
  write_npy_int32(path("i.npy"), Int32Array{{1}, {1}});
  try {
    read_npy(path("i.npy"), "--k-cache");
    FAIL() << "the float reader took an int32 array";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()), "--k-cache " + path("i.npy") +
                                             ": dtype '<i4' is not supported (allowed: float32 '<f4', float16 '<f2', float64 '<f8')");
  }
  HostTensor t(DType::fp32, 1, 1, 1, 1);
  t.set(0, 1.0f);
  write_npy(path("f.npy"), t);
  EXPECT_THROW(read_npy_int32(path("f.npy"), "--cache-seqlens", 1, "(batch,)"), UsageError);
}

TEST_F(KvCacheFilesTest, EveryTruncationAndRandomCorruptionOfAnInt32FileIsHandled) {
  write_npy_int32(path("full.npy"), Int32Array{{2, 3}, {0, 1, 2, 3, 4, -1}});
  const std::string full = read_bytes(path("full.npy"));
  for (std::size_t length = 0; length < full.size(); ++length) {
    write_bytes(path("cut.npy"), full.substr(0, length));
    EXPECT_THROW(read_npy_int32(path("cut.npy"), "--block-table", 2, "(batch, max_blocks_per_seq)"), UsageError)
        << length;
  }
  std::mt19937 rng(13);
  const std::string alphabet = "{}()[]'\":, \n0123456789-LTrueFalsNn<>i48\x93\\";
  int accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = full;
    for (int e = 0, edits = 1 + int(rng() % 4); e < edits; ++e) {
      const std::size_t at = rng() % 4 != 0 ? rng() % 128 : rng() % bytes.size();
      bytes[at] = rng() % 2 != 0 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() & 0xff);
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    write_bytes(path("fuzz.npy"), bytes);
    try {
      read_npy_int32(path("fuzz.npy"), "--block-table", 2, "(batch, max_blocks_per_seq)");
      ++accepted;
    } catch (const UsageError&) {
    }
  }
  EXPECT_LT(accepted, 2000);  // and no crash, no other exception
}

TEST_F(KvCacheFilesTest, NumpyAndFaprobeReadEachOthersInt32Arrays) {
  const std::string python = python_with_numpy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  write_npy_int32(path("ours.npy"), Int32Array{{2, 2}, {3, -1, 0, 1}});
  write_bytes(path("io.py"), R"(
import os, sys, numpy
d = sys.argv[1]
a = numpy.load(os.path.join(d, 'ours.npy'))
assert a.dtype == numpy.int32 and a.shape == (2, 2) and a.tolist() == [[3, -1], [0, 1]], a
numpy.save(os.path.join(d, 'theirs.npy'), numpy.array([40, 17, 33], dtype=numpy.int32))
numpy.save(os.path.join(d, 'int64.npy'), numpy.array([40, 17, 33]))
)");
  ASSERT_EQ(std::system(("'" + python + "' '" + path("io.py") + "' '" + directory_.string() + "'").c_str()), 0);
  EXPECT_EQ(read_npy_int32(path("theirs.npy"), "--cache-seqlens", 1, "(batch,)").values,
            (std::vector<std::int32_t>{40, 17, 33}));
  try {
    read_npy_int32(path("int64.npy"), "--cache-seqlens", 1, "(batch,)");
    FAIL() << "int64 accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("dtype '<i8' is not supported (allowed: int32 '<i4'; save "
                                             "a.astype(numpy.int32))"),
              std::string::npos)
        << error.what();
  }
}

// ---------------------------------------------------------------------------------------------------------
// save_kv_cache

Case decode_case(std::vector<std::int64_t> seqlens, std::int64_t page_size) {
  return test_support::make_decode_case(std::move(seqlens), page_size, 4, 2, 8, DType::fp16, 5);
}

TEST_F(KvCacheFilesTest, APagedCaseIsSavedAsThePoolItsBlockTableAndItsLengths) {
  const Case c = decode_case({40, 17, 33}, 16);
  const AttentionInputs inputs = make_inputs(c);
  EXPECT_EQ(save_kv_cache(directory_.string(), c, inputs),
            (std::vector<std::string>{"k_cache.npy", "v_cache.npy", "block_table.npy", "cache_seqlens.npy"}));
  const HostTensor pool = read_npy(path("k_cache.npy"), "");
  const Int32Array table = read_npy_int32(path("block_table.npy"), "", 2, "");
  const Int32Array lengths = read_npy_int32(path("cache_seqlens.npy"), "", 1, "");
  EXPECT_EQ(pool.batch(), 8);
  EXPECT_EQ(pool.seq(), 16);
  EXPECT_EQ(table.shape, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(table.values, inputs.layout.block_table);
  EXPECT_EQ(lengths.values, (std::vector<std::int32_t>{40, 17, 33}));
  // Key j of entry b at [block_table[b][j / 16], j % 16], bit for bit the value of the packed layout.
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t key = 0; key < c.seq_k_of(b); ++key) {
      const std::int64_t block = table.values[std::size_t(b * 3 + key / 16)];
      const std::int64_t from = inputs.k.offset(0, inputs.layout.storage_row(b, key), 1);
      ASSERT_EQ(pool.get(pool.offset(block, key % 16, 1) + 3), inputs.k.get(from + 3)) << b << " " << key;
    }
  }
  ASSERT_EQ(read_npy(path("v_cache.npy"), "").get(7), inputs.v.get(7));
}

TEST_F(KvCacheFilesTest, AVariableLengthCaseIsSavedAsAPaddedCacheWithNaNPastEachLength) {
  const Case c = decode_case({5, 12, 1}, 0);
  const AttentionInputs inputs = make_inputs(c);
  EXPECT_EQ(save_kv_cache(directory_.string(), c, inputs),
            (std::vector<std::string>{"k_cache.npy", "v_cache.npy", "cache_seqlens.npy"}));
  EXPECT_FALSE(fs::exists(path("block_table.npy")));
  const HostTensor cache = read_npy(path("v_cache.npy"), "");
  EXPECT_EQ(cache.batch(), 3);
  EXPECT_EQ(cache.seq(), 12);
  EXPECT_EQ(cache.heads(), 2);
  EXPECT_EQ(cache.dtype(), DType::fp16);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t key = 0; key < c.seq_k; ++key) {
      for (std::int64_t e = 0; e < cache.row_stride(); ++e) {
        const float got = cache.get(cache.offset(b, key, 0) + e);
        if (key < c.seq_k_of(b)) {
          ASSERT_EQ(got, inputs.v.get(inputs.v.offset(0, inputs.layout.storage_row(b, key), 0) + e));
        } else {
          ASSERT_TRUE(std::isnan(got)) << b << " " << key;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// check_kv_cache

KvCacheArrays arrays(bool paged) {
  const DType f = DType::fp32;
  KvCacheArrays a{HostTensor(f, 3, 1, 4, 8), HostTensor(f, paged ? 8 : 3, paged ? 16 : 40, 2, 8),
                  HostTensor(f, paged ? 8 : 3, paged ? 16 : 40, 2, 8), HostTensor(f, 3, 1, 4, 8), std::nullopt,
                  Int32Array{{3}, {40, 17, 33}}};
  if (paged) a.block_table = Int32Array{{3, 3}, {0, 1, 2, 3, 4, -1, 5, 6, 7}};
  return a;
}

std::string check_error(const KvCacheArrays& a) {
  try {
    check_kv_cache(a);
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos);
    return error.what();
  }
  return "";
}

TEST(CheckKvCache, AcceptsPoolsAndPaddedCachesAndMakesTheCase) {
  EXPECT_EQ(check_error(arrays(true)), "");
  EXPECT_EQ(check_error(arrays(false)), "");
  const Case paged = kv_cache_case(arrays(true));
  EXPECT_EQ(paged.page_size, 16);
  EXPECT_EQ(paged.seq_k, 40);
  EXPECT_EQ(paged.seqlens, (std::vector<std::int64_t>{40, 17, 33}));
  EXPECT_EQ(paged.kv_heads, 2);
  KvCacheArrays equal = arrays(false);
  equal.cache_seqlens.values = {9, 9, 9};
  const Case padded = kv_cache_case(equal);
  EXPECT_EQ(padded.page_size, 0);
  EXPECT_EQ(padded.seq_k, 9);
  EXPECT_TRUE(padded.seqlens.empty()) << "equal lengths are no variable-length case";
}

TEST(CheckKvCache, RefusesEachInconsistencyNamingTheFlag) {
  const DType f = DType::fp32;
  struct Bad {
    std::string what;
    KvCacheArrays a;
    std::string fragment;
  };
  std::vector<Bad> cases;
  auto add = [&](std::string what, bool paged, auto change, std::string fragment) {
    KvCacheArrays a = arrays(paged);
    change(a);
    cases.push_back({std::move(what), std::move(a), std::move(fragment)});
  };
  add("v shape", true, [&](KvCacheArrays& a) { a.v_cache = HostTensor(f, 9, 16, 2, 8); },
      "--k-cache (8, 16, 2, 8) and --v-cache (9, 16, 2, 8) must have the same shape");
  add("o shape", true, [&](KvCacheArrays& a) { a.o = HostTensor(f, 3, 2, 4, 8); },
      "--o (3, 2, 4, 8) must have the shape of --q");
  add("head_dim", false,
      [&](KvCacheArrays& a) {
        a.q = HostTensor(f, 3, 1, 4, 16);
        a.o = HostTensor(f, 3, 1, 4, 16);
      },
      "disagree in head_dim (16 vs 8)");
  add("heads", false,
      [&](KvCacheArrays& a) {
        a.q = HostTensor(f, 3, 1, 3, 8);
        a.o = HostTensor(f, 3, 1, 3, 8);
      },
      "not a multiple of the 2 kv heads");
  add("page size", true,
      [&](KvCacheArrays& a) {
        a.k_cache = HostTensor(f, 8, 24, 2, 8);
        a.v_cache = HostTensor(f, 8, 24, 2, 8);
      },
      "page_size 24 is not a power of two from 16 to 256");
  add("table rows", true, [&](KvCacheArrays& a) { a.block_table->shape = {1, 9}; }, "--block-table (1, 9) has 1 rows");
  add("padded batch", false,
      [&](KvCacheArrays& a) {
        a.k_cache = HostTensor(f, 4, 40, 2, 8);
        a.v_cache = HostTensor(f, 4, 40, 2, 8);
      },
      "holds 4 entries, --q (3, 1, 4, 8) has batch 3");
  add("lengths", false, [&](KvCacheArrays& a) { a.cache_seqlens = Int32Array{{4}, {1, 1, 1, 1}}; },
      "--cache-seqlens (4,) has 4 lengths");
  add("negative length", false, [&](KvCacheArrays& a) { a.cache_seqlens.values[2] = -5; },
      "entry 2 has length -5; every length must be at least 1");
  add("pool capacity", true, [&](KvCacheArrays& a) { a.cache_seqlens.values[0] = 49; },
      "entry 0 has length 49, more than the cache holds: 3 blocks of 16 keys per entry");
  add("block past the pool", true, [&](KvCacheArrays& a) { a.block_table->values[7] = 8; },
      "--block-table: entry [2, 1] is 8, outside the pool's 8 blocks");
  add("-1 used", true, [&](KvCacheArrays& a) { a.cache_seqlens.values[1] = 33; },
      "--block-table: entry [1, 2] is -1, outside the pool's 8 blocks");
  for (const Bad& bad : cases) {
    const std::string message = check_error(bad.a);
    EXPECT_NE(message.find(bad.fragment), std::string::npos) << bad.what << ": " << message;
  }
}

}  // namespace
}  // namespace faprobe
