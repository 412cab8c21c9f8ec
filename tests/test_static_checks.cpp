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
// (kernels/cuda/probes/) use HMMA (mma.sync), LDSM (ldmatrix) and, for sm_90a, UTMALDG and UTMASTG (the
// tensor copies), HGMMA and QGMMA (wgmma), STSM (stmatrix), SYNCS (mbarrier) and ELECT (elect.sync), and the
// fa1, fa2 and decode kernels HMMA.
//
// The FA-3 kernels (kernels/cuda/fa3/, sm_90a only), one test per instantiation of its list (fa3/CMakeLists.txt,
// read through the generated fa3_instantiations.inc) and check, by name fa3_<dtype>_hdim<d>_<block_q>x<block_k>:
// each must be in the library. Each has, in its sm_90a SASS, wgmma (HGMMA.64xNxK; QGMMA.64xNxK for fp8, which
// is what e4m3 wgmma assembles to) and TMA loads (UTMALDG), no local memory, and setmaxnreg kept: USETMAXREG in
// the SASS, and ptxas -v reports no spill and never "(C7508) Potential Performance Loss: 'setmaxnreg' ignored;
// unable to determine register count at entry", which is what it says, and then drops every setmaxnreg of the
// kernel, when the kernel lacks __launch_bounds__ with both the thread count and the blocks per SM (and no
// register cap says it).
//
// The speed a GPU run buys, counted without one: ptxas serializes no kernel's wgmma ("Potential Performance
// Loss: wgmma.mma_async instructions are serialized", C7510-C7520), and the steady-state loop of every FA-2 and
// FA-3 instantiation (steady_state_loop: the smallest loop of the SASS's control-flow graph that holds both a
// tensor-core MMA and a MUFU.EX2) keeps its instruction budget, has no range check around MUFU.EX2 (the
// non-.ftz ex2), has FMNMX and no BSSY, and, in FA-3, at least a quarter of its MUFU.EX2 between the two
// wgmma waits of the overlap. Planted kernels of FA-2's and FA-3's own bodies with a Defect that loses speed
// show each of these checks failing.
//
// The decode kernels' steady-state loops (decode_<dtype>_hdim<d> and decode_paged_<dtype>_hdim<d>, both
// architectures) keep copies in flight (every cp.async.wait_group in the loop leaves a group outstanding),
// and the paged ones find pages by shifts (no I2F, F2I, MUFU.RCP) with at most two block-table loads (LDG) per
// tile; planted decode kernels that drain the copies before each tile, divide by the page size, or read the
// table from global memory per chunk are caught.
//
// Each FA-3 kernel also enters with exactly the registers its setmaxnreg budget assumes: fa3.cuh's
// Traits::registers_at_entry (isa::registers_at_entry of the CTA's threads and CTAs per SM: 168 for two consumer
// warpgroups, 128 for three), as REG in
// `cuobjdump -res-usage` and as "Used N registers" from ptxas -v; so does every other sm_90a kernel of the
// fa3 namespace that trades registers with setmaxnreg (fa3_transpose_v, the e4m3 prologue, does not).
//
// The planted defects (static_checks_planted.cu: local memory, register spills, no tensor cores, setmaxnreg
// ignored, FA-3's register budget under launch bounds that allot fewer registers, and the lost speed above)
// show that each check can fail; the planted setmaxnreg kernel's twin with launch bounds, that the setmaxnreg
// checks pass a kernel that keeps it, and the budget kernel's twin with fa3's own bounds, that the register
// check passes it.
//
// cuobjdump (with the nvdisasm it runs for -sass) is found as $FAPROBE_CUOBJDUMP, else next to nvcc,
// else in the pip target scripts/test installs it into (build/tools/cuda-binary-tools, from PyPI's
// nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm), else on PATH. Not finding it is a failure, not a skip:
// in a CUDA build these checks are part of the suite. Its output for a library is cached next to this
// binary (disassembly takes about a second per object file, and CTest runs each test in its own process).
#include <cxxabi.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/fa3/fa3.cuh"

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

// Held while a cache file below is read or made, so that concurrent test processes (ctest -j) make it once:
// the others wait and read it instead of each running cuobjdump or ptxas over the whole library.
class CacheLock {
 public:
  explicit CacheLock(const fs::path& cache)
      : fd_(::open((cache.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);  // without the lock the cache still works, made more than once
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_;
};

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
  const CacheLock lock(cache);
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

// A symbol demangled ("faprobe::cuda::fa2::fa2_bf16_hdim128(faprobe::cuda::fa2::Params)"), or as it is.
std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && text ? std::string(text.get()) : name;
}

struct Function {
  std::string object;  // the archive member, "matrix_probes.cu.o"
  std::string arch;    // "sm_80", "sm_90a"
  std::string name;    // mangled
  bool has_resources = false;
  std::map<std::string, long> resources;  // REG, STACK, SHARED, LOCAL, ... from -res-usage
  std::vector<std::string> sass;          // instructions without address and predicate: "HMMA.16816.F32 R8, R4, R2, R12"
  std::vector<unsigned long> addresses;   // each instruction's address ("/*05e0*/")
  std::vector<bool> predicated;           // whether it runs under a predicate ("@P0", "@!P2")

