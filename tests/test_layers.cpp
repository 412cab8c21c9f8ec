// The include layers of docs/DESIGN.md ("The pieces"): includes run one way, cli → harness → kernels,
// reference → model, and Eigen comes in through src/model/eigen.hpp only (it holds the one pragma that
// the AVX-512 build needs); within the harness, a floor includes only its own and the floors below it
// (io, records, plan, run, analysis, commands). The checker reads every source file's quoted and angle includes; a planted
// tree shows that it catches each kind of wrong include. Modules (a header with its source) that include each
// other's declarations in a circle (check.cpp including explain.hpp and explain.cpp including check.hpp) can
// be read, and changed, only together: the tree holds no circle but the listed ones it still has, and a planted
// tree shows circles of two and three modules caught.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

enum class Layer { model, reference, kernels, harness, cli, tests, generated, other };

const char* name(Layer layer) {
  switch (layer) {
    case Layer::model: return "model";
    case Layer::reference: return "reference";
    case Layer::kernels: return "kernels";
    case Layer::harness: return "harness";
    case Layer::cli: return "cli";
    case Layer::tests: return "tests";
    case Layer::generated: return "generated";
    case Layer::other: return "other";
  }
  return "?";
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The layer of a file, from its path relative to the source root.
Layer layer_of_file(const std::string& path) {
  if (starts_with(path, "src/model/")) return Layer::model;
  if (starts_with(path, "src/harness/")) return Layer::harness;
  if (starts_with(path, "src/cli/")) return Layer::cli;
  if (starts_with(path, "reference/")) return Layer::reference;
  if (starts_with(path, "kernels/")) return Layer::kernels;
  if (starts_with(path, "tests/")) return Layer::tests;
  return Layer::other;
}

// The layer a quoted include names (include paths: src/, the root, kernels/); a name without a folder is
// a file beside the includer (wgmma_ptx.inc, a test's support header), or a generated header (the embedded
// configs, the git revision).
Layer layer_of_include(const std::string& target, Layer includer) {
  if (target == "default_config.hpp" || target == "build_revision.hpp") return Layer::generated;
  if (starts_with(target, "model/")) return Layer::model;
  if (starts_with(target, "harness/")) return Layer::harness;
  if (starts_with(target, "cli/")) return Layer::cli;
  if (starts_with(target, "reference/")) return Layer::reference;
  if (starts_with(target, "cpu/") || starts_with(target, "cuda/") || starts_with(target, "plugin/")) return Layer::kernels;
  return includer;
}

bool allowed(Layer from, Layer to) {
  if (from == to) return true;
  switch (from) {
    case Layer::model: return false;
    case Layer::reference: return to == Layer::model;
    case Layer::kernels: return to == Layer::model;
    case Layer::harness:
      return to == Layer::model || to == Layer::reference || to == Layer::kernels || to == Layer::generated;
    case Layer::cli: return to != Layer::tests;
    default: return true;
  }
}

// The harness's floors, lowest first (docs/DESIGN.md, "Layers"): a harness file includes its own floor's
// headers and those of the floors below it, never one above.
const std::vector<std::string> kFloors = {"io", "records", "plan", "run", "analysis", "commands"};
const std::string kHarnessFloors = "io, records, plan, run, analysis, commands";

// The floor of "harness/run/runner.hpp" (an include, or a path below src/): its index in kFloors, or -1.
int floor_of(const std::string& harness_path) {
  for (std::size_t i = 0; i < kFloors.size(); ++i) {
    if (starts_with(harness_path, "harness/" + kFloors[i] + "/")) return int(i);
  }
  return -1;
}
const std::string& floor_name(int floor) { return kFloors[std::size_t(floor)]; }

// Every include under `root` that breaks a rule, as "path:line: what".
std::vector<std::string> layer_violations(const fs::path& root) {
  static const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<std::string> found;
  for (const char* top : {"src", "reference", "kernels", "tests"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      static const std::vector<std::string> kSources = {".hpp", ".cpp", ".cuh", ".cu", ".inc", ".h"};
      const std::string extension = entry.path().extension().string();
      if (!entry.is_regular_file() || std::find(kSources.begin(), kSources.end(), extension) == kSources.end()) continue;
      const std::string path = fs::relative(entry.path(), root).generic_string();
      const Layer from = layer_of_file(path);
      std::ifstream file(entry.path());
      int line_number = 0;
      for (std::string line; std::getline(file, line);) {
        ++line_number;
        std::smatch match;
        if (!std::regex_search(line, match, include)) continue;
        const std::string target = match[2];
        const std::string where = path + ":" + std::to_string(line_number) + ": ";
        if (match[1] == "<") {
          if (starts_with(target, "Eigen/") && path != "src/model/eigen.hpp") {
            found.push_back(where + "includes <" + target + ">; include \"model/eigen.hpp\" instead");
          }
          continue;
        }
        const Layer to = layer_of_include(target, from);
        if (!allowed(from, to)) {
          found.push_back(where + name(from) + " includes " + name(to) + " (\"" + target + "\")");
        } else if (from == Layer::harness && starts_with(target, "harness/")) {
          const int own = floor_of(path.substr(std::string("src/").size())), other = floor_of(target);
          if (own < 0) {
            found.push_back(where + "harness file outside the floor folders (" + kHarnessFloors + ")");
          } else if (other < 0) {
            found.push_back(where + "includes \"" + target + "\", outside the harness's floor folders");
          } else if (other > own) {
            found.push_back(where + "harness floor " + floor_name(own) + " includes floor " + floor_name(other) +
                            " (\"" + target + "\")");
          }
        }
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// A module: a source file's path without its extension (reference/check for check.hpp and check.cpp).
std::string module_of(const std::string& path) { return path.substr(0, path.rfind('.')); }

// Every circle of modules under `root` that include each other's headers, as "a → b → a", each once (from its
// smallest module).
std::vector<std::string> module_cycles(const fs::path& root) {
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::map<std::string, std::set<std::string>> edges;
  for (const char* top : {"src", "reference", "kernels"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      static const std::vector<std::string> kSources = {".hpp", ".cpp", ".cuh", ".cu", ".h"};
      const std::string extension = entry.path().extension().string();
      if (!entry.is_regular_file() || std::find(kSources.begin(), kSources.end(), extension) == kSources.end()) continue;
      const std::string path = fs::relative(entry.path(), root).generic_string();
      const std::string from = module_of(path);
      std::ifstream file(entry.path());
      for (std::string line; std::getline(file, line);) {
        std::smatch match;
        if (!std::regex_search(line, match, include)) continue;
        const std::string target = match[1];
        // The include paths: the root, src/, kernels/, and the includer's own folder.
        for (const fs::path& candidate : {root / target, root / "src" / target, root / "kernels" / target,
                                          entry.path().parent_path() / target}) {
          if (!fs::exists(candidate)) continue;
          const std::string to = module_of(fs::relative(candidate, root).lexically_normal().generic_string());
          if (to != from) edges[from].insert(to);
          break;
        }
      }
    }
  }
  std::set<std::string> found;
  std::vector<std::string> stack;
  std::set<std::string> done;
  std::function<void(const std::string&)> visit = [&](const std::string& module) {
    const auto on_stack = std::find(stack.begin(), stack.end(), module);
    if (on_stack != stack.end()) {
      std::vector<std::string> cycle(on_stack, stack.end());
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
      std::string text;
      for (const std::string& step : cycle) text += step + " → ";
      found.insert(text + cycle.front());
      return;
    }
    if (done.count(module) > 0) return;
    stack.push_back(module);
    for (const std::string& next : edges[module]) visit(next);
    stack.pop_back();
    done.insert(module);
  };
  for (const auto& [module, targets] : edges) visit(module);
  return {found.begin(), found.end()};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

TEST(Layers, EveryIncludeOfTheProjectRunsOneWay) {
  const std::vector<std::string> found = layer_violations(FAPROBE_SOURCE_DIR);
  EXPECT_TRUE(found.empty()) << joined(found);
}

TEST(Layers, APlantedTreeWithWrongIncludesIsCaught) {
  const fs::path root = fs::temp_directory_path() / ("faprobe-layers-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto write = [&](const std::string& path, const std::string& text) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  };
  // Allowed: each layer including itself and what is below it.
  write("src/model/case.hpp", "#include <vector>\n#include \"model/dtype.hpp\"\n");
  write("src/model/eigen.hpp", "#include <Eigen/Core>\n");
  write("reference/check.hpp", "#include \"model/case.hpp\"\n");
  write("kernels/cpu/tiled.cpp", "#include \"cpu/common.hpp\"\n#include \"model/eigen.hpp\"\n");
  write("src/harness/run/runner.cpp", "#include \"reference/check.hpp\"\n#include \"cpu/factories.hpp\"\n"
                                  "#include \"default_config.hpp\"\n");
  write("src/cli/main.cpp", "#include \"harness/run/runner.hpp\"\n#include \"cuda/runtime/gpu.hpp\"\n");
  EXPECT_TRUE(layer_violations(root).empty()) << joined(layer_violations(root));

  // Planted: an include that climbs, one that skips sideways, and Eigen outside its header.
  write("src/model/tensor.hpp", "#include \"model/case.hpp\"\n  #  include \"harness/plan/registry.hpp\"\n");
  write("kernels/cuda/fa2.cpp", "#include \"reference/check.hpp\"\n");
  write("reference/reference.hpp", "#include <Eigen/Dense>\n");
  write("src/harness/plan/axes.cpp", "#include \"cli/options.hpp\"\n");
  // ... and in the harness, a floor that includes one above it, and a file outside the floors.
  write("src/harness/io/range.cpp", "#include \"harness/io/range.hpp\"\n#include \"harness/run/runner.hpp\"\n");
  write("src/harness/loose.cpp", "#include \"harness/io/range.hpp\"\n");
  const std::vector<std::string> found = layer_violations(root);
  fs::remove_all(root);
  ASSERT_EQ(found.size(), 6u) << joined(found);
  EXPECT_EQ(found[0], "kernels/cuda/fa2.cpp:1: kernels includes reference (\"reference/check.hpp\")");
  EXPECT_EQ(found[1], "reference/reference.hpp:1: includes <Eigen/Dense>; include \"model/eigen.hpp\" instead");
  EXPECT_EQ(found[2], "src/harness/io/range.cpp:2: harness floor io includes floor run (\"harness/run/runner.hpp\")");
  EXPECT_EQ(found[3], "src/harness/loose.cpp:1: harness file outside the floor folders (io, records, plan, run, "
                      "analysis, commands)");
  EXPECT_EQ(found[4], "src/harness/plan/axes.cpp:1: harness includes cli (\"cli/options.hpp\")");
  EXPECT_EQ(found[5], "src/model/tensor.hpp:2: model includes harness (\"harness/plan/registry.hpp\")");
}

// The circles the tree still holds (the CUDA probes' launchers, and the GPU runtime with its stream hold; the
// harness has none): exactly these, so that a new circle fails here, and a broken one leaves this list by the
// same change.
const std::vector<std::string> kKnownCircles = {
    "kernels/cuda/probes/conversion_probes → kernels/cuda/probes/warp_probes → kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/conversion_probes",
    "kernels/cuda/probes/conversion_probes → kernels/cuda/probes/warp_probes → kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/matrix_probes → kernels/cuda/probes/conversion_probes",
    "kernels/cuda/probes/hopper_probes → kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/hopper_probes",
    "kernels/cuda/probes/matrix_probes → kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/matrix_probes",
    "kernels/cuda/probes/matrix_probes → kernels/cuda/probes/warp_probes → kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/matrix_probes",
    "kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/tma_probes → kernels/cuda/probes/probe_launch_gpu",
    "kernels/cuda/probes/probe_launch_gpu → kernels/cuda/probes/warp_probes → kernels/cuda/probes/probe_launch_gpu",
    "kernels/cuda/runtime/gpu → kernels/cuda/runtime/stream_hold → kernels/cuda/runtime/gpu",
};

TEST(Layers, NoNewCircleOfModules) {
  const std::vector<std::string> found = module_cycles(FAPROBE_SOURCE_DIR);
  EXPECT_EQ(found, kKnownCircles) << "found:\n" << joined(found);
  // reference/'s checker and explainer share reference/check_plan.hpp: they are in no circle.
  for (const std::string& circle : found) EXPECT_EQ(circle.find("reference/"), std::string::npos) << circle;
}

TEST(Layers, APlantedCircleOfModulesIsCaught) {
  const fs::path root = fs::temp_directory_path() / ("faprobe-cycles-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto write = [&](const std::string& path, const std::string& text) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  };
  // A chain, a source including its own header, and a file beside its includer: no circle.
  write("reference/check_plan.hpp", "#include \"model/case.hpp\"\n");
  write("reference/check.hpp", "#include \"reference/check_plan.hpp\"\n");
  write("reference/check.cpp", "#include \"reference/check.hpp\"\n#include \"reference/explain.hpp\"\n");
  write("reference/explain.hpp", "#include \"reference/check_plan.hpp\"\n");
  write("reference/explain.cpp", "#include \"reference/explain.hpp\"\n");
  write("src/model/case.hpp", "#include <vector>\n");
  write("kernels/cuda/fa3/kernel.cu", "#include \"cuda/fa3/kernel.cuh\"\n#include \"wgmma.inc\"\n");
  write("kernels/cuda/fa3/kernel.cuh", "#include \"model/case.hpp\"\n");
  write("kernels/cuda/fa3/wgmma.inc", "\n");
  EXPECT_TRUE(module_cycles(root).empty()) << joined(module_cycles(root));

  // Planted: the explainer's source takes the checker's header (the circle this guard was written for), and a
  // circle of three through src/ and kernels/ include paths.
  write("reference/explain.cpp", "#include \"reference/explain.hpp\"\n#include \"reference/check.hpp\"\n");
  write("src/harness/a.cpp", "#include \"harness/b.hpp\"\n");
  write("src/harness/b.hpp", "#include \"cpu/c.hpp\"\n");
  write("kernels/cpu/c.cpp", "#include \"harness/a.hpp\"\n");
  write("src/harness/a.hpp", "\n");
  write("kernels/cpu/c.hpp", "\n");
  const std::vector<std::string> found = module_cycles(root);
  fs::remove_all(root);
  ASSERT_EQ(found.size(), 2u) << joined(found);
  EXPECT_EQ(found[0], "kernels/cpu/c → src/harness/a → src/harness/b → kernels/cpu/c");
  EXPECT_EQ(found[1], "reference/check → reference/explain → reference/check");
}

}  // namespace
