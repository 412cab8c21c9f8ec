// cuDNN through dlopen (the interface and the search order: cudnn_library.hpp). Plain C++: no cuDNN or CUDA
// header is needed, so the same file builds with and without CUDA. The entry points checked are the ones
// every cuDNN 9 dispatcher library exports and cuda.cudnn's graph needs (handle, stream, the backend
// descriptors' create and execute); the cudnn-frontend looks up the rest itself, through the same handle.
#include "cuda/runtime/cudnn_library.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace faprobe::gpu {

namespace {

namespace fs = std::filesystem;

constexpr const char* kRequiredSymbols[] = {"cudnnGetVersion",     "cudnnGetErrorString",
                                            "cudnnCreate",         "cudnnDestroy",
                                            "cudnnSetStream",      "cudnnBackendCreateDescriptor",
                                            "cudnnBackendExecute"};

// dlerror()'s text without the file name it starts with ("x.so: cannot open shared object file: ..."), since
// the reason names the file itself.
std::string dl_error(const std::string& file) {
  const char* error = dlerror();
  std::string why = error != nullptr ? error : "dlopen failed";
  if (why.rfind(file + ": ", 0) == 0) why.erase(0, file.size() + 2);
  return why;
}

// The file the dynamic loader opened for `handle` (the full path also when it was found by name).
std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name != '\0') {
    return map->l_name;
  }
  return fallback;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code error;
  const fs::path canonical = fs::canonical(path, error);
  return error ? path : canonical.string();
}

bool is_directory(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

bool is_file(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);  // follows symbolic links, as dlopen does
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> paths;
  glob_t found{};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (std::size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
  }
  globfree(&found);
  return paths;  // glob sorts them
}

// Appends `path` unless a path naming the same file is already there.
void add_unique(std::vector<std::string>& paths, std::vector<std::string>& seen, const std::string& path) {
  const std::string key = canonical_or_same(path);
  for (const std::string& other : seen) {
    if (other == key) return;
  }
  seen.push_back(key);
  paths.push_back(path);
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

std::string cudnn_version_text(std::size_t version) {
  if (version == 0) return "";
  if (version >= 10000) return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
  return fmt::format("{}.{}.{}", version / 1000, version / 100 % 10, version % 100);
}

std::string CudnnLibrary::version_text() const { return cudnn_version_text(version); }

nlohmann::json CudnnLibrary::summary() const {
  if (!available()) return {{"available", false}, {"reason_unavailable", reason_unavailable}};
  return {{"available", true},
          {"version", version_text()},
          {"version_number", version},
          {"library", path},
          {"source", source}};
}

CudnnLibrary load_cudnn_library(const std::string& file, const std::string& source) {
  CudnnLibrary library;
  library.source = source;
  dlerror();  // clear an earlier error
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    library.reason_unavailable = fmt::format("cannot load {}: {}", file, dl_error(file));
    return library;
  }
  std::vector<std::string> missing;
  for (const char* name : kRequiredSymbols) {
    if (dlsym(handle, name) == nullptr) missing.emplace_back(name);
  }
  if (!missing.empty()) {
    library.reason_unavailable = fmt::format("{} is not cuDNN: it has no {}", file, fmt::join(missing, ", "));
    dlclose(handle);  // none of its functions was called: nothing needs it loaded
    return library;
  }
  const auto get_version = reinterpret_cast<std::size_t (*)()>(dlsym(handle, "cudnnGetVersion"));
  const std::size_t version = get_version();
  const std::size_t major = version >= 10000 ? version / 10000 : version / 1000;
  if (major != std::size_t(kCudnnMajor)) {
    library.reason_unavailable =
        fmt::format("{} is cuDNN {}; cuda.cudnn needs cuDNN {} (the major version of the cudnn.h it is built with)",
                    file, cudnn_version_text(version), kCudnnMajor);
    dlclose(handle);  // only cudnnGetVersion ran, which keeps no state
    return library;
  }
  library.handle = handle;
  library.version = version;
  library.path = loaded_path(handle, file);
  return library;
}

