// How this faprobe binary was built, for the --json header's `build` object and `faprobe --version`: the C++
// compiler and the flags of faprobe's own code as CMake knew them at configure time (CMAKE_CXX_FLAGS, the
// build type's flags and -march; CMakeLists.txt passes them to build_info.cpp as compile definitions), the
// build type, nvcc's version, flags and architectures when CUDA is enabled, and the git revision with
// whether the work tree had uncommitted changes, refreshed at every build (cmake/build_revision.cmake).
// Flags that CMake adds per target (warnings, -fPIC, include paths) are not among them.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace faprobe {

struct BuildInfo {
  std::string compiler_id, compiler_version;  // CMAKE_CXX_COMPILER_ID / _VERSION: "GNU", "12.2.0"
  std::string cxx_flags;                      // "-O3 -DNDEBUG -march=native"
  std::string build_type;                     // "Release"
  bool cuda = false;                          // FAPROBE_ENABLE_CUDA; the cuda_* fields are empty without it
  std::string cuda_compiler_id, cuda_compiler_version;  // "NVIDIA", "13.0.88"
  std::string cuda_flags;
  std::vector<std::string> cuda_architectures;  // CMAKE_CUDA_ARCHITECTURES: "80", "90a"
  std::string git_revision;                     // "670a558"; "unknown" outside a git checkout
  bool git_dirty = false;                       // tracked files differed from that revision at build time

  std::string revision_text() const;  // "670a558", or "670a558-dirty"
};

const BuildInfo& build_info();

// {compiler: {id, version}, cxx_flags, build_type, cuda: null or {compiler: {id, version}, flags,
// architectures}, git_revision, git_dirty}
void to_json(nlohmann::json& out, const BuildInfo& info);

}  // namespace faprobe
