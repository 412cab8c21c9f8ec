#include "harness/plan/plugins.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "faprobe/plugin.h"
#include "harness/plan/registry.hpp"
#include "model/errors.hpp"
#include "plugin/adapters.hpp"
#include "plugin/plugin_abi.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxNameLength = 64;
constexpr std::uint32_t kMaxImplementations = 1024;  // more is a corrupt count, not a plugin
constexpr std::uint32_t kKnownFlags = FAPROBE_WRITES_LSE;

std::vector<LoadedPlugin>& loaded() {
  static std::vector<LoadedPlugin> plugins;
  return plugins;
}

// Why a descriptor's name cannot be registered, or "".
std::string name_problem(const char* name) {
  if (name == nullptr || *name == '\0') return "has no name";
  const std::string text(name, strnlen(name, kMaxNameLength + 1));
  if (text.size() > kMaxNameLength) return fmt::format("has a name longer than {} characters", kMaxNameLength);
  const bool valid = std::all_of(text.begin(), text.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
  });
  if (!valid) return fmt::format("'{}': a name may hold letters, digits, '_', '-' and '.' only", text);
  return "";
}

// The problem with implementation `index` of a plugin, or "".
std::string descriptor_problem(const faprobe_implementation& impl, std::uint32_t index) {
  const std::string problem = name_problem(impl.name);
  if (!problem.empty()) return fmt::format("implementation {} {}", index, problem);
  const std::string name = impl.name;
  if (impl.device != FAPROBE_DEVICE_CPU && impl.device != FAPROBE_DEVICE_CUDA) {
    return fmt::format("implementation {}: device {} is not FAPROBE_DEVICE_CPU (0) or FAPROBE_DEVICE_CUDA (1)",
                       name, impl.device);
  }
  if ((impl.flags & ~kKnownFlags) != 0) {
    return fmt::format("implementation {}: unknown flags 0x{:x} (known: FAPROBE_WRITES_LSE)", name,
                       impl.flags & ~kKnownFlags);
  }
  if (impl.supports == nullptr || impl.run == nullptr) {
    return fmt::format("implementation {}: supports and run must both be set", name);
  }
  return "";
}

// A damaged library can crash the loader itself (dlopen maps and relocates whatever the file says, and
// ld.so ends the process on some inconsistencies) or its constructors and entry point can: all are tried
// first in a forked child, so that such a library is one line naming it and exit 2, never a signal.
void try_loading_in_a_child(const std::string& where, const std::string& canonical) {
  int messages[2];  // the child's stdout and stderr: the last line is the loader's complaint
  if (pipe2(messages, O_CLOEXEC | O_NONBLOCK) != 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) {  // no child to try in: the load below is the try
    close(messages[0]);
    close(messages[1]);
    return;
  }
  if (child == 0) {
    dup2(messages[1], STDOUT_FILENO);
    dup2(messages[1], STDERR_FILENO);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      auto entry = reinterpret_cast<faprobe_plugin_entry_fn>(dlsym(handle, FAPROBE_PLUGIN_ENTRY_SYMBOL));
      if (entry != nullptr) entry();
    }
    _exit(0);
  }
  close(messages[1]);
  std::string said;
  const auto read_messages = [&] {
    char buffer[4096];
    for (ssize_t n; (n = read(messages[0], buffer, sizeof(buffer))) > 0;) {
      said.append(buffer, std::size_t(n));
      if (said.size() > 4096) said.erase(0, said.size() - 4096);
    }
  };
  constexpr auto kLoadTimeout = std::chrono::seconds(60);
  const auto deadline = std::chrono::steady_clock::now() + kLoadTimeout;
  int status = 0;
  for (;;) {
    read_messages();
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      close(messages[0]);
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      close(messages[0]);
      throw UsageError(fmt::format("{}: loading the library did not finish within {} s", where, kLoadTimeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  read_messages();
  close(messages[0]);
  const std::size_t end = said.find_last_not_of(" \n\r\t");
  const std::size_t begin = end == std::string::npos ? 0 : said.find_last_of('\n', end) + 1;  // npos + 1 == 0
  const std::string last = end == std::string::npos ? "" : said.substr(begin, end + 1 - begin);
  const std::string quoted = last.empty() ? "" : ": " + valid_utf8(last);
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    throw UsageError(fmt::format("{}: loading the library crashed (signal {}, SIG{}): a damaged or broken library{}",
                                 where, WTERMSIG(status), name != nullptr ? name : "?", quoted));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    throw UsageError(fmt::format("{}: loading the library ended the process (exit status {}): a damaged or broken "
                                 "library{}", where, WEXITSTATUS(status), quoted));
  }
}

void load_one(const PluginRequest& request, const std::string& canonical) {
  const std::string where = fmt::format("{} {}", request.origin, request.path);
  try_loading_in_a_child(where, canonical);
  dlerror();
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    throw UsageError(fmt::format("{}: cannot load the library: {}", where, error != nullptr ? valid_utf8(error) : "unknown error"));
  }
  // Never dlclose'd: the implementations registered from it live until the process exits; a library that
  // fails a check below stays mapped too (closing it could run destructors of half-registered state).
  auto entry = reinterpret_cast<faprobe_plugin_entry_fn>(dlsym(handle, FAPROBE_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    throw UsageError(fmt::format("{}: not a faprobe plugin: it exports no {} (define it with FAPROBE_PLUGIN_ENTRY, "
                                 "include/faprobe/plugin.h)", where, FAPROBE_PLUGIN_ENTRY_SYMBOL));
  }
  const faprobe_plugin* plugin = entry();
  if (plugin == nullptr) throw UsageError(fmt::format("{}: {} returned NULL", where, FAPROBE_PLUGIN_ENTRY_SYMBOL));
  if (plugin->abi_version != FAPROBE_PLUGIN_ABI_VERSION) {
    throw UsageError(fmt::format("{}: built for plugin ABI version {}, and this faprobe takes version {}: rebuild "
                                 "it against this faprobe's include/faprobe/plugin.h", where, plugin->abi_version,
                                 FAPROBE_PLUGIN_ABI_VERSION));
  }
  if (plugin->implementation_count == 0 || plugin->implementations == nullptr) {
    throw UsageError(fmt::format("{}: lists no implementations", where));
  }
  if (plugin->implementation_count > kMaxImplementations) {
    throw UsageError(fmt::format("{}: lists {} implementations (at most {})", where, plugin->implementation_count,
                                 kMaxImplementations));
  }
  // Every descriptor checked, and every name free, before the first is registered: all or none.
  std::set<std::string> names;
  for (std::uint32_t i = 0; i < plugin->implementation_count; ++i) {
    const faprobe_implementation& impl = plugin->implementations[i];
    if (const std::string problem = descriptor_problem(impl, i); !problem.empty()) {
      throw UsageError(fmt::format("{}: {}", where, problem));
    }
    const std::string name = std::string("plugin.") + impl.name;
    if (!names.insert(name).second) throw UsageError(fmt::format("{}: lists {} twice", where, name));
    if (find_implementation(name) != nullptr) {
      const LoadedPlugin* other = plugin_of(name);
      throw UsageError(fmt::format("{}: {} is already registered{} (names must be unique over the plugins loaded)",
                                   where, name, other != nullptr ? " by " + other->path : ""));
    }
  }
  LoadedPlugin record{canonical, plugin->abi_version, {}};
  for (std::uint32_t i = 0; i < plugin->implementation_count; ++i) {
    const faprobe_implementation& impl = plugin->implementations[i];
    plugin::Descriptor descriptor{&impl, canonical};
    record.implementations.push_back(descriptor.name());
    register_implementation(impl.device == FAPROBE_DEVICE_CUDA ? plugin::make_cuda_plugin(std::move(descriptor))
                                                               : plugin::make_cpu_plugin(std::move(descriptor)),
                            where);
  }
  loaded().push_back(std::move(record));
}

}  // namespace

