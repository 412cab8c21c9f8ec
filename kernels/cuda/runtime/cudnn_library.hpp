// cuDNN for cuda.cudnn (cuda/cudnn.cpp), found and loaded at run time (dlopen), as NVML is (nvml.hpp):
// nothing links it. cuDNN 9's libraries are ~380 MB, far more than a binary carried to a GPU machine should
// bring, and every such machine seen so far has them already (the CUDA toolkit, or the nvidia-cudnn wheel
// that PyTorch installs). Only libcudnn.so.9 is opened here: a small dispatcher that loads its engine
// libraries (libcudnn_graph, libcudnn_engines_*, ...) from its own directory when they are first needed.
//
// Where it is looked for, in order (the first that loads and is cuDNN 9 wins):
//   1. FAPROBE_CUDNN_LIBRARY, a file: when set, that file alone (no fallback, so that a typo is not hidden);
//   2. libcudnn.so.9 through the dynamic loader (LD_LIBRARY_PATH, the ldconfig cache);
//   3. the CUDA toolkit: lib64/ and lib/ under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda;
//   4. a PyTorch installation's nvidia-cudnn wheel: nvidia/cudnn/lib/ in the site-packages (and
//      dist-packages) of each python3 on the PATH: lib/python3.*/ under the prefix of its directory and of
//      the file it links to (a virtual environment's bin/python3 links to the system's), under
//      <prefix>/local (Debian's pip), and the user's ~/.local. A plain file-system search: no Python runs.
// Everything that can fail (no file, a file that is not a library, a library without cuDNN's entry points,
// a cuDNN that is not version 9) makes the library unavailable with the reason; nothing here throws, and
// nothing needs a GPU (cudnnGetVersion does not).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace faprobe::gpu {

inline constexpr const char* kCudnnLibraryVariable = "FAPROBE_CUDNN_LIBRARY";
inline constexpr const char* kCudnnSoname = "libcudnn.so.9";
inline constexpr int kCudnnMajor = 9;  // the cudnn.h faprobe builds against; cuDNN keeps its ABI within a major

struct CudnnLibrary {
  void* handle = nullptr;          // dlopen's; never closed once loaded
  std::string path;                // the file the dynamic loader opened
  std::string source;              // how it was found: "FAPROBE_CUDNN_LIBRARY", "the dynamic loader's path", ...
  std::size_t version = 0;         // cudnnGetVersion(): 91900 for 9.19.0
  std::string reason_unavailable;  // why not, when !available()

  bool available() const { return handle != nullptr; }
  std::string version_text() const;  // "9.19.0"; "" when not loaded
  // {available, reason_unavailable} or {available, version, version_number, library, source}
  nlohmann::json summary() const;
};

// "9.19.0" for cudnnGetVersion()'s 91900 (cuDNN 9: major·10000 + minor·100 + patch), "8.9.6" for 8906
// (cuDNN 8: major·1000 + minor·100 + patch).
std::string cudnn_version_text(std::size_t version);

// Loads `file` (a path, or a name for the dynamic loader to find), requires cuDNN's entry points and cuDNN 9.
// `source` says how the file was found, for the record.
CudnnLibrary load_cudnn_library(const std::string& file, const std::string& source);
// The search above, from the start: each call reads FAPROBE_CUDNN_LIBRARY and the file system again.
CudnnLibrary find_cudnn_library();
// find_cudnn_library(), once per process (on first use; thread-safe): what cuda.cudnn uses.
const CudnnLibrary& cudnn_library();

// The directories of step 4 for one PATH value and home directory (the tests' entry point): the
// site-packages and dist-packages directories that exist, each once, in search order.
std::vector<std::string> python_site_directories(const std::string& path_variable, const std::string& home);

}  // namespace faprobe::gpu