std::vector<std::string> python_site_directories(const std::string& path_variable, const std::string& home) {
  // The prefixes of each python3 on the PATH: its directory's parent, and that of the file it links to.
  std::vector<std::string> prefixes, seen_prefixes;
  std::size_t start = 0;
  while (start <= path_variable.size()) {
    const std::size_t end = std::min(path_variable.find(':', start), path_variable.size());
    const std::string directory = path_variable.substr(start, end - start);
    start = end + 1;
    if (directory.empty()) continue;
    const fs::path python = fs::path(directory) / "python3";
    if (!is_file(python.string())) continue;
    add_unique(prefixes, seen_prefixes, fs::path(directory).parent_path().string());
    const fs::path target(canonical_or_same(python.string()));
    add_unique(prefixes, seen_prefixes, target.parent_path().parent_path().string());
  }
  std::vector<std::string> directories, seen;
  for (const std::string& prefix : prefixes) {
    for (const std::string& base : {prefix, prefix + "/local"}) {
      for (const char* kind : {"site-packages", "dist-packages"}) {
        for (const std::string& found : glob_paths(fmt::format("{}/lib/python3*/{}", base, kind))) {
          if (is_directory(found)) add_unique(directories, seen, found);
        }
      }
    }
  }
  if (!home.empty()) {
    for (const std::string& found : glob_paths(home + "/.local/lib/python3*/site-packages")) {
      if (is_directory(found)) add_unique(directories, seen, found);
    }
  }
  return directories;
}

CudnnLibrary find_cudnn_library() {
  if (const std::string setting = environment(kCudnnLibraryVariable); !setting.empty()) {
    CudnnLibrary library = load_cudnn_library(setting, kCudnnLibraryVariable);
    if (!library.available()) {
      library.reason_unavailable = fmt::format("{} (set by {})", library.reason_unavailable, kCudnnLibraryVariable);
    }
    return library;
  }

  std::vector<std::string> failures;  // files that exist but did not load, with the reason
  CudnnLibrary library = load_cudnn_library(kCudnnSoname, "the dynamic loader's path");
  if (library.available()) return library;
  if (library.reason_unavailable.find("No such file") == std::string::npos) {
    failures.push_back(library.reason_unavailable);  // found, but not usable
  }

  // The toolkit's directories, then the Python installations'.
  std::vector<std::pair<std::string, std::string>> candidates;  // file, source
  std::vector<std::string> toolkit_directories;
  const std::pair<std::string, std::string> toolkits[] = {
      {environment("CUDA_HOME"), "the CUDA toolkit ($CUDA_HOME)"},
      {environment("CUDA_PATH"), "the CUDA toolkit ($CUDA_PATH)"},
      {"/usr/local/cuda", "the CUDA toolkit (/usr/local/cuda)"}};
  for (const auto& [root, source] : toolkits) {
    if (root.empty()) continue;
    for (const char* lib : {"lib64", "lib"}) {
      const std::string directory = fmt::format("{}/{}", root, lib);
      toolkit_directories.push_back(directory);
      candidates.emplace_back(directory + "/" + kCudnnSoname, source);
    }
  }
  const std::vector<std::string> sites = python_site_directories(environment("PATH"), environment("HOME"));
  for (const std::string& site : sites) {
    candidates.emplace_back(fmt::format("{}/nvidia/cudnn/lib/{}", site, kCudnnSoname),
                            fmt::format("the nvidia-cudnn wheel in {}", site));
  }
  std::vector<std::string> tried, seen;  // the files loaded, and their canonical paths
  for (const auto& [file, source] : candidates) {
    if (!is_file(file)) continue;
    const std::size_t before = tried.size();
    add_unique(tried, seen, file);
    if (tried.size() == before) continue;  // the same file as an earlier candidate (lib64 is often a link to lib)
    library = load_cudnn_library(file, source);
    if (library.available()) return library;
    failures.push_back(library.reason_unavailable);
  }

  CudnnLibrary none;
  none.reason_unavailable = fmt::format(
      "no usable {} (looked in the dynamic loader's path, {}, and nvidia/cudnn/lib in {} Python site-packages "
      "director{}){}; set {} to the file",
      kCudnnSoname, fmt::join(toolkit_directories, ", "), sites.size(), sites.size() == 1 ? "y" : "ies",
      failures.empty() ? "" : fmt::format(": {}", fmt::join(failures, "; ")), kCudnnLibraryVariable);
  return none;
}

const CudnnLibrary& cudnn_library() {
  static const CudnnLibrary library = find_cudnn_library();
  return library;
}

}  // namespace faprobe::gpu