  std::string id() const { return demangled() + " [" + arch + ", " + object + "]"; }
  std::string demangled() const { return demangle(name); }
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
  // Whether some instruction matches pattern (searched): R"(^HGMMA\.64x\d+x\d+)" for any wgmma shape.
  bool matches(const std::regex& pattern) const {
    for (const std::string& instruction : sass) {
      if (std::regex_search(instruction, pattern)) return true;
    }
    return false;
  }
};

using FunctionKey = std::tuple<std::string, std::string, std::string>;  // object, arch, name

// Parses `cuobjdump -res-usage -sass` of an archive: "member lib.a:obj.o:" opens an object file, "arch =
// sm_80" / "code for sm_80" the architecture, " Function NAME:" and the next line the resource usage,
// "\t\tFunction : NAME" the SASS, whose instruction lines read "/*0580*/  @P0 LDSM.16.M88.4 R8, [R4] ;".
// One SASS line, "/*05e0*/   @P0 HMMA.16816.F32 R8, R4, R2, R12 ;  /* 0x0000... */": its address, whether a
// predicate guards it, and the instruction without either. False for other lines (the encoding's second half,
// "/* 0x000fe4... */"). Written out rather than as a regex: a library's dump has ~400,000 such lines, and each
// test process reads them all.
bool parse_instruction(const std::string& line, unsigned long& address, bool& predicated, std::string& text) {
  const std::size_t open = line.find_first_not_of(" \t");
  if (open == std::string::npos || line.compare(open, 2, "/*") != 0) return false;
  const std::size_t close = line.find("*/", open + 2);
  if (close == std::string::npos || close == open + 2) return false;
  const std::string hex = line.substr(open + 2, close - open - 2);
  if (hex.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  std::size_t start = line.find_first_not_of(" \t", close + 2);
  if (start == std::string::npos) return false;
  predicated = line[start] == '@';
  if (predicated) {
    start = line.find_first_of(" \t", start);
    if (start == std::string::npos || (start = line.find_first_not_of(" \t", start)) == std::string::npos) return false;
  }
  const std::size_t semicolon = line.find(';', start);
  if (semicolon == std::string::npos) return false;
  const std::size_t last = line.find_last_not_of(" \t", semicolon - 1);
  text = last == std::string::npos || last < start ? std::string() : line.substr(start, last + 1 - start);
  address = std::stoul(hex, nullptr, 16);
  return true;
}

std::vector<Function> parse_dump(const std::string& text) {
  static const std::regex member(R"(^member .*:([^:]+):\s*$)");
  static const std::regex arch(R"(^\s*(?:arch =|code for) (sm_\w+)\s*$)");
  static const std::regex resource_function(R"(^ Function ([^ :]+):\s*$)");
  static const std::regex resource_value(R"(([A-Z_]+(?:\[\d+\])?):(\d+))");
  static const std::regex sass_function(R"(^\s*Function : (\S+)\s*$)");
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
      unsigned long address = 0;
      bool predicated = false;
      std::string instruction;
      if (sass_for != nullptr && parse_instruction(line, address, predicated, instruction)) {
        sass_for->addresses.push_back(address);
        sass_for->predicated.push_back(predicated);
        sass_for->sass.push_back(std::move(instruction));
      }
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

// --- The steady-state loop of a kernel, read from its SASS ---
//
// The control-flow graph of one function: basic blocks split at branch targets and after each branch and exit;
// a BRA names its target's address ("BRA 0x2f20"), and one without a predicate (like an EXIT without one) does
// not fall through, except BRA.DIV and BRA.CONV (taken only on a diverged or converged warp). Loops are natural loops: for a back edge u → h (h dominates u), the blocks that reach u
// without passing h; the back edges to one header make one loop. A loop's own instructions are those of its
// blocks in no smaller loop inside it: the mbarrier try-wait spins, which run once per wait that finds the
// phase incomplete, not once per key block, are loops of their own.
//
// The steady-state loop of an attention kernel is the smallest loop whose own instructions hold both a tensor
// core MMA (HMMA, HGMMA, QGMMA) and an exponential (MUFU.EX2): one key block of its mask-free loop (the masked
// blocks run in a larger copy of it, with the mask's arithmetic).
struct LoopCounts {
  bool found = false;
  unsigned long header = 0;  // the address the loop starts at
  int instructions = 0, mma = 0, ex2 = 0, fmnmx = 0, bssy = 0;
  int range_checks = 0;       // FSETP.GEU ... -126: the test plain ex2.approx wraps each MUFU.EX2 in
  int ex2_between_waits = 0;  // MUFU.EX2 after a WARPGROUP.DEPBAR.LE gsb0, 0x1 and before the 0x0 that follows
  // The copies (the decode kernels): cp.async (LDGSTS), other global loads (LDG), integer division's
  // conversions and reciprocal (I2F, F2I, MUFU.RCP), shuffles, and each cp.async.wait_group's count of groups
  // left in flight (DEPBAR.LE SB0, N).
  int ldgsts = 0, ldg = 0, i2f = 0, f2i = 0, rcp = 0, shfl = 0;
  std::vector<int> async_waits;
};

std::string opcode_of(const std::string& instruction) { return instruction.substr(0, instruction.find(' ')); }
bool has_prefix(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

LoopCounts steady_state_loop(const Function& f) {
  const std::size_t n = f.sass.size();
  std::map<unsigned long, std::size_t> index_of;
  for (std::size_t i = 0; i < n; ++i) index_of[f.addresses[i]] = i;
  static const std::regex target(R"(0x([0-9a-f]+))");
  std::vector<long> branch_to(n, -1);  // an instruction's branch target, as an instruction index
  std::set<std::size_t> leaders{0};
  for (std::size_t i = 0; i < n; ++i) {
    const std::string op = opcode_of(f.sass[i]);
    std::smatch found;
    if (has_prefix(op, "BRA") && std::regex_search(f.sass[i], found, target)) {
      const auto at = index_of.find(std::stoul(found[1], nullptr, 16));
      if (at != index_of.end()) {
        branch_to[i] = static_cast<long>(at->second);
        leaders.insert(at->second);
      }
    }
    if (has_prefix(op, "BRA") || has_prefix(op, "EXIT") || has_prefix(op, "RET") || has_prefix(op, "BRX"))
      if (i + 1 < n) leaders.insert(i + 1);
  }
  const std::vector<std::size_t> starts(leaders.begin(), leaders.end());
  const std::size_t blocks = starts.size();
  std::vector<std::size_t> block_of(n);
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t i = starts[b]; i < (b + 1 < blocks ? starts[b + 1] : n); ++i) block_of[i] = b;
  const auto end_of = [&](std::size_t b) { return b + 1 < blocks ? starts[b + 1] : n; };
  std::vector<std::vector<std::size_t>> successors(blocks), predecessors(blocks);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t last = end_of(b) - 1;
    const std::string op = opcode_of(f.sass[last]);
    // BRA.DIV and BRA.CONV branch only when the warp is diverged (converged): the guard ptxas puts before a
    // .sync warp instruction (a shuffle, a warp barrier), whose out-of-line path branches back. Without a
    // predicate they still fall through.
    const bool conditional = f.predicated[last] || has_prefix(op, "BRA.DIV") || has_prefix(op, "BRA.CONV");
    const bool stops = !conditional && (has_prefix(op, "BRA") || has_prefix(op, "EXIT") || has_prefix(op, "RET") ||
                                        has_prefix(op, "BRX"));
    if (branch_to[last] >= 0) successors[b].push_back(block_of[static_cast<std::size_t>(branch_to[last])]);
    if (!stops && end_of(b) < n) successors[b].push_back(b + 1);
  }
  std::vector<bool> reachable(blocks, false);
  std::vector<std::size_t> stack{0};
  reachable[0] = true;
  while (!stack.empty()) {
    const std::size_t b = stack.back();
    stack.pop_back();
    for (std::size_t next : successors[b]) {
      if (reachable[next]) continue;
      reachable[next] = true;
      stack.push_back(next);
    }
  }
  for (std::size_t b = 0; b < blocks; ++b)
    if (reachable[b])
      for (std::size_t next : successors[b]) predecessors[next].push_back(b);
  // Dominators, iterated to the fixed point over the reachable blocks.
  std::vector<std::vector<bool>> dominators(blocks, std::vector<bool>(blocks, true));
  dominators[0].assign(blocks, false);
  dominators[0][0] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = 1; b < blocks; ++b) {
      if (!reachable[b]) continue;
      std::vector<bool> next(blocks, true);
      for (std::size_t p : predecessors[b])
        for (std::size_t i = 0; i < blocks; ++i) next[i] = next[i] && dominators[p][i];
      next[b] = true;
      if (next != dominators[b]) {
        dominators[b] = std::move(next);
        changed = true;
      }
    }
  }
  std::map<std::size_t, std::set<std::size_t>> loops;  // header → body
  for (std::size_t u = 0; u < blocks; ++u) {
    if (!reachable[u]) continue;
    for (std::size_t h : successors[u]) {
      if (!dominators[u][h]) continue;
      std::set<std::size_t>& body = loops[h];
      body.insert(h);
      std::vector<std::size_t> work{u};
      while (!work.empty()) {
        const std::size_t b = work.back();
        work.pop_back();
        if (body.insert(b).second)
          for (std::size_t p : predecessors[b]) work.push_back(p);
      }
    }
  }
  LoopCounts best;
  for (const auto& [header, body] : loops) {
    std::set<std::size_t> inner;
    for (const auto& [other_header, other] : loops)
      if (other_header != header && other.size() < body.size() &&
          std::includes(body.begin(), body.end(), other.begin(), other.end()))
        inner.insert(other.begin(), other.end());
    LoopCounts counts;
    counts.found = true;
    counts.header = f.addresses[starts[header]];
    int wait_state = 0;  // 1 after DEPBAR.LE gsb0, 0x1
    for (std::size_t b : body) {
      if (inner.count(b) != 0) continue;
      for (std::size_t i = starts[b]; i < end_of(b); ++i) {
        const std::string& text = f.sass[i];
        const std::string op = opcode_of(text);
        ++counts.instructions;
        if (has_prefix(op, "HMMA") || has_prefix(op, "HGMMA") || has_prefix(op, "QGMMA")) ++counts.mma;
        if (has_prefix(op, "MUFU.EX2")) {
          ++counts.ex2;
          if (wait_state == 1) ++counts.ex2_between_waits;
        }
        if (has_prefix(op, "FMNMX")) ++counts.fmnmx;
        if (has_prefix(op, "BSSY")) ++counts.bssy;
        if (has_prefix(op, "FSETP.GEU") && text.find("-126") != std::string::npos) ++counts.range_checks;
        if (has_prefix(op, "WARPGROUP.DEPBAR")) wait_state = text.find("0x1") != std::string::npos ? 1 : 0;
        if (has_prefix(op, "LDGSTS")) ++counts.ldgsts;
        if (op == "LDG" || has_prefix(op, "LDG.")) ++counts.ldg;
        if (has_prefix(op, "I2F")) ++counts.i2f;  // I2F, I2F.U32.RP, I2FP.F32.S32
        if (has_prefix(op, "F2I")) ++counts.f2i;
        if (has_prefix(op, "MUFU.RCP")) ++counts.rcp;
        if (has_prefix(op, "SHFL")) ++counts.shfl;
        if (op == "DEPBAR.LE" && text.find("SB0") != std::string::npos)
          counts.async_waits.push_back(static_cast<int>(std::stol(text.substr(text.rfind(',') + 1), nullptr, 16)));
      }
    }
    if (counts.mma == 0 || counts.ex2 == 0) continue;
    if (!best.found || counts.instructions < best.instructions) best = counts;
  }
  return best;
}

