// Files and flags as a user of other command lines expects them, end to end: a non-empty --out is continued
// (--resume) or refused, never appended to twice; merge takes the sweep's own command line; verify of files
// says what it assumed without case.json and reads float64 .npy; the --json header has numbers (or null)
// where numbers go; an unknown option names the one probably meant; PyTorch's dtype names; size suffixes with
// and without B; the last of a repeated option wins; --threads beyond the cores warns; `list` is one row per
// implementation unless --all.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/io/npy.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"
#include "npy_support.hpp"

namespace faprobe {
namespace {

constexpr const char* kTinyPlan = " --impl cpu.naive --seq 17,33 --heads 1 --head-dim 16 --min-samples 1 --min-time 0 "
                              "--max-noise 100 --warmup 0";

std::size_t newline_count(const std::string& text) { return std::size_t(std::count(text.begin(), text.end(), '\n')); }

TEST_F(Cli, ANonEmptyOutIsContinuedWithResumeOrRefused) {
  ASSERT_EQ(faprobe("sweep --out r.jsonl" + std::string(kTinyPlan)).status, 0);
  const std::string before = read_file(path("r.jsonl"));
  ASSERT_EQ(newline_count(before), 2u);
  const Result again = faprobe("sweep --out r.jsonl" + std::string(kTinyPlan));
  EXPECT_EQ(again.status, 2);
  EXPECT_EQ(again.err, "faprobe: --out r.jsonl: holds 2 records; continue it with --resume or choose another file\n");
  EXPECT_EQ(again.out, "");  // refused before anything was measured or printed
  EXPECT_EQ(read_file(path("r.jsonl")), before);
  const Result resumed = faprobe("sweep --resume --out r.jsonl" + std::string(kTinyPlan));
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("(2 resumed)"), std::string::npos) << resumed.err;
  EXPECT_EQ(read_file(path("r.jsonl")), before);
  // Records of other pairs only (another implementation's verify into one file) are added to, with a note; the
  // later --impl wins over kTinyPlan's.
  const Result other = faprobe("verify --out r.jsonl" + std::string(kTinyPlan) + " --impl cpu.tiled");
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_NE(other.err.find("faprobe: note: --out r.jsonl: adding this run's records to its 2 records of other pairs\n"),
            std::string::npos)
      << other.err;
  EXPECT_EQ(newline_count(read_file(path("r.jsonl"))), 4u);
  const Result overlap = faprobe("sweep --out r.jsonl" + std::string(kTinyPlan) + " --seq 33,65");
  EXPECT_EQ(overlap.status, 2);
  EXPECT_EQ(overlap.err, "faprobe: --out r.jsonl: holds 4 records, 1 of them this run's pairs; continue it with "
                         "--resume or choose another file\n");
  // A torn last line (a crash mid-write) is not buried under new records: --resume cuts it.
  write("torn.jsonl", before + "{\"impl\": \"cpu.na");
  const Result torn = faprobe("verify --out torn.jsonl" + std::string(kTinyPlan) + " --impl cpu.tiled");
  EXPECT_EQ(torn.status, 2);
  EXPECT_EQ(torn.err, "faprobe: --out torn.jsonl: holds 2 records and a torn last line; "
                      "continue it with --resume or choose another file\n");
  // An empty file (touched by a job script) is a new one.
  write("empty.jsonl", "");
  EXPECT_EQ(faprobe("verify --out empty.jsonl" + std::string(kTinyPlan)).status, 0);
  EXPECT_EQ(newline_count(read_file(path("empty.jsonl"))), 2u);
}

TEST_F(Cli, MergeTakesTheSweepsOwnCommandLineAndIgnoresItsMeasurementFlags) {
  const std::string sweep = "--impl cpu.naive --seq 16,32,48 --heads 1 --head-dim 16 --threads 1 --min-samples 1 "
                            "--min-time 0 --max-noise 100 --no-verify --isolate-timeout 30";
  for (const char* shard : {"1", "2"}) {
    const Result run = faprobe("sweep " + sweep + " --shard " + shard + "/2 --out s" + shard + ".jsonl");
    ASSERT_EQ(run.status, 0) << run.err;
  }
  const Result merged = faprobe("merge s1.jsonl s2.jsonl --out merged.jsonl " + sweep + " --shard 2/2");
  EXPECT_EQ(merged.status, 0) << merged.err;
  EXPECT_NE(merged.err.find("merge: note: ignoring --min-samples, --max-noise, --min-time, --threads, --no-verify, "
                            "--isolate-timeout, --shard: the sweep's measurement and run flags do not change its "
                            "plan, and merge measures nothing\n"),
            std::string::npos)
      << merged.err;
  EXPECT_NE(merged.err.find("checked pair by pair against the plan"), std::string::npos) << merged.err;
  EXPECT_EQ(read_jsonl(path("merged.jsonl").string()).size(), 3u);
  // Without such flags, no note.
  const Result plain = faprobe("merge s1.jsonl s2.jsonl --out plain.jsonl --impl cpu.naive --seq 16,32,48 --heads 1 "
                               "--head-dim 16");
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.err.find("ignoring"), std::string::npos) << plain.err;
}

