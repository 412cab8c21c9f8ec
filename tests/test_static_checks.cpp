// Static checks of the compiled CUDA code: reads what nvcc put into libfaprobe_cuda_kernels.a, for every
// architecture it was built for (sm_80 and sm_90a must both be there), and asserts for every faprobe
// function (a name containing "faprobe"):
// - `cuobjdump -res-usage`: STACK:0 and LOCAL:0 (no stack frame, no local memory);
// - `cuobjdump -sass`: no LDL/STL instruction (no local-memory traffic, which is where spills go);
// - `ptxas -v` run again on the PTX embedded in the library, with the options it was built with:
//   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads.
// The build enforces the same before any test runs: kernels/cuda/CMakeLists.txt passes
// -Xptxas=-warn-spills,-warn-lmem-usage, which nvcc's -Werror=all-warnings (the release preset's
// FAPROBE_WERROR) turns into errors, so a spilling kernel does not even link. These tests check the
// result independently and keep checking in builds without -Werror.
//
// uses_instruction() asserts that an instruction occurs in the SASS of the kernels whose name matches a
// pattern, and fails when no kernel matches (it never passes vacuously): the instruction probes
// (kernels/cuda/probes/) use HMMA (mma.sync) and LDSM (ldmatrix), and the fa1, fa2 and decode kernels HMMA.
//
// The planted defects (static_checks_planted.cu: local memory, register spills, no tensor cores) show
// that each check can fail.
//
// cuobjdump (with the nvdisasm it runs for -sass) is found as $FAPROBE_CUOBJDUMP, else next to nvcc,
// else in the pip target scripts/test installs it into (build/tools/cuda-binary-tools, from PyPI's
// nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm), else on PATH. Not finding it is a failure, not a skip:
// in a CUDA build these checks are part of the suite. Its output for a library is cached next to this
// binary (disassembly takes about a second per object file, and CTest runs each test in its own process).
#include <cxxabi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

// --- Running the tools ---

struct CommandResult {
  int status = -1;  // the exit status; -1 when it did not exit normally
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, got);
  const int wait_status = pclose(pipe);
  if (wait_status != -1 && WIFEXITED(wait_status)) result.status = WEXITSTATUS(wait_status);
  return result;
}

std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

bool is_executable(const fs::path& path) { return fs::is_regular_file(path) && ::access(path.c_str(), X_OK) == 0; }

// Where cuobjdump is, or "" (and what was searched, for the failure message).
std::string find_cuobjdump(std::string& searched) {
  std::vector<fs::path> candidates;
  if (const char* configured = std::getenv("FAPROBE_CUOBJDUMP"); configured != nullptr && *configured != '\0') {
    candidates.emplace_back(configured);
  }
  candidates.push_back(fs::path(FAPROBE_CUDA_BIN_DIR) / "cuobjdump");
  std::error_code error;
  const fs::path pip_target = fs::path(FAPROBE_CUDA_BINARY_TOOLS_DIR) / "nvidia";
  for (const fs::directory_entry& entry : fs::directory_iterator(pip_target, error)) {
    candidates.push_back(entry.path() / "bin" / "cuobjdump");  // nvidia/cu13/bin/cuobjdump
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream directories(path);
    for (std::string directory; std::getline(directories, directory, ':');) {
      if (!directory.empty()) candidates.push_back(fs::path(directory) / "cuobjdump");
    }
  }
  for (const fs::path& candidate : candidates) {
    if (is_executable(candidate)) return candidate.string();
    searched += "\n  " + candidate.string();
  }
  return "";
}

const std::string& cuobjdump() {
  static std::string searched;
  static const std::string found = find_cuobjdump(searched);
  if (found.empty()) {
    ADD_FAILURE() << "cuobjdump not found. ./scripts/test installs it (pip: nvidia-cuda-cuobjdump and "
                     "nvidia-cuda-nvdisasm into build/tools/cuda-binary-tools); or set FAPROBE_CUOBJDUMP. Searched:"
                  << searched;
  }
  return found;
}