std::string describe(const LoopCounts& loop) {
  if (!loop.found) return "no loop holds both an MMA and a MUFU.EX2";
  std::ostringstream text;
  text << "loop at 0x" << std::hex << loop.header << std::dec << ": " << loop.instructions << " instructions, "
       << loop.mma << " MMA, " << loop.ex2 << " MUFU.EX2 (" << loop.ex2_between_waits << " between the waits), "
       << loop.fmnmx << " FMNMX, " << loop.bssy << " BSSY, " << loop.range_checks << " ex2 range checks";
  return text.str();
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
  bool setmaxnreg_ignored = false;  // ptxas said "(C7508) ... 'setmaxnreg' ignored" for this entry
  long registers = -1;              // "Used N registers" (entries only; -1 for a device function)
  std::string wgmma_serialized = "-";  // the code of ptxas's "wgmma.mma_async instructions are serialized" note
};

// ptxas's note that it serialized a function's wgmma (each waits for the one before: no asynchrony left), with
// the reason's code: C7510-C7515 and C7520 name what made it (registers of a wgmma in flight touched,
// insufficient registers, a wait in divergent code...). It names the function.
const std::regex kWgmmaSerialized(
    R"(\((C75\d\d)\) Potential Performance Loss: wgmma\.mma_async instructions are serialized.*function '([^']+)')");

// ptxas's note that it dropped setmaxnreg: an "info" line since CUDA 13, a warning before. It names no
// function, so a PTX file whose output has it and that holds several entries is compiled again one entry
// at a time (ptxas -e NAME) to find whose it is.
const std::regex kSetmaxnregIgnored(R"(\(C7508\)|'setmaxnreg' ignored)");

// Extracts the PTX of every object (`cuobjdump -xptx all`, which also lists the ptxas options each was
// built with) and compiles each again with `ptxas -v` and those options, collecting "Function properties"
// and the entries whose setmaxnreg ptxas ignored.
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
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex used_registers(R"(Used (\d+) registers)");
  std::vector<PtxasFunction> report;
  std::stringstream lines(listing.output);
  std::smatch match;
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_search(line, match, extracted)) continue;
    const std::string file = match[1], options = match[2];
    const std::string ptx = (directory / file).string();
    std::smatch arch;
    const std::string arch_name = std::regex_search(options, arch, arch_option) ? std::string(arch[1]) : "?";
    const std::string command = shell_quoted(FAPROBE_PTXAS) + " -v " + options;
    const CommandResult ptxas = run_command(command + " " + shell_quoted(ptx) + " -o /dev/null");
    EXPECT_EQ(ptxas.status, 0) << "ptxas -v " << options << " " << file << ":\n" << ptxas.output.substr(0, 4000);
    const std::size_t first = report.size();
    std::set<std::string> entries;
    std::stringstream ptxas_lines(ptxas.output);
    PtxasFunction* open = nullptr;
    std::string compiling;  // the entry whose "Used N registers" line comes next
    std::map<std::string, std::string> serialized;  // function → the code of ptxas's note
    for (std::string out; std::getline(ptxas_lines, out);) {
      std::smatch found;
      if (std::regex_search(out, found, kWgmmaSerialized)) {
        serialized[found[2]] = found[1];
      } else if (std::regex_search(out, found, entry)) {
        entries.insert(found[1]);
        compiling = found[1];
      } else if (std::regex_search(out, found, used_registers)) {
        for (std::size_t i = report.size(); i > first; --i) {
          if (report[i - 1].name != compiling) continue;
          report[i - 1].registers = std::stol(found[1]);
          break;
        }
        compiling.clear();
      } else if (std::regex_search(out, found, properties)) {
        report.push_back({arch_name, found[1]});
        open = &report.back();
      } else if (open != nullptr && std::regex_search(out, found, counts)) {
        open->stack_frame = std::stol(found[1]);
        open->spill_stores = std::stol(found[2]);
        open->spill_loads = std::stol(found[3]);
        open = nullptr;
      }
    }
    for (std::size_t i = first; i < report.size(); ++i) {
      const auto note = serialized.find(report[i].name);
      if (note != serialized.end()) report[i].wgmma_serialized = note->second;
    }
    if (!std::regex_search(ptxas.output, kSetmaxnregIgnored)) continue;
    for (std::size_t i = first; i < report.size(); ++i) {
      PtxasFunction& f = report[i];
      if (entries.count(f.name) == 0) continue;  // a device function's properties: ptxas -e takes entries only
      if (entries.size() == 1) {
        f.setmaxnreg_ignored = true;
        continue;
      }
      const CommandResult alone =
          run_command(command + " -e " + shell_quoted(f.name) + " " + shell_quoted(ptx) + " -o /dev/null");
      EXPECT_EQ(alone.status, 0) << "ptxas -v " << options << " -e " << f.name << " " << file << ":\n"
                                 << alone.output.substr(0, 4000);
      f.setmaxnreg_ignored = std::regex_search(alone.output, kSetmaxnregIgnored);
    }
  }
  fs::remove_all(directory);
  return report;
}

