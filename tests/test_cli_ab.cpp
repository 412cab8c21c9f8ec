// sweep --repeat and `faprobe ab` end to end (harness/run/repeat.hpp, harness/analysis/ab.hpp): rounds of processes and
// their pooled records, resuming inside a repetition, ABBA order, sides whose plans differ, bad sides, and a
// history of BASE files in compare. Tiny plans: the point is the processes, not the times.
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

// Two pairs in a fraction of a second a process (kOne: one of them).
const std::string kCase = "--seq 64 --heads 2 --warmup 0 --min-samples 3 --min-time 0.001 --max-noise 50 --max-time 1";
const std::string kPlan = "--impl cpu.naive,cpu.tiled " + kCase;
const std::string kOne = "--impl cpu.naive " + kCase;

class CliAb : public Cli {
 protected:
  // An executable script: a side of `ab` that runs faprobe with ARGS added, and logs "$SIDE" to order.txt
  // for the processes that measure (those given --out).
  fs::path side_script(const std::string& name, const std::string& extra_args = "") const {
    const fs::path script = write(name, "#!/bin/sh\n"
                                        "case \" $* \" in *\" --out \"*) echo \"$SIDE\" >> '" +
                                            path("order.txt").string() +
                                            "' ;; esac\n"
                                            "exec '" FAPROBE_BINARY "' \"$@\" " +
                                            extra_args + "\n");
    chmod(script.c_str(), 0755);
    return script;
  }
};

TEST_F(CliAb, RepeatMeasuresEveryPairInRoundsOfProcesses) {
  const Result run = faprobe("sweep " + kPlan + " --repeat 3 --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("each pair in 3 processes"), std::string::npos) << run.err;
  const std::vector<Record> records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u);
  for (const Record& record : records) {
    ASSERT_TRUE(record.time) << record.key();
    ASSERT_EQ(record.time->runs.size(), 3u);
    std::int64_t samples = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(record.time->runs[i].round, int(i) + 1);
      samples += record.time->runs[i].samples;
    }
    EXPECT_EQ(record.time->samples, samples);
  }
  EXPECT_FALSE(fs::exists(path("r.jsonl.rounds")));  // pooled: the round files are gone
  // A config's "repeat" is the flag's.
  write("repeat.json", R"({"impl": "cpu.naive", "seq": 64, "heads": 2, "warmup": 0, "min_samples": 3,
                           "min_time": 0.001, "max_noise": 50, "repeat": 2})");
  const Result config = faprobe("sweep --config repeat.json --out c.jsonl");
  ASSERT_EQ(config.status, 0) << config.err;
  EXPECT_EQ(read_jsonl(path("c.jsonl").string()).at(0).time->runs.size(), 2u);
  EXPECT_EQ(faprobe("sweep " + kPlan + " --repeat 0 --out x.jsonl").status, 2);
}

