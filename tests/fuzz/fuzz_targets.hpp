// The libFuzzer targets: one function each over arbitrary bytes, for the parsers that read what users and
// files hand faprobe. Each returns normally for any input it refuses (a UsageError is the expected answer
// to garbage); anything else — another exception, a crash, a sanitizer report, a hang — is a bug.
//
// Built two ways: as libFuzzer executables (the debug preset, clang; libfuzzer_main.cpp gives each its
// LLVMFuzzerTestOneInput), run for a bounded time in CI from the committed corpora in corpus/<target>/; and
// into tests/test_fuzz_corpus.cpp, which replays every corpus file and every regression (regressions/
// <target>/: inputs that once crashed a target) in the ordinary test suite, sanitized or not.
#pragma once
#include <cstddef>
#include <cstdint>

namespace faprobe::fuzz {

int npy_reader(const std::uint8_t* data, std::size_t size);     // harness/io/npy.hpp: the .npy files of verify
int config_plan(const std::uint8_t* data, std::size_t size);    // a --config file, expanded into its plan
int range_grammar(const std::uint8_t* data, std::size_t size);  // the value grammar of flags and configs
int resume_jsonl(const std::uint8_t* data, std::size_t size);   // a JSONL file that --resume continues
int result_file(const std::uint8_t* data, std::size_t size);    // a file compare, report and merge read back
int merge_parts(const std::uint8_t* data, std::size_t size);    // parts (split at '\f') merged, and report's shard gaps

}  // namespace faprobe::fuzz