// ptxas_report(library) for every PTX file, cached like dump_library (same key, "<library>.ptxas.txt"; one line
// per function: arch, name, stack frame, spill stores, spill loads, setmaxnreg ignored, registers, wgmma
// serialized), so that the many
// tests that read it (each its own process under CTest) compile the library's PTX once between builds.
std::vector<PtxasFunction> cached_ptxas_report(const std::string& library) {
  std::error_code error;
  const auto size = fs::file_size(library, error);
  if (error || cuobjdump().empty()) return ptxas_report(library);
  const auto modified = fs::last_write_time(library).time_since_epoch().count();
  const std::string key = "faprobe ptxas cache v3: " + library + " " + std::to_string(size) + " " +
                          std::to_string(modified) + " " + cuobjdump() + " " + FAPROBE_PTXAS;
  const fs::path cache = fs::path(FAPROBE_STATIC_CHECKS_CACHE_DIR) / (fs::path(library).filename().string() + ".ptxas.txt");
  const CacheLock lock(cache);
  if (std::ifstream in(cache); in) {
    std::string first_line;
    std::getline(in, first_line);
    if (first_line == key) {
      std::vector<PtxasFunction> report;
      PtxasFunction f;
      while (in >> f.arch >> f.name >> f.stack_frame >> f.spill_stores >> f.spill_loads >> f.setmaxnreg_ignored >>
             f.registers >> f.wgmma_serialized)
        report.push_back(f);
      return report;
    }
  }
  const std::vector<PtxasFunction> report = ptxas_report(library);
  if (::testing::Test::HasFailure()) return report;  // never cache a failed compile
  const fs::path partial = cache.string() + "." + std::to_string(::getpid());
  {
    std::ofstream out(partial);
    out << key << '\n';
    for (const PtxasFunction& f : report)
      out << f.arch << ' ' << f.name << ' ' << f.stack_frame << ' ' << f.spill_stores << ' ' << f.spill_loads << ' '
          << f.setmaxnreg_ignored << ' ' << f.registers << ' ' << f.wgmma_serialized << '\n';
  }
  fs::rename(partial, cache, error);
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

// Makes the caches of both libraries' cuobjdump and ptxas output, so that the other tests only read them
// (tests/CMakeLists.txt runs this first, as a CTest fixture).
TEST(StaticChecksCaches, AreMadeOnce) {
  ASSERT_FALSE(cuobjdump().empty());
  EXPECT_FALSE(kernels_library().empty());
  EXPECT_FALSE(planted_library().empty());
  EXPECT_FALSE(cached_ptxas_report(FAPROBE_KERNELS_LIBRARY).empty());
  EXPECT_FALSE(cached_ptxas_report(FAPROBE_PLANTED_LIBRARY).empty());
}

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
  for (const PtxasFunction& f : cached_ptxas_report(FAPROBE_KERNELS_LIBRARY)) {
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

// ptxas serialized no kernel's wgmma (a serialized kernel runs each wgmma after the one before: FA-3's
// overlap is gone, silently but for this note).
std::vector<std::string> serialized_wgmma(const std::vector<PtxasFunction>& report) {
  std::vector<std::string> problems;
  for (const PtxasFunction& f : report)
    if (f.wgmma_serialized != "-")
      problems.push_back(demangle(f.name) + " [" + f.arch + "]: ptxas (" + f.wgmma_serialized +
                         ") Potential Performance Loss: wgmma.mma_async instructions are serialized");
  return problems;
}

TEST_F(StaticChecks, PtxasSerializesNoWgmma) {
  const std::vector<PtxasFunction> report = cached_ptxas_report(FAPROBE_KERNELS_LIBRARY);
  ASSERT_FALSE(report.empty());
  EXPECT_TRUE(serialized_wgmma(report).empty()) << joined(serialized_wgmma(report));
}

TEST_F(StaticChecks, InstructionProbesUseTheirInstructions) {
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "probes::mma_m16n8k16_kernel"));
  EXPECT_TRUE(uses_instruction(kernels_library(), "LDSM", "probes::ldmatrix_kernel"));
  // TMA exists from sm_90 only: the sm_80 build of the tensor-copy probe is a trapping stub.
  EXPECT_TRUE(uses_instruction(kernels_library(), "UTMALDG", "probes::tma_copy_kernel", {"sm_90a"}));
  EXPECT_TRUE(uses_instruction(kernels_library(), "UTMASTG", "probes::tma_copy_kernel", {"sm_90a"}));
  // Hopper's wgmma (HGMMA for f16 / bf16, QGMMA for e4m3), stmatrix, mbarrier and elect.sync: sm_90a only too.
  EXPECT_TRUE(uses_instruction(kernels_library(), "HGMMA", "probes::wgmma_(f16|bf16)_", {"sm_90a"}));
  EXPECT_TRUE(uses_instruction(kernels_library(), "QGMMA", "probes::wgmma_e4m3_", {"sm_90a"}));
  EXPECT_TRUE(uses_instruction(kernels_library(), "STSM", "probes::stmatrix_x4_kernel", {"sm_90a"}));
  EXPECT_TRUE(uses_instruction(kernels_library(), "SYNCS", "probes::mbarrier_phases_kernel", {"sm_90a"}));
  EXPECT_TRUE(uses_instruction(kernels_library(), "ELECT", "probes::mbarrier_phases_kernel", {"sm_90a"}));
}

TEST_F(StaticChecks, FlashKernelsUseTensorCores) {
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "fa1"));
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "fa2"));
  EXPECT_TRUE(uses_instruction(kernels_library(), "LDSM", "fa2")) << "ldmatrix for Q, K and V fragments";
  EXPECT_TRUE(uses_instruction(kernels_library(), "HMMA", "decode_(fp16|bf16)_hdim")) << "the decode attention kernels";
  EXPECT_TRUE(uses_instruction(kernels_library(), "LDSM", "decode_(fp16|bf16)_hdim")) << "ldmatrix for the decode tiles";
}

// --- The FA-3 kernels (kernels/cuda/fa3/): Hopper only, built for sm_90a alone ---

const std::string kHopper = "sm_90a";

// The functions for arch whose demangled name has `name` as a whole word ("fa3_bf16_hdim128", not
// "fa3_bf16_hdim128_combine"), from cuobjdump or from ptxas.
std::regex named(const std::string& name) { return std::regex("\\b" + name + "\\b"); }

std::vector<const Function*> functions_named(const std::vector<Function>& functions, const std::string& name,
                                             const std::string& arch) {
  std::vector<const Function*> found;
  for (const Function& f : functions) {
    if (f.arch == arch && std::regex_search(f.demangled(), named(name))) found.push_back(&f);
  }
  return found;
}

std::vector<const PtxasFunction*> ptxas_named(const std::vector<PtxasFunction>& report, const std::string& name,
                                              const std::string& arch) {
  std::vector<const PtxasFunction*> found;
  for (const PtxasFunction& f : report) {
    if (f.arch == arch && std::regex_search(demangle(f.name), named(name))) found.push_back(&f);
  }
  return found;
}

// setmaxnreg kept in every sm_90a kernel named `name`: USETMAXREG in its SASS, and no C7508 from ptxas for
// it. Empty when kept; never empty for a kernel that is not there.
std::vector<std::string> setmaxnreg_problems(const std::vector<Function>& functions,
                                             const std::vector<PtxasFunction>& report, const std::string& name) {
  std::vector<std::string> problems;
  const std::vector<const Function*> compiled = functions_named(functions, name, kHopper);
  if (compiled.empty()) problems.push_back("no kernel named " + name + " for " + kHopper);
  for (const Function* f : compiled) {
    if (!f->uses("USETMAXREG")) problems.push_back("no USETMAXREG (setmaxnreg) in " + f->id());
  }
  const std::vector<const PtxasFunction*> reported = ptxas_named(report, name, kHopper);
  if (reported.empty()) problems.push_back("ptxas -v reported nothing for " + name + " [" + kHopper + "]");
  for (const PtxasFunction* f : reported) {
    if (f->setmaxnreg_ignored) {
      problems.push_back(demangle(f->name) + " [" + f->arch + "]: ptxas: (C7508) 'setmaxnreg' ignored; unable to "
                         "determine register count at entry (__launch_bounds__ needs the thread count and the "
                         "blocks per SM)");
    }
  }
  return problems;
}

// --- Registers at entry: what a setmaxnreg budget assumes ---

namespace fa3 = faprobe::cuda::fa3;
namespace isa = faprobe::cuda::isa;

