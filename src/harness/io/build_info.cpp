// The build's provenance (build_info.hpp) from the compile definitions CMakeLists.txt gives this file alone
// and from the header cmake/build_revision.cmake rewrites when the git revision or the tree's state changes.
#include "harness/io/build_info.hpp"

#include <sstream>

#include "build_revision.hpp"

namespace faprobe {

std::string BuildInfo::revision_text() const { return git_dirty ? git_revision + "-dirty" : git_revision; }

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo built;
    built.compiler_id = FAPROBE_BUILD_COMPILER_ID;
    built.compiler_version = FAPROBE_BUILD_COMPILER_VERSION;
    built.cxx_flags = FAPROBE_BUILD_CXX_FLAGS;
    built.build_type = FAPROBE_BUILD_TYPE;
#if defined(FAPROBE_BUILD_CUDA)
    built.cuda = true;
    built.cuda_compiler_id = FAPROBE_BUILD_CUDA_COMPILER_ID;
    built.cuda_compiler_version = FAPROBE_BUILD_CUDA_COMPILER_VERSION;
    built.cuda_flags = FAPROBE_BUILD_CUDA_FLAGS;
    std::istringstream architectures(FAPROBE_BUILD_CUDA_ARCHITECTURES);  // "80,90a"
    for (std::string architecture; std::getline(architectures, architecture, ',');) {
      if (!architecture.empty()) built.cuda_architectures.push_back(architecture);
    }
#endif
    built.git_revision = FAPROBE_BUILD_GIT_REVISION;
    built.git_dirty = FAPROBE_BUILD_GIT_DIRTY != 0;
    return built;
  }();
  return info;
}

void to_json(nlohmann::json& out, const BuildInfo& info) {
  out = nlohmann::json{{"compiler", {{"id", info.compiler_id}, {"version", info.compiler_version}}},
                       {"cxx_flags", info.cxx_flags},
                       {"build_type", info.build_type},
                       {"cuda", nullptr},
                       {"git_revision", info.git_revision},
                       {"git_dirty", info.git_dirty}};
  if (info.cuda) {
    out["cuda"] = {{"compiler", {{"id", info.cuda_compiler_id}, {"version", info.cuda_compiler_version}}},
                   {"flags", info.cuda_flags},
                   {"architectures", info.cuda_architectures}};
  }
}

}  // namespace faprobe