TEST_F(CliAb, RepeatResumesInsideARepetition) {
  // What an interrupted `--repeat 3` leaves: round 1 done, round 2 with one of its two pairs.
  fs::create_directories(path("r.jsonl.rounds"));
  ASSERT_EQ(faprobe("sweep " + kPlan + " --out r.jsonl.rounds/round-1-of-3.jsonl").status, 0);
  ASSERT_EQ(faprobe("sweep " + kOne + " --out partial.jsonl").status, 0);
  fs::copy_file(path("partial.jsonl"), path("r.jsonl.rounds/round-2-of-3.jsonl"));
  const std::vector<Record> round_one = read_jsonl(path("r.jsonl.rounds/round-1-of-3.jsonl").string());
  const Record seeded = read_jsonl(path("partial.jsonl").string()).at(0);

  const Result fresh = faprobe("sweep " + kPlan + " --repeat 3 --out r.jsonl");
  EXPECT_EQ(fresh.status, 2);
  EXPECT_NE(fresh.err.find("round-1-of-3.jsonl holds records of an earlier run; give --resume"), std::string::npos)
      << fresh.err;

  const Result resumed = faprobe("sweep " + kPlan + " --repeat 3 --out r.jsonl --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const std::vector<Record> records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u);
  for (const Record& record : records) {
    ASSERT_EQ(record.time->runs.size(), 3u);
    const auto measured = std::find_if(round_one.begin(), round_one.end(), [&](const Record& r) { return r.key() == record.key(); });
    ASSERT_NE(measured, round_one.end());
    EXPECT_DOUBLE_EQ(record.time->runs[0].median, measured->time->median) << "round 1 was measured again";
    if (record.impl == seeded.impl) {
      EXPECT_DOUBLE_EQ(record.time->runs[1].median, seeded.time->median) << "round 2's finished pair was measured again";
    }
  }
}

TEST_F(CliAb, TheSidesAlternateInAbbaOrderAndArePairedByRound) {
  side_script("side.sh");
  const Result ab = faprobe("ab --base ./side.sh --new ./side.sh --base-env SIDE=A --new-env SIDE=B --repeat 3 "
                            "--out-dir ab " + kPlan);
  ASSERT_EQ(ab.status, 0) << ab.err << ab.out;  // 3 rounds can never reach alpha 0.01 (p >= 0.25): no verdict
  EXPECT_EQ(read_file(path("order.txt")), "A\nB\nB\nA\nA\nB\n");
  for (const char* side : {"ab/base.jsonl", "ab/new.jsonl"}) {
    const std::vector<Record> records = read_jsonl(path(side).string());
    ASSERT_EQ(records.size(), 2u) << side;
    ASSERT_EQ(records[0].time->runs.size(), 3u) << side;
    EXPECT_EQ(records[0].time->runs[2].round, 3);
  }
  EXPECT_FALSE(fs::exists(path("ab/base.rounds")));
  const nlohmann::json comparison = nlohmann::json::parse(read_file(path("ab/compare.json")));
  EXPECT_TRUE(comparison["settings"]["paired"].get<bool>());
  EXPECT_EQ(comparison["pairs"][0]["time"]["test"], "signed-rank");
  EXPECT_EQ(comparison["pairs"][0]["time"]["base_processes"], 3);
  EXPECT_TRUE(fs::exists(path("ab/compare.md")));
  // The same --out-dir again is refused; --resume finds everything done and compares.
  EXPECT_EQ(faprobe("ab --repeat 3 --out-dir ab " + kPlan).status, 2);
  const Result again = faprobe("ab --base ./side.sh --new ./side.sh --repeat 3 --out-dir ab --resume " + kPlan);
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(read_file(path("order.txt")), "A\nB\nB\nA\nA\nB\n");  // nothing measured again
}

TEST_F(CliAb, SidesWhosePlansDifferAreRefusedBeforeMeasuring) {
  side_script("base.sh");
  side_script("more.sh", "--head-dim 64,32");
  const Result pairs = faprobe("ab --base ./base.sh --new ./more.sh --repeat 2 --out-dir p " + kPlan);
  EXPECT_EQ(pairs.status, 2);
  EXPECT_NE(pairs.err.find("the sides' plans differ: BASE has 2 pairs, NEW 4; only NEW: cpu.naive b1 h2 s64 d32"),
            std::string::npos)
      << pairs.err;
  side_script("one_thread.sh", "--threads 1");
  const Result settings = faprobe("ab --base ./base.sh --new ./one_thread.sh --repeat 2 --out-dir s " + kPlan);
  EXPECT_EQ(settings.status, 2);
  EXPECT_NE(settings.err.find("the sides' plans differ: measure: BASE warmup 0 min_samples 3"), std::string::npos)
      << settings.err;
  EXPECT_NE(settings.err.find("threads all verify true interleave false, NEW warmup 0"), std::string::npos) << settings.err;
  EXPECT_NE(settings.err.find("threads 1 verify"), std::string::npos) << settings.err;
  EXPECT_FALSE(fs::exists(path("order.txt")));  // no side measured anything
}

TEST_F(CliAb, BadSidesAndFlagsAreOneLineAndExitTwo) {
  const Result missing = faprobe("ab --base ./nowhere/faprobe " + kPlan);
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--base ./nowhere/faprobe: not an executable file"), std::string::npos) << missing.err;
  const Result env = faprobe("ab --new-env NOVALUE " + kPlan);
  EXPECT_EQ(env.status, 2);
  EXPECT_NE(env.err.find("--new-env 'NOVALUE': expected NAME=VALUE"), std::string::npos) << env.err;
  const Result plugin = faprobe("ab --new-plugin ./none.so " + kPlan);
  EXPECT_EQ(plugin.status, 2);
  EXPECT_NE(plugin.err.find("--new-plugin ./none.so: no such file"), std::string::npos) << plugin.err;
  const Result out = faprobe("ab --out x.jsonl " + kPlan);
  EXPECT_EQ(out.status, 2);
  EXPECT_NE(out.err.find("--out is not a flag ab passes"), std::string::npos) << out.err;
  const Result sweep_flag = faprobe("ab --repeat 2 --out-dir bad --seq banana --impl cpu.naive");
  EXPECT_EQ(sweep_flag.status, 2);
  EXPECT_NE(sweep_flag.err.find("BASE's sweep"), std::string::npos) << sweep_flag.err;
  EXPECT_NE(sweep_flag.err.find("--seq"), std::string::npos) << sweep_flag.err;
}

TEST_F(CliAb, SeveralBaseFilesAreAHistory) {
  for (const char* run : {"h1.jsonl", "h2.jsonl", "h3.jsonl", "now.jsonl"}) {
    ASSERT_EQ(faprobe("sweep " + kOne + " --out " + std::string(run)).status, 0);
  }
  const Result compare = faprobe("compare --base h1.jsonl --base h2.jsonl --base h3.jsonl --new now.jsonl --json c.json");
  EXPECT_LE(compare.status, 1) << compare.err;
  const nlohmann::json comparison = nlohmann::json::parse(read_file(path("c.json")));
  ASSERT_EQ(comparison["pairs"].size(), 1u);
  EXPECT_EQ(comparison["pairs"][0]["time"]["test"], "history");
  EXPECT_EQ(comparison["pairs"][0]["time"]["base_processes"], 3);
  // The same pair twice in NEW's files is still an error.
  const Result twice = faprobe("compare --base h1.jsonl --new h2.jsonl --new h3.jsonl");
  EXPECT_EQ(twice.status, 2);
  EXPECT_NE(twice.err.find("appears twice"), std::string::npos) << twice.err;
}

}  // namespace
}  // namespace faprobe