// `cuobjdump -res-usage -sass library`, cached next to this binary under a key of the library's path,
// size and modification time and the tool's path; written to a temporary file and renamed, so that
// concurrent test processes never read half a file.
std::string dump_library(const std::string& library) {
  const std::string& tool = cuobjdump();
  if (tool.empty()) return "";
  std::error_code error;
  const auto size = fs::file_size(library, error);
  if (error) {
    ADD_FAILURE() << "cannot read " << library << ": " << error.message();
    return "";
  }
  const auto modified = fs::last_write_time(library).time_since_epoch().count();
  const std::string key =
      "faprobe static-check cache: " + library + " " + std::to_string(size) + " " + std::to_string(modified) + " " + tool;
  const fs::path cache = fs::path(FAPROBE_STATIC_CHECKS_CACHE_DIR) / (fs::path(library).filename().string() + ".cuobjdump.txt");
  if (std::ifstream in(cache); in) {
    std::string first_line;
    std::getline(in, first_line);
    if (first_line == key) return std::string(std::istreambuf_iterator<char>(in), {});
  }
  const CommandResult result = run_command(shell_quoted(tool) + " -res-usage -sass " + shell_quoted(library));
  if (result.status != 0) {
    ADD_FAILURE() << "cuobjdump -res-usage -sass " << library << " exited with " << result.status << ":\n"
                  << result.output.substr(0, 4000);
    return "";
  }
  const fs::path partial = cache.string() + "." + std::to_string(::getpid());
  {
    std::ofstream out(partial);
    out << key << '\n' << result.output;
  }
  fs::rename(partial, cache, error);
  return result.output;
}

// --- What cuobjdump says about each function ---

struct Function {
  std::string object;  // the archive member, "matrix_probes.cu.o"
  std::string arch;    // "sm_80", "sm_90a"
  std::string name;    // mangled
  bool has_resources = false;
  std::map<std::string, long> resources;  // REG, STACK, SHARED, LOCAL, ... from -res-usage
  std::vector<std::string> sass;          // instructions without address and predicate: "HMMA.16816.F32 R8, R4, R2, R12"

  std::string id() const { return demangled() + " [" + arch + ", " + object + "]"; }
  std::string demangled() const {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
    return status == 0 && text ? std::string(text.get()) : name;
  }
  // The opcode of each instruction: "HMMA" for "HMMA.16816.F32 R8, ...".
  bool uses(const std::string& opcode) const {
    for (const std::string& instruction : sass) {
      if (instruction.compare(0, opcode.size(), opcode) == 0 &&
          (instruction.size() == opcode.size() || instruction[opcode.size()] == '.' || instruction[opcode.size()] == ' ')) {
        return true;
      }
    }
    return false;
  }
};

using FunctionKey = std::tuple<std::string, std::string, std::string>;  // object, arch, name

// Parses `cuobjdump -res-usage -sass` of an archive: "member lib.a:obj.o:" opens an object file, "arch =
// sm_80" / "code for sm_80" the architecture, " Function NAME:" and the next line the resource usage,
// "\t\tFunction : NAME" the SASS, whose instruction lines read "/*0580*/  @P0 LDSM.16.M88.4 R8, [R4] ;".
std::vector<Function> parse_dump(const std::string& text) {
  static const std::regex member(R"(^member .*:([^:]+):\s*$)");
  static const std::regex arch(R"(^\s*(?:arch =|code for) (sm_\w+)\s*$)");
  static const std::regex resource_function(R"(^ Function ([^ :]+):\s*$)");
  static const std::regex resource_value(R"(([A-Z_]+(?:\[\d+\])?):(\d+))");
  static const std::regex sass_function(R"(^\s*Function : (\S+)\s*$)");
  static const std::regex instruction(R"(^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([^;]*?)\s*;)");
  std::map<FunctionKey, Function> functions;
  std::string object, current_arch;
  Function* resources_for = nullptr;  // the function whose resource line comes next
  Function* sass_for = nullptr;       // the function whose SASS is being read
  const auto function = [&](const std::string& name) -> Function& {
    Function& f = functions[{object, current_arch, name}];
    f.object = object;
    f.arch = current_arch;
    f.name = name;
    return f;
  };
  std::stringstream lines(text);
  std::smatch match;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("/*") != std::string::npos) {  // most lines: SASS, or its encoding's second half
      if (sass_for != nullptr && std::regex_search(line, match, instruction)) sass_for->sass.push_back(match[1]);
    } else if (std::regex_match(line, match, member)) {
      object = match[1];
      resources_for = sass_for = nullptr;
    } else if (std::regex_match(line, match, arch)) {
      current_arch = match[1];
      resources_for = sass_for = nullptr;
    } else if (std::regex_match(line, match, resource_function)) {
      resources_for = &function(match[1]);
    } else if (resources_for != nullptr && line.find("REG:") != std::string::npos) {
      for (std::sregex_iterator it(line.begin(), line.end(), resource_value), end; it != end; ++it) {
        resources_for->resources[(*it)[1]] = std::stol((*it)[2]);
      }
      resources_for->has_resources = true;
      resources_for = nullptr;
    } else if (std::regex_match(line, match, sass_function)) {
      sass_for = &function(match[1]);
    }
  }
  std::vector<Function> result;
  for (auto& entry : functions) result.push_back(std::move(entry.second));
  return result;
}