// o.npy rewritten as float64 ('<f8'), as NumPy users keep a reference.
void write_as_float64(const std::string& from, const std::string& to) {
  const HostTensor tensor = read_npy(from, "--o");
  std::string data(std::size_t(tensor.elements()) * sizeof(double), '\0');
  for (std::int64_t i = 0; i < tensor.elements(); ++i) {
    const double value = tensor.get(i);
    std::memcpy(&data[std::size_t(i) * sizeof(double)], &value, sizeof(double));
  }
  npy_test::write_bytes(to, npy_test::hand_built("{'descr': '<f8', 'fortran_order': False, 'shape': " +
                                                     shape_text(tensor) + ", }",
                                                 data));
}

TEST_F(Cli, VerifyOfFilesSaysWhatItAssumedAndReadsFloat64) {
  ASSERT_EQ(faprobe("run --impl cpu.naive --seq 33 --heads 2 --head-dim 16 --min-samples 1 --min-time 0 "
                    "--max-noise 100 --save saved").status,
            0);
  fs::remove(path("saved") / "case.json");
  const std::string inputs = "--q saved/q.npy --k saved/k.npy --v saved/v.npy";
  const Result assumed = faprobe("verify " + inputs + " --o saved/o.npy");
  EXPECT_EQ(assumed.status, 0) << assumed.err;
  EXPECT_NE(assumed.err.find("verify: no case.json beside --o saved/o.npy: assuming dtype fp32 (--o is float32), mask "
                             "none; --dtype and --mask say otherwise\n"),
            std::string::npos)
      << assumed.err;
  const Result given = faprobe("verify " + inputs + " --o saved/o.npy --dtype fp32 --mask none");
  EXPECT_EQ(given.status, 0) << given.err;
  EXPECT_EQ(given.err.find("assuming"), std::string::npos) << given.err;

  write_as_float64(path("saved/o.npy").string(), path("o64.npy").string());
  const Result float64 = faprobe("verify " + inputs + " --o o64.npy --mask none");
  EXPECT_EQ(float64.status, 0) << float64.out << float64.err;
  EXPECT_NE(float64.err.find("verify: --o is float64, read as the nearest float32 values"), std::string::npos)
      << float64.err;
  EXPECT_NE(float64.err.find("assuming dtype fp32 (--o is float64);"), std::string::npos) << float64.err;
}

TEST_F(Cli, TheJsonHeaderHasNumbersOrNullWhereNumbersGo) {
  ASSERT_EQ(faprobe("verify --json d.json" + std::string(kTinyPlan)).status, 0);
  const nlohmann::json defaults = nlohmann::json::parse(read_file(path("d.json")));
  EXPECT_TRUE(defaults.at("mem_limit_bytes").is_null()) << defaults.at("mem_limit_bytes");
  EXPECT_EQ(defaults.at("mem_limit_source"), "device default");
  EXPECT_TRUE(defaults.at("isolate").is_null()) << defaults.at("isolate");
  ASSERT_EQ(faprobe("verify --mem-limit 4G --no-isolate --json g.json" + std::string(kTinyPlan)).status, 0);
  const nlohmann::json given = nlohmann::json::parse(read_file(path("g.json")));
  EXPECT_EQ(given.at("mem_limit_bytes"), std::uint64_t(4) << 30);  // G is GiB
  EXPECT_EQ(given.at("mem_limit_source"), "--mem-limit");
  EXPECT_EQ(given.at("isolate"), false);
}

TEST_F(Cli, AnUnknownOptionNamesTheOneProbablyMeant) {
  const std::pair<std::string, std::string> cases[] = {
      {"sweep --seqs 1024", "faprobe: sweep: unknown option --seqs; did you mean --seq? (see faprobe sweep --help)\n"},
      {"verify --dtypes=bf16", "faprobe: verify: unknown option --dtypes; did you mean --dtype? (see faprobe verify --help)\n"},
      {"sweep --mem 4G", "faprobe: sweep: unknown option --mem; did you mean --mem-limit? (see faprobe sweep --help)\n"},
      {"ab --thread 2", "faprobe: ab: unknown option --thread; did you mean --threads? (see faprobe ab --help)\n"},
      {"merge a.jsonl --frobnicate", "faprobe: merge: unknown option --frobnicate (see faprobe merge --help)\n"},
      {"verify --x 1", "faprobe: verify: unknown option --x (see faprobe verify --help)\n"},  // not --q: no guess
  };
  for (const auto& [args, message] : cases) {
    const Result run = faprobe(args);
    EXPECT_EQ(run.status, 2) << args;
    EXPECT_EQ(run.err, message) << args;
  }
}