std::vector<PluginRequest> plugin_requests_from_environment() {
  std::vector<PluginRequest> requests;
  const char* value = std::getenv("FAPROBE_PLUGIN_PATH");
  if (value == nullptr) return requests;
  const std::string text = value;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find(':', start), text.size());
    const std::string entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    std::error_code error;
    if (fs::is_directory(entry, error)) {
      std::vector<std::string> libraries;
      for (const fs::directory_entry& file : fs::directory_iterator(entry, error)) {
        if (file.path().extension() == ".so" && !fs::is_directory(file.path(), error)) {
          libraries.push_back(file.path().string());
        }
      }
      std::sort(libraries.begin(), libraries.end());
      for (std::string& library : libraries) requests.push_back({std::move(library), "FAPROBE_PLUGIN_PATH"});
    } else if (fs::exists(entry, error)) {
      requests.push_back({entry, "FAPROBE_PLUGIN_PATH"});
    } else {
      throw UsageError(fmt::format("FAPROBE_PLUGIN_PATH: {} does not exist (entries are libraries or directories "
                                   "of them, separated by ':')", entry));
    }
  }
  return requests;
}

void load_plugins(const std::vector<PluginRequest>& requests) {
  for (const PluginRequest& request : requests) {
    std::error_code error;
    if (!fs::is_regular_file(request.path, error)) {
      throw UsageError(fmt::format("{} {}: {}", request.origin, request.path,
                                   fs::exists(request.path, error) ? "not a file" : "no such file"));
    }
    const std::string canonical = fs::canonical(request.path, error).string();
    if (error) throw UsageError(fmt::format("{} {}: {}", request.origin, request.path, error.message()));
    const bool already = std::any_of(loaded().begin(), loaded().end(),
                                     [&](const LoadedPlugin& plugin) { return plugin.path == canonical; });
    if (!already) load_one(request, canonical);
  }
}

const std::vector<LoadedPlugin>& loaded_plugins() { return loaded(); }

void isolate_plugin_entry_points(bool isolated, double timeout_s) { plugin::isolate_entry_points(isolated, timeout_s); }

const LoadedPlugin* plugin_of(const std::string& implementation) {
  for (const LoadedPlugin& plugin : loaded()) {
    if (std::find(plugin.implementations.begin(), plugin.implementations.end(), implementation) !=
        plugin.implementations.end())
      return &plugin;
  }
  return nullptr;
}

nlohmann::json plugins_metadata() {
  nlohmann::json plugins = nlohmann::json::array();
  for (const LoadedPlugin& plugin : loaded()) {
    plugins.push_back({{"path", plugin.path}, {"abi_version", plugin.abi_version},
                       {"implementations", plugin.implementations}});
  }
  return plugins;
}

}  // namespace faprobe