std::vector<Function> faprobe_functions(const std::vector<Function>& all) {
  std::vector<Function> ours;
  for (const Function& f : all) {
    if (f.name.find("faprobe") != std::string::npos) ours.push_back(f);
  }
  return ours;
}

// Every way each function uses local memory, one line each; empty when none does.
std::vector<std::string> local_memory_uses(const std::vector<Function>& functions) {
  std::vector<std::string> uses;
  for (const Function& f : functions) {
    if (!f.has_resources) uses.push_back(f.id() + ": no -res-usage line");
    if (f.sass.empty()) uses.push_back(f.id() + ": no SASS");
    for (const char* resource : {"STACK", "LOCAL"}) {
      const auto found = f.resources.find(resource);
      if (found != f.resources.end() && found->second != 0) {
        uses.push_back(f.id() + ": " + resource + ":" + std::to_string(found->second));
      }
    }
    for (const char* opcode : {"LDL", "STL"}) {
      if (f.uses(opcode)) uses.push_back(f.id() + ": " + opcode + " in the SASS");
    }
  }
  return uses;
}

std::set<std::string> architectures(const std::vector<Function>& functions) {
  std::set<std::string> found;
  for (const Function& f : functions) found.insert(f.arch);
  return found;
}

const std::vector<std::string> kBuiltArchitectures = {"sm_80", "sm_90a"};

// Passes when, in each architecture of archs, at least one function's demangled name matches
// kernel_pattern (std::regex, searched) and every matching function has opcode in its SASS.
::testing::AssertionResult uses_instruction(const std::vector<Function>& functions, const std::string& opcode,
                                            const std::string& kernel_pattern,
                                            const std::vector<std::string>& archs = kBuiltArchitectures) {
  const std::regex pattern(kernel_pattern);
  std::string problems;
  for (const std::string& arch : archs) {
    int matched = 0;
    for (const Function& f : functions) {
      if (f.arch != arch || !std::regex_search(f.demangled(), pattern)) continue;
      ++matched;
      if (!f.uses(opcode)) problems += "\n  no " + opcode + " in " + f.id();
    }
    if (matched == 0) problems += "\n  no kernel matching '" + kernel_pattern + "' for " + arch;
  }
  if (problems.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << opcode << " expected in kernels matching '" << kernel_pattern << "':" << problems;
}

// --- ptxas -v on the embedded PTX ---

struct PtxasFunction {
  std::string arch, name;
  long stack_frame = -1, spill_stores = -1, spill_loads = -1;
};

// Extracts the PTX of every object (`cuobjdump -xptx all`, which also lists the ptxas options each was
// built with) and compiles each again with `ptxas -v` and those options, collecting "Function properties".
std::vector<PtxasFunction> ptxas_report(const std::string& library) {
  const std::string& tool = cuobjdump();
  if (tool.empty()) return {};
  const fs::path directory = fs::temp_directory_path() / ("faprobe-ptx-" + std::to_string(::getpid()) + "-" +
                                                          fs::path(library).stem().string());
  fs::remove_all(directory);
  fs::create_directories(directory);
  const CommandResult listing =
      run_command("cd " + shell_quoted(directory.string()) + " && " + shell_quoted(tool) + " -xptx all " + shell_quoted(library));
  EXPECT_EQ(listing.status, 0) << listing.output.substr(0, 4000);
  // "Extracting PTX file and ptxas options    1: libx.1.sm_80.ptx -arch=sm_80 -warn-spills -warn-lmem-usage"
  static const std::regex extracted(R"(Extracting PTX file and ptxas options\s+\d+:\s+(\S+\.ptx)\s*(.*?)\s*$)");
  static const std::regex properties(R"(Function properties for (\S+))");
  static const std::regex counts(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex arch_option(R"(-arch=(sm_\w+))");
  std::vector<PtxasFunction> report;
  std::stringstream lines(listing.output);
  std::smatch match;
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_search(line, match, extracted)) continue;
    const std::string file = match[1], options = match[2];
    std::smatch arch;
    const std::string arch_name = std::regex_search(options, arch, arch_option) ? std::string(arch[1]) : "?";
    const CommandResult ptxas = run_command(shell_quoted(FAPROBE_PTXAS) + " -v " + options + " " +
                                            shell_quoted((directory / file).string()) + " -o /dev/null");
    EXPECT_EQ(ptxas.status, 0) << "ptxas -v " << options << " " << file << ":\n" << ptxas.output.substr(0, 4000);
    std::stringstream ptxas_lines(ptxas.output);
    PtxasFunction* open = nullptr;
    for (std::string out; std::getline(ptxas_lines, out);) {
      std::smatch found;
      if (std::regex_search(out, found, properties)) {
        report.push_back({arch_name, found[1]});
        open = &report.back();
      } else if (open != nullptr && std::regex_search(out, found, counts)) {
        open->stack_frame = std::stol(found[1]);
        open->spill_stores = std::stol(found[2]);
        open->spill_loads = std::stol(found[3]);
        open = nullptr;
      }
    }
  }
  fs::remove_all(directory);
  return report;
}

