// The result record, schema "faprobe/1" (docs/DESIGN.md): one per (implementation, case). Every writer is a
// thin printer over these records.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/case.hpp"
#include "reference/check.hpp"

namespace faprobe {

inline constexpr const char* kSchema = "faprobe/1";

enum class Status { ok, mismatch, skipped, unsupported, failed };
std::string_view to_string(Status status);
Status parse_status(std::string_view text);

// The identity of an (implementation, case) pair, used by --resume.
inline std::string record_key(const std::string& impl, const Case& c) { return impl + " " + c.key(); }

// At most this many raw samples are kept in a record (time_s.samples_s); beyond it they are thinned evenly
// (kept_sample_indices). The statistics are always over every sample taken.
inline constexpr std::size_t kMaxKeptSamples = 10000;

// How an implementation's samples were taken among the others of its case (time_s.order): one implementation
// after another, or in rounds with them (--interleave, interleave.hpp).
enum class SampleOrder { sequential, interleaved };
std::string_view to_string(SampleOrder order);
SampleOrder parse_sample_order(std::string_view text);

// Evidence that the machine was busy while a record's samples were taken (contention.hpp's rules):
// the measured threads got less CPU than the wall clock they spent, were preempted, or the samples are the
// scheduler's tick rather than the kernel. A contended record's time is shown, never judged (compare.hpp).
struct Contention {
  std::vector<std::string> evidence;  // one line each, "cpu share 0.41 of 2 threads over 13 samples (below 0.75)"
  double cpu_share = 1;               // over all samples: CPU time / (wall × threads); 1 when not measured
  double involuntary_switches = 0;    // per sample, mean
  bool quantised = false;             // most samples at a multiple of a scheduler tick
  bool identical = false;             // every sample the same to the nanosecond
};

// The most processes one pair is measured in (sweep --repeat N, ab --repeat N); records read back are held to it.
inline constexpr int kMaxRepeat = 1000;

// One process's samples of a pair (sweep --repeat, faprobe ab): each process summarized on its own, since
// processes on a shared machine land in different modes that the samples of one process cannot show.
struct ProcessRun {
  int round = 0;               // 1-based: the repetition (round of the plan) this process ran
  double median = 0, q1 = 0, q3 = 0;  // seconds, over this process's samples
  std::int64_t samples = 0;
  bool contended = false;      // this process's samples carried Contention evidence
};

struct TimeStats {
  double median = 0, mean = 0, min = 0, max = 0, q1 = 0, q3 = 0, stddev = 0;
  std::int64_t samples = 0;
  // The samples in the order they were taken, seconds rounded to the nanosecond; all of them up to
  // kMaxKeptSamples, else that many evenly spaced ones (the first always). Empty in records written before
  // faprobe kept them.
  std::vector<double> samples_s = {};  // "= {}": braced initializers may leave it out without a warning
  // sequential in records written before --interleave existed.
  SampleOrder order = SampleOrder::sequential;
  // Interleaved: the implementations of one round, in the order each round ran them, this one included
  // (time_s.interleaved_with). Empty when sequential.
  std::vector<std::string> interleaved_with = {};
  // Present when the machine was busy during the samples (time_s.contended, with its evidence).
  std::optional<Contention> contended = std::nullopt;
  // sweep --repeat / ab: every process's own summary (time_s.runs), in round order; the fields above are then
  // pooled over the processes' samples. Empty for a record measured in one process.
  std::vector<ProcessRun> runs = {};
};

struct MemoryStats {
  std::uint64_t peak_bytes = 0;
  std::uint64_t workspace_bytes = 0;
  std::uint64_t predicted_bytes = 0;
};

// Which part of which plan a record was measured in (--shard I/N, harness/plan/shard.hpp).
// Where it ran too, for a sweep spread over nodes and GPUs: the host's name, and the CUDA_VISIBLE_DEVICES the
// process had (--devices pins one worker per GPU with it; a Slurm GPU job sets it), for records of a GPU.
// A plan is split into at most kMaxShards parts: --shard, Slurm's variables and every tag read back from a
// file are held to it, so that no count a file claims sizes anything (merge counts records per shard).
inline constexpr int kMaxShards = 100000;
struct ShardTag {
  int index = 0;  // 1-based
  int count = 0;
  std::string plan_fingerprint;
  std::int64_t pairs = 0;            // pairs in this shard; 0 in records written before it was kept
  std::string host;                  // "" when not known
  std::string cuda_visible_devices;  // "" when unset or not a GPU record
};

struct Record {
  std::string impl;
  std::string device;
  Case c;
  Status status = Status::ok;
  std::string reason;
  std::optional<TimeStats> time;  // absent when not timed (skipped, unsupported, emulated, verify)
  // gbytes_per_s() over the copy bandwidth of the device it ran on (the GPU's or the host's, from the
  // run's calibration); absent when not timed or that bandwidth was not measured.
  std::optional<double> bandwidth_fraction;
  double predicted_time_s = 0;
  MemoryStats memory;
  std::optional<VerifyResult> verify;
  nlohmann::json details = nlohmann::json::object();
  // The `faprobe run` command line that reproduces this one case (harness/run/provenance.hpp), shell-quoted; ""
  // for a check of files and in records written before faprobe kept it (`repro`: null).
  std::string repro;
  std::optional<ShardTag> shard;  // absent when the run was not sharded

  double flops() const { return c.flops(); }
  double bytes() const { return c.min_bytes(); }
  std::optional<double> gflops() const;         // flops / median time
  std::optional<double> gbytes_per_s() const;   // minimum bytes / median time
  std::string key() const { return record_key(impl, c); }
};

void to_json(nlohmann::json& out, const Record& record);

// JSON text of a record or document that may carry text faprobe did not produce (an isolated child's last
// stderr line): bytes that are not UTF-8 are written as U+FFFD rather than making dump() throw halfway
// through a run.
inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
void from_json(const nlohmann::json& in, Record& record);

}  // namespace faprobe
