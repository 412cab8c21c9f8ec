#include "harness/commands/result_documents.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "harness/commands/workflow.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"

namespace faprobe {

nlohmann::json result_files_metadata(const std::vector<ResultFile>& files, const std::string& command_key) {
  nlohmann::json sources = nlohmann::json::array();
  for (const ResultFile& file : files) {
    sources.push_back({{"path", file.path},
                       {"format", file.document ? "json" : "jsonl"},
                       {"metadata", file.document ? file.metadata : nlohmann::json()}});
  }
  const nlohmann::json written{{"command", command_line()}, {"time", utc_time_now()}, {"sources", sources}};
  if (files.size() == 1 && files.front().document) {
    nlohmann::json metadata = files.front().metadata;
    metadata[command_key] = {{"command", written["command"]}, {"time", written["time"]}};
    return metadata;
  }
  nlohmann::json metadata{{"schema", kSchema}, {"version", FAPROBE_VERSION}, {command_key, written}};
  // The inputs agree when each is a document from the same CPU model and the same devices (by name): the
  // per-run readings in them (available memory, clocks) differ from run to run and do not count.
  auto identity = [](const ResultFile& file) {
    nlohmann::json names = nlohmann::json::array();
    for (const nlohmann::json& device : file.metadata.value("devices", nlohmann::json::array()))
      names.push_back(device.is_object() ? device.value("name", nlohmann::json()) : nlohmann::json());
    const nlohmann::json host = file.metadata.value("host", nlohmann::json::object());
    return nlohmann::json{host.is_object() ? host.value("cpu_model", nlohmann::json()) : nlohmann::json(), names};
  };
  const ResultFile& first = files.front();
  bool agree = true;
  for (const ResultFile& file : files) agree = agree && file.document && identity(file) == identity(first);
  if (agree) {  // the first input's, as the machine the records share
    metadata["host"] = first.metadata.value("host", nlohmann::json());
    metadata["devices"] = first.metadata.value("devices", nlohmann::json());
  }
  return metadata;
}

void refuse_inputs_as_outputs(const OutputTargets& targets, const std::vector<std::string>& inputs,
                              const std::string& what) {
  for (const OutputTarget* target : targets.documents()) {
    for (const std::string& file : inputs) {
      std::error_code error;
      if (target->kind == OutputKind::regular_file && std::filesystem::equivalent(file, target->file, error)) {
        throw UsageError(fmt::format("{} is also an input ({}): write {} to another file", target->name(), file, what));
      }
    }
  }
}

}  // namespace faprobe