// --- The libraries ---

const std::vector<Function>& kernels_library() {
  static const std::vector<Function> functions = parse_dump(dump_library(FAPROBE_KERNELS_LIBRARY));
  return functions;
}

const std::vector<Function>& planted_library() {
  static const std::vector<Function> functions = parse_dump(dump_library(FAPROBE_PLANTED_LIBRARY));
  return functions;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += "\n  " + line;
  return text;
}

class StaticChecks : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(cuobjdump().empty()); }
};

// --- faprobe's kernels ---

TEST_F(StaticChecks, EveryArchitectureIsInTheLibrary) {
  const std::vector<Function> ours = faprobe_functions(kernels_library());
  ASSERT_FALSE(ours.empty()) << "no faprobe function in " << FAPROBE_KERNELS_LIBRARY;
  const std::set<std::string> found = architectures(ours);
  // (A kernel may exist for one of them only: a Hopper kernel with wgmma is built for sm_90a alone.)
  for (const std::string& arch : kBuiltArchitectures) EXPECT_EQ(found.count(arch), 1u) << "no SASS for " << arch;
}

TEST_F(StaticChecks, NoFaprobeKernelUsesLocalMemory) {
  const std::vector<Function> ours = faprobe_functions(kernels_library());
  ASSERT_FALSE(ours.empty());
  const std::vector<std::string> uses = local_memory_uses(ours);
  EXPECT_TRUE(uses.empty()) << "local memory (stack, spills) in faprobe kernels:" << joined(uses);
}

TEST_F(StaticChecks, PtxasReportsNoStackAndNoSpills) {
  std::vector<std::string> problems;
  std::set<std::string> archs;
  int checked = 0;
  for (const PtxasFunction& f : ptxas_report(FAPROBE_KERNELS_LIBRARY)) {
    if (f.name.find("faprobe") == std::string::npos) continue;
    ++checked;
    archs.insert(f.arch);
    if (f.stack_frame != 0 || f.spill_stores != 0 || f.spill_loads != 0) {
      problems.push_back(f.name + " [" + f.arch + "]: " + std::to_string(f.stack_frame) + " bytes stack frame, " +
                         std::to_string(f.spill_stores) + " bytes spill stores, " + std::to_string(f.spill_loads) +
                         " bytes spill loads");
    }
  }
  EXPECT_GT(checked, 0) << "ptxas -v reported no faprobe function";
  for (const std::string& arch : kBuiltArchitectures) EXPECT_EQ(archs.count(arch), 1u) << "no PTX for " << arch;
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST_F(StaticChecks, InstructionProbesUseTheirInstructions) {
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "probes::mma_m16n8k16_kernel"));
  EXPECT_TRUE(uses_instruction(kernels_library(), "LDSM", "probes::ldmatrix_kernel"));
}

TEST_F(StaticChecks, FlashKernelsUseTensorCores) {
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "fa1"));
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "fa2"));
  EXPECT_TRUE(uses_instruction(kernels_library(), "LDSM", "fa2")) << "ldmatrix for Q, K and V fragments";
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "decode_(fp16|bf16)_hdim")) << "the decode attention kernels";
  EXPECT_TRUE(uses_instruction(kernels_library(), "LDSM", "decode_(fp16|bf16)_hdim")) << "ldmatrix for the decode tiles";
}

// --- The checks can fail ---