// FA-3's instantiations (kernels/cuda/fa3/CMakeLists.txt's list, through its generated fa3_instantiations.inc):
// each kernel's name and the registers it enters with, from its Traits (isa::registers_at_entry of its threads
// and CTAs per SM), which its setmaxnreg budget adds up to: 168 for two consumer warpgroups, 128 for three.
struct Fa3Instance {
  std::string name;         // fa3_<dtype>_hdim<d>_<block_q>x<block_k>
  bool fp8;
  long registers_at_entry;
};
const std::vector<Fa3Instance>& fa3_instances() {
  static const std::vector<Fa3Instance> list = {
#define FAPROBE_FA3_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal)                     \
  {"fa3_" #dtype "_hdim" #D "_" #BQ "x" #BK, std::string(#dtype) == "fp8_e4m3",                    \
   long{fa3::TraitsOf<isa::E, D, BQ, BK>::registers_at_entry}},
#include "cuda/fa3/fa3_instantiations.inc"
#undef FAPROBE_FA3_INSTANTIATION
  };
  return list;
}
static_assert(fa3::Traits<128, 2, 128, 128>::registers_at_entry == 168 && fa3::Traits<64, 2, 192, 128>::registers_at_entry == 128,
              "two consumer warpgroups enter with 168 registers, three with 128");
// The budget of an FA-3 kernel by its (demangled) name; 0 when it is none of the list's.
long fa3_budget_of(const std::string& demangled) {
  for (const Fa3Instance& i : fa3_instances())
    if (std::regex_search(demangled, named(i.name))) return i.registers_at_entry;
  return 0;
}

// Each kernel of `kernels` entering with other than `expected` registers per thread, one line per witness:
// REG in its `cuobjdump -res-usage` line, and "Used N registers" from ptxas -v on its PTX (report); each
// line names the kernel, the count found and the count expected. A kernel absent from either tool's output
// is a problem too, and so is an empty list: the check never passes vacuously.
std::vector<std::string> register_budget_problems(const std::vector<const Function*>& kernels,
                                                  const std::vector<PtxasFunction>& report, long expected) {
  std::vector<std::string> problems;
  if (kernels.empty())
    problems.push_back("no kernel to check against " + std::to_string(expected) + " registers at entry");
  const std::string expectation =
      ", expected " + std::to_string(expected) + " (the registers its setmaxnreg budget assumes)";
  for (const Function* f : kernels) {
    const auto reg = f->resources.find("REG");
    if (reg == f->resources.end()) {
      problems.push_back(f->id() + ": no REG in cuobjdump -res-usage");
    } else if (reg->second != expected) {
      problems.push_back(f->id() + ": " + std::to_string(reg->second) +
                         " registers at entry (cuobjdump -res-usage REG)" + expectation);
    }
    int reported = 0;
    for (const PtxasFunction& p : report) {
      if (p.name != f->name || p.arch != f->arch) continue;
      ++reported;
      if (p.registers != expected) {
        problems.push_back(f->demangled() + " [" + p.arch + "]: ptxas -v: Used " + std::to_string(p.registers) +
                           " registers" + expectation);
      }
    }
    if (reported == 0) problems.push_back("ptxas -v reported nothing for " + f->id());
  }
  return problems;
}

struct HopperKernel {
  std::string name;         // the __global__ function
  std::string mma;          // its wgmma's SASS opcode: HGMMA (fp16, bf16) or QGMMA (fp8)
  bool required;            // absent from the library: a failure, or (fp8, until it lands) a skip
  long registers_at_entry;  // what its Traits' register budget assumes
};

std::ostream& operator<<(std::ostream& out, const HopperKernel& kernel) { return out << kernel.name; }

std::vector<HopperKernel> fa3_kernels() {
  std::vector<HopperKernel> kernels;
  for (const Fa3Instance& i : fa3_instances())
    kernels.push_back({i.name, i.fp8 ? "QGMMA" : "HGMMA", true, i.registers_at_entry});
  return kernels;
}

class Fa3Kernel : public StaticChecks, public ::testing::WithParamInterface<HopperKernel> {
 protected:
  void SetUp() override {
    StaticChecks::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    const HopperKernel& kernel = GetParam();
    if (!functions_named(kernels_library(), kernel.name, kHopper).empty()) return;
    std::string fa3_names;
    for (const Function& f : kernels_library()) {
      if (f.arch == kHopper && f.demangled().find("fa3") != std::string::npos) fa3_names += "\n  " + f.demangled();
    }
    if (!kernel.required) {
      GTEST_SKIP() << kernel.name << " is not in " << FAPROBE_KERNELS_LIBRARY << " for " << kHopper
                   << " (the FA-3 fp8 kernels are checked once they are built)";
    }
    FAIL() << "no kernel named " << kernel.name << " for " << kHopper << " in " << FAPROBE_KERNELS_LIBRARY
           << " (kernels/cuda/fa3/CMakeLists.txt: one __global__ function per instantiation). FA-3 functions there:"
           << (fa3_names.empty() ? std::string(" none") : fa3_names);
  }
};

