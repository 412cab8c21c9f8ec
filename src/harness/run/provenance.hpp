// Where a record came from, written into it and the --json header: the `faprobe run` command line that
// reproduces a record's one case (`repro`), and what NVML saw of the GPUs' clocks while the run went on
// (the devices entries' `nvml`). The build itself is build_info.hpp.
//
// repro names every axis of the case (--seqlens instead of --batch and --seq for a variable-length one; no
// --seq-q for decode, which has one query row), the measure settings that differ from their defaults and
// --threads when it was set, each word shell-quoted: pasted into a shell it runs that case alone, measured
// and checked the same way. Execution settings (--isolate, outputs) are left out: they change how a case
// is run, not what is measured.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "harness/plan/run_options.hpp"
#include "model/case.hpp"
#include "model/implementation.hpp"

namespace faprobe {

// One word for a POSIX shell: as it is when it holds only letters, digits and @%+=:,./_-, else in single
// quotes (a quote inside as '\'').
std::string shell_quote(std::string_view word);

// "faprobe run --impl cpu.tiled --seq 1000 --seq-q 17 ... --min-samples 2" for `impl` on `c` under `measure`.
std::string repro_command(const std::string& impl, const Case& c, const MeasureSettings& measure);

// What run_plan does to every record it finishes: its repro command, and after a GPU case one more NVML
// sample of the GPUs' clocks and throttle reasons (options.nvml, when the run watches them).
void finish_record(const Implementation& impl, const MeasureSettings& measure, const RunOptions& options,
                   Record& record);

// The --json header as of now: options.metadata with the NVML summary (`nvml`: available,
// reason_unavailable, library, driver_version) and each device's report (devices[i].nvml) when the run
// watches the GPUs; options.metadata unchanged otherwise.
nlohmann::json document_metadata(const RunOptions& options);

}  // namespace faprobe
