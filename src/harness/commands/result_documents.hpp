// What `report` and `merge` share: they write documents from records read back from result files (and
// `compare` refuses, as they do, an output that is one of its inputs).
//
// The --json document keeps where its records came from: with one input that was itself a --json document,
// its metadata (host, devices, rates, command) is kept as it was; with several, each input document's
// metadata goes under "sources", and the top level says only what the inputs agree on (host and devices, the
// first input's, when every input is a document from the same CPU model and the same devices by name). The
// command that wrote it goes under `command_key` ("report", "merge").
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/analysis/record_files.hpp"
#include "harness/io/output_files.hpp"

namespace faprobe {

nlohmann::json result_files_metadata(const std::vector<ResultFile>& files, const std::string& command_key);

// A document that is also an input would be replaced by what was read from it: a UsageError naming both,
// "write <what> to another file".
void refuse_inputs_as_outputs(const OutputTargets& targets, const std::vector<std::string>& inputs,
                              const std::string& what);

}  // namespace faprobe