// In the SASS: wgmma (m64nNkK), TMA loads, and no local memory (-res-usage's STACK and LOCAL, LDL/STL).
TEST_P(Fa3Kernel, UsesWgmmaAndTmaWithoutLocalMemory) {
  const HopperKernel& kernel = GetParam();
  const std::regex wgmma("^" + kernel.mma + R"(\.64x\d+x\d+)");  // "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], ..."
  std::vector<std::string> problems;
  for (const Function* f : functions_named(kernels_library(), kernel.name, kHopper)) {
    if (!f->matches(wgmma)) problems.push_back("no " + kernel.mma + ".64xNxK (wgmma) in " + f->id());
    if (!f->uses("UTMALDG")) problems.push_back("no UTMALDG (TMA load) in " + f->id());
    for (const std::string& use : local_memory_uses({*f})) problems.push_back(use);
  }
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// ptxas -v on the kernel's PTX: no stack frame, no spills, setmaxnreg not ignored; and USETMAXREG in the SASS.
TEST_P(Fa3Kernel, KeepsSetmaxnregAndSpillsNothing) {
  const HopperKernel& kernel = GetParam();
  const std::vector<PtxasFunction> report = cached_ptxas_report(FAPROBE_KERNELS_LIBRARY);
  std::vector<std::string> problems = setmaxnreg_problems(kernels_library(), report, kernel.name);
  for (const PtxasFunction* f : ptxas_named(report, kernel.name, kHopper)) {
    if (f->stack_frame != 0 || f->spill_stores != 0 || f->spill_loads != 0) {
      problems.push_back(demangle(f->name) + " [" + f->arch + "]: " + std::to_string(f->stack_frame) +
                         " bytes stack frame, " + std::to_string(f->spill_stores) + " bytes spill stores, " +
                         std::to_string(f->spill_loads) + " bytes spill loads");
    }
  }
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// The registers at entry (REG, and ptxas's "Used N registers") are exactly what the setmaxnreg budget of its
// Traits assumes: 168 for three warpgroups at one CTA per SM, 128 for four.
TEST_P(Fa3Kernel, EntersWithTheRegistersItsSetmaxnregBudgetAssumes) {
  const HopperKernel& kernel = GetParam();
  const std::vector<std::string> problems =
      register_budget_problems(functions_named(kernels_library(), kernel.name, kHopper),
                               cached_ptxas_report(FAPROBE_KERNELS_LIBRARY), kernel.registers_at_entry);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// --- The steady-state loops: the speed a GPU run buys, counted without one ---
//
// The budgets of the steady-state loop (steady_state_loop: one key block of the mask-free loop), set from what
// the kernels compile to with nvcc 13.0 (a margin of about 5 %): FA-3 in instructions per MUFU.EX2 (the
// softmax's work per score, all that is not the tensor cores' or TMA's), FA-2 in non-MMA instructions per
// mma.sync. Before the softmax was shortened they were 19.4, 20.5 and 29.3 (FA-3 16-bit d 64, 128, 256) and
// 11.9, 9.8 and 7.6 (FA-2 d 64, 128, 256, sm_90a); kernels/cuda/common/online_softmax.cuh has the budget per score.
struct LoopBudget {
  double per_unit;      // instructions per MUFU.EX2 (FA-3) or non-MMA instructions per MMA (FA-2), at most
  bool per_exp;         // which of the two
  bool overlap;         // FA-3: at least a quarter of the MUFU.EX2 between the two wgmma waits
};

LoopBudget fa3_loop_budget(bool fp8, int head_dim) {
  // 16-bit: 7.5, 8.7 (128x128; 7.9 at 128x176) and 17.1 (128x64; 14.9 at 128x80); e4m3: 6.8, 7.8, 9.6.
  const double budget = fp8 ? (head_dim == 64 ? 7.1 : head_dim == 128 ? 8.2 : 10.1)
                            : (head_dim == 64 ? 7.9 : head_dim == 128 ? 9.2 : 17.9);
  return {budget, true, true};
}

LoopBudget fa2_loop_budget(int head_dim) {
  // 3.8, 3.2 and 2.9 on sm_80 and sm_90a.
  return {head_dim == 64 ? 4.0 : head_dim == 128 ? 3.4 : 3.0, false, false};
}

// What is wrong with a kernel's steady-state loop: no such loop, more instructions than its budget, ex2's range
// check, no FMNMX, a BSSY (a divergent branch), and, where the budget asks, too few exponentials between the
// two waits of FA-3's overlap. Empty when nothing is.
std::vector<std::string> loop_problems(const Function& f, const LoopBudget& budget) {
  const LoopCounts loop = steady_state_loop(f);
  if (!loop.found) return {f.id() + ": " + describe(loop)};
  std::vector<std::string> problems;
  const std::string where = f.id() + " (" + describe(loop) + ")";
  const double per_unit = budget.per_exp ? double(loop.instructions) / loop.ex2 : double(loop.instructions - loop.mma) / loop.mma;
  if (per_unit > budget.per_unit) {
    std::ostringstream text;
    text.precision(3);
    text << where << ": " << per_unit << (budget.per_exp ? " instructions per MUFU.EX2" : " non-MMA instructions per MMA")
         << ", the budget is " << budget.per_unit;
    problems.push_back(text.str());
  }
  if (loop.range_checks > 0)
    problems.push_back(where + ": " + std::to_string(loop.range_checks) +
                       " range checks around MUFU.EX2 (ex2.approx without .ftz)");
  if (loop.fmnmx == 0) problems.push_back(where + ": no FMNMX (the row max is a compare and a select)");
  if (loop.bssy > 0) problems.push_back(where + ": " + std::to_string(loop.bssy) + " BSSY (divergent branches)");
  if (budget.overlap && 4 * loop.ex2_between_waits < loop.ex2)
    problems.push_back(where + ": " + std::to_string(loop.ex2_between_waits) + " of " + std::to_string(loop.ex2) +
                       " MUFU.EX2 between the P·V wgmma's two waits, at least a quarter expected (the softmax no "
                       "longer overlaps the GEMM)");
  return problems;
}

// The steady-state loop of each FA-3 instantiation: within its budget, no range check, FMNMX, no BSSY, and the
// softmax between the two waits. Prints the counts (the numbers the budgets were set from).
TEST_P(Fa3Kernel, SteadyStateLoopKeepsItsBudgetAndOverlap) {
  const HopperKernel& kernel = GetParam();
  const Fa3Instance* instance = nullptr;
  for (const Fa3Instance& i : fa3_instances())
    if (i.name == kernel.name) instance = &i;
  ASSERT_NE(instance, nullptr);
  const int head_dim = std::stoi(kernel.name.substr(kernel.name.find("hdim") + 4));
  std::vector<std::string> problems;
  for (const Function* f : functions_named(kernels_library(), kernel.name, kHopper)) {
    std::printf("%s [%s]: %s\n", kernel.name.c_str(), f->arch.c_str(), describe(steady_state_loop(*f)).c_str());
    for (const std::string& problem : loop_problems(*f, fa3_loop_budget(instance->fp8, head_dim))) problems.push_back(problem);
  }
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

const auto kernel_name = [](const ::testing::TestParamInfo<HopperKernel>& info) { return info.param.name; };
INSTANTIATE_TEST_SUITE_P(Fa3, Fa3Kernel, ::testing::ValuesIn(fa3_kernels()), kernel_name);

// Every sm_90a kernel of the fa3 namespace that trades registers with setmaxnreg (USETMAXREG in its SASS) is
// an instantiation of the list and enters with its budget's count; the ones that do not trade (the e4m3 V
// transpose) have no budget, and no forward kernel (fa3_<dtype>_hdim<d>_<tile>) may be among them.
TEST_F(StaticChecks, EveryFa3KernelTradingRegistersEntersWithTheBudget) {
  std::vector<std::string> problems;
  int trading = 0;
  const std::regex forward_kernel(R"(::fa3_(fp16|bf16|fp8_e4m3)_hdim\d+_\d+x\d+\()");
  for (const Function& f : kernels_library()) {
    if (f.arch != kHopper || f.demangled().rfind("faprobe::cuda::fa3::", 0) != 0) continue;
    if (!f.uses("USETMAXREG")) {
      EXPECT_FALSE(std::regex_search(f.id(), forward_kernel)) << "an FA-3 forward kernel without setmaxnreg: " << f.id();
      continue;
    }
    ++trading;
    const long budget = fa3_budget_of(f.demangled());
    if (budget == 0) {
      problems.push_back(f.id() + " trades registers but is no instantiation of kernels/cuda/fa3/CMakeLists.txt");
      continue;
    }
    for (const std::string& problem : register_budget_problems({&f}, cached_ptxas_report(FAPROBE_KERNELS_LIBRARY), budget))
      problems.push_back(problem);
  }
  EXPECT_EQ(trading, static_cast<int>(fa3_instances().size())) << "every FA-3 instantiation trades registers";
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// The steady-state loop of each FA-2 kernel, for sm_80 and sm_90a.
class Fa2Kernel : public StaticChecks, public ::testing::WithParamInterface<std::string> {};

TEST_P(Fa2Kernel, SteadyStateLoopKeepsItsBudget) {
  const std::string& name = GetParam();
  const int head_dim = std::stoi(name.substr(name.find("hdim") + 4));
  std::vector<std::string> problems;
  for (const std::string& arch : kBuiltArchitectures) {
    const std::vector<const Function*> found = functions_named(kernels_library(), name, arch);
    if (found.empty()) problems.push_back("no kernel named " + name + " for " + arch);
    for (const Function* f : found) {
      std::printf("%s [%s]: %s\n", name.c_str(), arch.c_str(), describe(steady_state_loop(*f)).c_str());
      for (const std::string& problem : loop_problems(*f, fa2_loop_budget(head_dim))) problems.push_back(problem);
    }
  }
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// FA-2's instantiations (kernels/cuda/fa2/CMakeLists.txt's list, through its generated fa2_instantiations.inc).
std::vector<std::string> fa2_kernels() {
  return {
#define FAPROBE_FA2_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) "fa2_" #dtype "_hdim" #D "_" #BQ "x" #BK,
#include "cuda/fa2/fa2_instantiations.inc"
#undef FAPROBE_FA2_INSTANTIATION
  };
}

const auto fa2_kernel_name = [](const ::testing::TestParamInfo<std::string>& info) { return info.param; };
INSTANTIATE_TEST_SUITE_P(Fa2, Fa2Kernel, ::testing::ValuesIn(fa2_kernels()), fa2_kernel_name);

// --- The decode kernels (kernels/cuda/decode/): the copy pipeline and the paged lookup ---
//
// In the steady-state loop of each decode attention kernel (one key block of a warp: the smallest loop with
// HMMA and MUFU.EX2):
// - tiles stay in flight: the loop waits for its copies (cp.async.wait_group, DEPBAR.LE SB0, N), and every
//   wait leaves N ≥ 1 groups in flight. A wait for 0 drains the warp's copies before each tile;
// - paged (decode_paged_*): no I2F, F2I or MUFU.RCP (an integer division or remainder by the runtime page size
//   is I2F.U32.RP, MUFU.RCP, F2I and a correction), and at most two LDG per tile. The criterion for the
//   table's loads: K and V are copied by cp.async (LDGSTS) and Q before the loop, so every LDG in the loop
//   (any width) is another global load, the block table's; the loop's tiles are its LDGSTS over the LDGSTS one
//   tile takes (block_k · d / 8 chunks over 32 lanes: 16 per lane at every head_dim), which holds however
//   the compiler unrolls the loop.
struct DecodeKernelName {
  std::string name;  // decode_<dtype>_hdim<d> or decode_paged_<dtype>_hdim<d>
  int head_dim;
  bool paged;
};

std::ostream& operator<<(std::ostream& out, const DecodeKernelName& kernel) { return out << kernel.name; }

std::vector<DecodeKernelName> decode_kernels() {
  std::vector<DecodeKernelName> kernels;
  for (const char* layout : {"", "paged_"})
    for (const char* dtype : {"fp16", "bf16"})
      for (int head_dim : {64, 128, 256})
        kernels.push_back({std::string("decode_") + layout + dtype + "_hdim" + std::to_string(head_dim), head_dim,
                           *layout != '\0'});
  return kernels;
}

// The cp.async copies one tile takes per lane: a tile is 8 KiB, 16 bytes a copy, 32 lanes.
constexpr int kDecodeCopiesPerTile = 8192 / 16 / 32;

std::string describe_decode(const LoopCounts& loop) {
  if (!loop.found) return describe(loop);
  std::ostringstream text;
  const double tiles = double(loop.ldgsts) / kDecodeCopiesPerTile;
  text << "loop at 0x" << std::hex << loop.header << std::dec << ": " << loop.instructions << " instructions, "
       << loop.ldgsts << " LDGSTS (" << tiles << " tiles: " << (tiles > 0 ? loop.instructions / tiles : 0.0)
       << " instructions per tile), " << loop.ldg << " LDG, " << loop.shfl << " SHFL, " << loop.i2f << " I2F, "
       << loop.f2i << " F2I, " << loop.rcp << " MUFU.RCP, " << loop.mma << " HMMA, " << loop.ex2 << " MUFU.EX2, waits";
  for (int wait : loop.async_waits) text << " " << wait;
  return text.str();
}

// What is wrong with a decode kernel's steady-state loop (above); empty when nothing is.
std::vector<std::string> decode_loop_problems(const Function& f, bool paged) {
  const LoopCounts loop = steady_state_loop(f);
  if (!loop.found) return {f.id() + ": " + describe(loop)};
  std::vector<std::string> problems;
  const std::string where = f.id() + " (" + describe_decode(loop) + ")";
  if (loop.ldgsts == 0) problems.push_back(where + ": no cp.async (LDGSTS) in the loop");
  if (loop.async_waits.empty()) problems.push_back(where + ": no cp.async.wait_group (DEPBAR.LE SB0) in the loop");
  for (int wait : loop.async_waits)
    if (wait < 1)
      problems.push_back(where + ": a cp.async.wait_group leaves " + std::to_string(wait) +
                         " groups in flight (the warp's copies drained before a tile)");
  if (paged) {
    if (loop.i2f + loop.f2i + loop.rcp > 0)
      problems.push_back(where + ": " + std::to_string(loop.i2f) + " I2F, " + std::to_string(loop.f2i) + " F2I, " +
                         std::to_string(loop.rcp) + " MUFU.RCP (a division by the page size)");
    const double tiles = double(loop.ldgsts) / kDecodeCopiesPerTile;
    if (loop.ldg > 2.0 * tiles)
      problems.push_back(where + ": " + std::to_string(loop.ldg) + " LDG for " + std::to_string(tiles) +
                         " tiles, at most 2 per tile (block-table loads)");
  }
  return problems;
}

class DecodeKernel : public StaticChecks, public ::testing::WithParamInterface<DecodeKernelName> {};

TEST_P(DecodeKernel, SteadyStateLoopKeepsTilesInFlightAndLooksUpPagesByShifts) {
  const DecodeKernelName& kernel = GetParam();
  std::vector<std::string> problems;
  for (const std::string& arch : kBuiltArchitectures) {
    const std::vector<const Function*> found = functions_named(kernels_library(), kernel.name, arch);
    if (found.empty()) problems.push_back("no kernel named " + kernel.name + " for " + arch);
    for (const Function* f : found) {
      std::printf("%s [%s]: %s\n", kernel.name.c_str(), arch.c_str(), describe_decode(steady_state_loop(*f)).c_str());
      for (const std::string& problem : decode_loop_problems(*f, kernel.paged)) problems.push_back(problem);
    }
  }
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

const auto decode_kernel_name = [](const ::testing::TestParamInfo<DecodeKernelName>& info) { return info.param.name; };
INSTANTIATE_TEST_SUITE_P(Decode, DecodeKernel, ::testing::ValuesIn(decode_kernels()), decode_kernel_name);

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
  for (const PtxasFunction& f : cached_ptxas_report(FAPROBE_PLANTED_LIBRARY)) {
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

TEST_F(StaticChecks, PlantedIgnoredSetmaxnregIsCaught) {
  const std::vector<PtxasFunction> report = cached_ptxas_report(FAPROBE_PLANTED_LIBRARY);
  const std::string unbounded = joined(setmaxnreg_problems(planted_library(), report, "setmaxnreg_unbounded_kernel"));
  EXPECT_NE(unbounded.find("setmaxnreg_unbounded_kernel(faprobe::cuda::GlobalSpan<float>) [sm_90a]: ptxas: (C7508)"),
            std::string::npos) << unbounded;
  EXPECT_NE(unbounded.find("no USETMAXREG (setmaxnreg) in faprobe::planted::setmaxnreg_unbounded_kernel"),
            std::string::npos) << unbounded;
  // The control: the same kernel with launch bounds keeps setmaxnreg, so nothing is reported for it, and ptxas's
  // note (one for the whole file, naming no kernel) is charged to the unbounded kernel alone.
  EXPECT_TRUE(setmaxnreg_problems(planted_library(), report, "setmaxnreg_bounded_kernel").empty())
      << joined(setmaxnreg_problems(planted_library(), report, "setmaxnreg_bounded_kernel"));
  for (const PtxasFunction& f : report) {
    EXPECT_EQ(f.setmaxnreg_ignored, f.name.find("setmaxnreg_unbounded_kernel") != std::string::npos && f.arch == kHopper)
        << f.name << " [" << f.arch << "]";
  }
  EXPECT_NE(joined(setmaxnreg_problems(planted_library(), report, "no_such_kernel")).find("no kernel named no_such_kernel"),
            std::string::npos);
}

TEST_F(StaticChecks, PlantedRegisterBudgetMismatchIsCaught) {
  const std::vector<PtxasFunction> report = cached_ptxas_report(FAPROBE_PLANTED_LIBRARY);
  const std::vector<const Function*> mismatch =
      functions_named(planted_library(), "register_budget_mismatch_kernel", kHopper);
  ASSERT_EQ(mismatch.size(), 1u);
  ASSERT_EQ(mismatch.front()->resources.count("REG"), 1u);
  const long found = mismatch.front()->resources.at("REG");
  // Its launch bounds say two CTAs of FA-3's 384 threads per SM: ptxas allots what the formula gives for that.
  using Fa3Budget = fa3::Traits<128, 2, 128, 128>;
  EXPECT_EQ(found, long{isa::registers_at_entry(Fa3Budget::threads, 2 * Fa3Budget::min_ctas_per_sm)});
  ASSERT_NE(found, long{Fa3Budget::registers_at_entry});

  const std::string problems = joined(register_budget_problems(mismatch, report, Fa3Budget::registers_at_entry));
  const std::string name = "faprobe::planted::register_budget_mismatch_kernel(faprobe::cuda::GlobalSpan<float>)";
  const std::string expected = ", expected " + std::to_string(Fa3Budget::registers_at_entry) + " ";
  EXPECT_NE(problems.find(name + " [sm_90a, static_checks_planted.cu.o]: " + std::to_string(found) +
                          " registers at entry (cuobjdump -res-usage REG)" + expected),
            std::string::npos) << problems;
  EXPECT_NE(problems.find(name + " [sm_90a]: ptxas -v: Used " + std::to_string(found) + " registers" + expected),
            std::string::npos) << problems;

  // The control: FA-3's own launch bounds enter with the budget, so nothing is reported; nor for the same check
  // with nothing to check, which is a problem of its own.
  const std::vector<const Function*> kept = functions_named(planted_library(), "register_budget_kept_kernel", kHopper);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(register_budget_problems(kept, report, Fa3Budget::registers_at_entry).empty())
      << joined(register_budget_problems(kept, report, Fa3Budget::registers_at_entry));
  EXPECT_EQ(register_budget_problems({}, report, Fa3Budget::registers_at_entry).size(), 1u);
}

// The planted losses of speed (static_checks_planted.cu): FA-3's and FA-2's own bodies with a defect each.
const Function& planted_kernel(const std::string& name, const std::string& arch = kHopper) {
  const std::vector<const Function*> found = functions_named(planted_library(), name, arch);
  if (found.size() != 1) throw std::runtime_error("no single planted kernel " + name + " for " + arch);
  return *found.front();
}

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

TEST_F(StaticChecks, PlantedSlowSoftmaxIsCaught) {
  const std::vector<std::string> problems = loop_problems(planted_kernel("planted_fa3_slow_softmax"), fa3_loop_budget(false, 128));
  EXPECT_TRUE(mentions(problems, "instructions per MUFU.EX2, the budget is 9.2")) << joined(problems);
  EXPECT_TRUE(mentions(problems, "range checks around MUFU.EX2")) << joined(problems);
  EXPECT_TRUE(mentions(problems, "no FMNMX")) << joined(problems);
}

TEST_F(StaticChecks, PlantedMaskInTheSteadyStateIsCaught) {
  const std::vector<std::string> fa3 = loop_problems(planted_kernel("planted_fa3_mask_every_block"), fa3_loop_budget(false, 128));
  EXPECT_TRUE(mentions(fa3, "instructions per MUFU.EX2, the budget is 9.2")) << joined(fa3);
  for (const std::string& arch : kBuiltArchitectures) {
    const std::vector<std::string> fa2 = loop_problems(planted_kernel("planted_fa2_mask_every_block", arch), fa2_loop_budget(128));
    EXPECT_TRUE(mentions(fa2, "non-MMA instructions per MMA, the budget is 3.4")) << arch << joined(fa2);
    EXPECT_TRUE(mentions(fa2, "BSSY (divergent branches)")) << arch << joined(fa2);
  }
}

TEST_F(StaticChecks, PlantedUnpinnedWaitIsCaught) {
  const std::vector<std::string> problems = loop_problems(planted_kernel("planted_fa3_unpinned_wait"), fa3_loop_budget(false, 128));
  EXPECT_TRUE(mentions(problems, "0 of 66 MUFU.EX2 between the P·V wgmma's two waits")) << joined(problems);
  EXPECT_EQ(problems.size(), 1u) << "the overlap alone is lost:" << joined(problems);
}

TEST_F(StaticChecks, PlantedSerializedWgmmaIsCaught) {
  const std::vector<std::string> problems = serialized_wgmma(cached_ptxas_report(FAPROBE_PLANTED_LIBRARY));
  EXPECT_TRUE(mentions(problems, "planted_fa3_scores_read_in_flight(faprobe::cuda::fa3::Params) [sm_90a]: ptxas (C7514)"))
      << joined(problems);
  EXPECT_EQ(problems.size(), 1u) << "only the kernel that reads S in flight:" << joined(problems);
}

TEST_F(StaticChecks, PlantedDecodeLossesOfSpeedAreCaught) {
  for (const std::string& arch : kBuiltArchitectures) {
    for (const char* name : {"planted_decode_drain_every_tile", "planted_decode_divided_page", "planted_decode_global_table"})
      std::printf("%s [%s]: %s\n", name, arch.c_str(), describe_decode(steady_state_loop(planted_kernel(name, arch))).c_str());
    const std::vector<std::string> drained = decode_loop_problems(planted_kernel("planted_decode_drain_every_tile", arch), false);
    EXPECT_TRUE(mentions(drained, "a cp.async.wait_group leaves 0 groups in flight")) << arch << joined(drained);
    const std::vector<std::string> divided = decode_loop_problems(planted_kernel("planted_decode_divided_page", arch), true);
    EXPECT_TRUE(mentions(divided, "MUFU.RCP (a division by the page size)")) << arch << joined(divided);
    EXPECT_FALSE(mentions(divided, "LDG for")) << "the table is still read from shared memory:" << arch << joined(divided);
    const std::vector<std::string> global = decode_loop_problems(planted_kernel("planted_decode_global_table", arch), true);
    EXPECT_TRUE(mentions(global, "tiles, at most 2 per tile (block-table loads)")) << arch << joined(global);
    EXPECT_FALSE(mentions(global, "a division by the page size")) << "shifts, not a division:" << arch << joined(global);
  }
}

// The loop finder on a fixed excerpt: a loop with a spin loop inside it (the spin's instructions are its own,
// not the outer loop's), the back edge predicated, and an out-of-line block that branches back in.
TEST(StaticChecksParser, FindsTheSteadyStateLoop) {
  const std::string excerpt =
      "member /x/libk.a:k.cu.o:\n"
      "\tcode for sm_90a\n"
      "\t\tFunction : _ZN7faprobe1kEv\n"
      "        /*0000*/                   MOV R1, RZ ;\n"
      "        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R1], R2 ;\n"
      "        /*0020*/              @!P0 BRA 0x100 ;\n"
      "        /*0030*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;\n"
      "        /*0040*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;\n"
      "        /*0050*/                   FMNMX R4, R5, R6, !PT ;\n"
      "        /*0060*/                   MUFU.EX2 R4, R4 ;\n"
      "        /*0070*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
      "        /*0080*/                   MUFU.EX2 R5, R5 ;\n"
      "        /*0090*/                   ISETP.GT.AND P1, PT, R3, RZ, PT ;\n"
      "        /*00a0*/               @P1 BRA 0x10 ;\n"
      "        /*00b0*/                   EXIT ;\n"
      "        /*0100*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R1], R2 ;\n"
      "        /*0110*/              @!P0 BRA 0x100 ;\n"
      "        /*0120*/                   BRA 0x30 ;\n";
  const std::vector<Function> functions = parse_dump(excerpt);
  ASSERT_EQ(functions.size(), 1u);
  const LoopCounts loop = steady_state_loop(functions.front());
  ASSERT_TRUE(loop.found);
  EXPECT_EQ(loop.header, 0x10u);
  EXPECT_EQ(loop.instructions, 11) << describe(loop);  // 0x10-0xa0 and the branch back at 0x120, not the spin
  EXPECT_EQ(loop.mma, 1);
  EXPECT_EQ(loop.ex2, 2);
  EXPECT_EQ(loop.ex2_between_waits, 1);
  EXPECT_EQ(loop.fmnmx, 1);
  EXPECT_EQ(loop.bssy, 0);
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
