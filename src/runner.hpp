// The sweep runner: every (case × implementation) of a plan, in order. For each: supports(), predicted
// memory and time against the limits (skipped with the numbers), prepare, one run checked against the
// float64 reference, then timed samples; a record streams to the JSONL file and the table as it finishes.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "axes.hpp"
#include "record.hpp"
#include "registry.hpp"

namespace faprobe {

struct RunOptions {
  bool timing = true;          // false for `verify`: one run per case, checked, not timed
  bool strict = false;         // an unsupported (implementation, case) is an error, not a record
  bool show_unsupported = false;  // print unsupported records in the table (when impls were named)
  std::string out_jsonl;       // streamed records ("" = none)
  std::string json_path, csv_path, md_path;  // rewritten after every record ("" = none)
  bool resume = false;         // skip cases already in out_jsonl
  nlohmann::json metadata;     // for the --json header
  MachineRates rates;          // for time predictions
  std::uint64_t mem_limit = 0;
};

struct RunSummary {
  std::vector<Record> records;  // including those resumed from out_jsonl
  int ran = 0, resumed = 0, failed_checks = 0, failed_runs = 0, skipped = 0, unsupported = 0;
  bool interrupted = false;
  int exit_status() const;  // DESIGN.md: 0, 1 (a check or a case failed), 130 (interrupted)
};

// Runs one (implementation, case); never throws for a failing implementation (it becomes a record).
Record run_one(const Implementation& impl, const Case& c, const MeasureSettings& measure,
               const RunOptions& options);

RunSummary run_plan(const Plan& plan, const RunOptions& options, std::ostream& table);

}  // namespace faprobe