TEST_F(StaticChecks, PlantedLocalMemoryAndSpillsAreCaught) {
  const std::vector<Function> planted = faprobe_functions(planted_library());
  ASSERT_FALSE(planted.empty()) << "no function in " << FAPROBE_PLANTED_LIBRARY;
  const std::string uses = joined(local_memory_uses(planted));
  for (const std::string& arch : kBuiltArchitectures) {
    for (const char* expected : {"local_array_kernel", "register_spill_kernel"}) {
      for (const char* what : {": STACK:", ": STL in the SASS", ": LDL in the SASS"}) {
        const std::regex line(std::string(expected) + ".*\\[" + arch + ",.*" + what);
        EXPECT_TRUE(std::regex_search(uses, line)) << expected << " " << arch << " " << what << " not reported in:" << uses;
      }
    }
  }

  long spill_stores = 0, stack_frame = 0;
  for (const PtxasFunction& f : ptxas_report(FAPROBE_PLANTED_LIBRARY)) {
    if (f.name.find("register_spill_kernel") != std::string::npos) spill_stores += f.spill_stores;
    if (f.name.find("local_array_kernel") != std::string::npos) stack_frame += f.stack_frame;
  }
  EXPECT_GT(spill_stores, 0) << "ptxas -v reported no spill for the planted register_spill_kernel";
  EXPECT_GT(stack_frame, 0) << "ptxas -v reported no stack frame for the planted local_array_kernel";
}

TEST_F(StaticChecks, MissingInstructionsAndUnmatchedPatternsFail) {
  const ::testing::AssertionResult no_mma = uses_instruction(planted_library(), "HMMA", "planted::");
  EXPECT_FALSE(no_mma);
  EXPECT_NE(std::string(no_mma.message()).find("no HMMA in faprobe::planted::local_array_kernel"), std::string::npos)
      << no_mma.message();
  const ::testing::AssertionResult unmatched = uses_instruction(kernels_library(), "HMMA", "no_such_kernel");
  EXPECT_FALSE(unmatched);
  EXPECT_NE(std::string(unmatched.message()).find("no kernel matching 'no_such_kernel' for sm_80"), std::string::npos)
      << unmatched.message();
  EXPECT_TRUE(uses_instruction(planted_library(), "STL", "planted::local_array_kernel"));
}

// --- The parser on a fixed excerpt of cuobjdump's output (no tool needed) ---

TEST(StaticChecksParser, ReadsResourcesAndInstructionsPerArchitecture) {
  const std::string excerpt =
      "member /x/libk.a:k.cu.o:\n"
      "Fatbin elf code:\n================\narch = sm_80\ncode version = [1,8]\n\n"
      "Resource usage:\n Common:\n  GLOBAL:0\n"
      " Function _ZN7faprobe1kEv:\n"
      "  REG:32 STACK:16 SHARED:0 LOCAL:8 CONSTANT[0]:480 TEXTURE:0 SURFACE:0 SAMPLER:0\n\n"
      "\tcode for sm_80\n"
      "\t\tFunction : _ZN7faprobe1kEv\n"
      "\t.headerflags\t@\"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"\n"
      "        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;   /* 0x00000a00ff017624 */\n"
      "                                                                              /* 0x000fe400078e00ff */\n"
      "        /*05e0*/               @P0 HMMA.16816.F32 R8, R4, R2, R12 ;          /* 0x000000020408023c */\n"
      "        /*0600*/              @!P0 STL.64 [R1], R8 ;                          /* 0x0000000801007387 */\n"
      "        /*0610*/                   EXIT ;                                     /* 0x000000000000794d */\n"
      "\t\t..........\n";
  const std::vector<Function> functions = parse_dump(excerpt);
  ASSERT_EQ(functions.size(), 1u);
  const Function& f = functions.front();
  EXPECT_EQ(f.object, "k.cu.o");
  EXPECT_EQ(f.arch, "sm_80");
  EXPECT_EQ(f.demangled(), "faprobe::k()");
  EXPECT_EQ(f.resources.at("REG"), 32);
  EXPECT_EQ(f.resources.at("STACK"), 16);
  EXPECT_EQ(f.resources.at("LOCAL"), 8);
  ASSERT_EQ(f.sass.size(), 4u);
  EXPECT_EQ(f.sass[1], "HMMA.16816.F32 R8, R4, R2, R12");
  EXPECT_TRUE(f.uses("HMMA"));
  EXPECT_TRUE(f.uses("STL"));
  EXPECT_FALSE(f.uses("LDL"));
  EXPECT_FALSE(f.uses("HMM"));  // opcodes match whole
  EXPECT_EQ(local_memory_uses(functions).size(), 3u);  // STACK, LOCAL, STL
}

}  // namespace