TEST_F(Cli, PyTorchDtypeNamesSizeSuffixesAndTheLastOfARepeatedOption) {
  // --seq given twice: the last wins; --dtype in PyTorch's names; --mem-limit in a suffix without B.
  const Result run = faprobe("verify --impl cpu.naive --seq 64 --heads 1 --head-dim 16 --seq 17 "
                             "--dtype bfloat16,torch.float16,float32 --mem-limit 1G --mem-limit 2GiB --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  std::vector<std::string> dtypes;
  for (const Record& record : read_jsonl(path("r.jsonl").string())) {
    EXPECT_EQ(record.c.seq_k, 17);
    dtypes.emplace_back(to_string(record.c.dtype));
  }
  EXPECT_EQ(dtypes, (std::vector<std::string>{"bf16", "fp16", "fp32"}));
  const Result bad = faprobe("verify --impl cpu.naive --seq 17 --dtype float64");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "faprobe: --dtype: unknown dtype 'float64' (allowed: fp32, fp16, bf16, fp8_e4m3, or PyTorch's "
                     "float32, float16, bfloat16, float8_e4m3fn)\n");
  const Result size = faprobe("verify --impl cpu.naive --seq 17 --mem-limit 4X");
  EXPECT_EQ(size.status, 2);
  EXPECT_EQ(size.err, "faprobe: --mem-limit: '4X' is not a size (examples: 4G or 4GiB = 4·2^30 bytes, 4GB = 4·10^9 "
                      "bytes, 512M, 1.5GB, 4096)\n");
}

TEST_F(Cli, ThreadsBeyondTheCoresWarn) {
  if (std::system("taskset -c 0 true >/dev/null 2>&1") != 0) GTEST_SKIP() << "no taskset";
  const Result beyond = shell("taskset -c 0 '" FAPROBE_BINARY "' verify --threads 2 --out a.jsonl" + std::string(kTinyPlan));
  EXPECT_EQ(beyond.status, 0) << beyond.err;
  EXPECT_NE(beyond.err.find("faprobe: warning: --threads 2 is more than the 1 cores this process may use; threads "
                            "will take turns on them"),
            std::string::npos)
      << beyond.err;
  const Result within = shell("taskset -c 0 '" FAPROBE_BINARY "' verify --threads 1 --out b.jsonl" + std::string(kTinyPlan));
  EXPECT_EQ(within.status, 0) << within.err;
  EXPECT_EQ(within.err.find("warning"), std::string::npos) << within.err;
}

TEST_F(Cli, ListIsOneRowPerImplementationAndAllHasTheTables) {
  const Result compact = faprobe("list");
  ASSERT_EQ(compact.status, 0) << compact.err;
  EXPECT_LT(newline_count(compact.out), 60u) << compact.out;
  EXPECT_EQ(compact.out.find("✗"), std::string::npos) << compact.out;
  const std::size_t header = compact.out.find("\n  implementation ");
  ASSERT_NE(header, std::string::npos) << compact.out;
  const std::string table = compact.out.substr(header);
  // cpu.tiled: fp32, fp16 and bf16 at every head dim, mask and mode; cpu.decode decodes only.
  auto row = [&](const std::string& name) {  // the row of `name`, or of `name*` (not every combination)
    for (const char* after : {" ", "* "}) {
      const std::size_t at = table.find("\n  " + name + after);
      if (at != std::string::npos) return table.substr(at + 1, table.find('\n', at + 1) - at - 1);
    }
    return std::string();
  };
  const std::string tiled = row("cpu.tiled");
  EXPECT_NE(tiled.find(" fp32,fp16,bf16 "), std::string::npos) << tiled;
  EXPECT_NE(tiled.find(" all "), std::string::npos) << tiled;
  EXPECT_NE(tiled.find(" prefill,decode"), std::string::npos) << tiled;
  const std::string decode = row("cpu.decode");
  EXPECT_NE(decode.find(" decode"), std::string::npos) << decode;
  EXPECT_EQ(decode.find("prefill"), std::string::npos) << decode;
  EXPECT_EQ(decode.find("causal-top-left"), std::string::npos) << decode;

  const Result all = faprobe("list --all");
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_GT(newline_count(all.out), 2 * newline_count(compact.out));
  EXPECT_NE(all.out.find("\ncpu.decode ("), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("✗"), std::string::npos);
}

}  // namespace
}  // namespace faprobe
