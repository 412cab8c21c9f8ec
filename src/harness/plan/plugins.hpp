// Loading plugins: users' attention implementations in shared libraries, built against the C ABI of
// include/faprobe/plugin.h, registered as plugin.<name> beside the built-in implementations.
//
// Where they come from, in this order: FAPROBE_PLUGIN_PATH (entries separated by ':', each a library or a
// directory whose *.so files are loaded in name order), a config's "plugins" (paths relative to the config
// file), then each --plugin. A library is loaded once however often it is named (by its canonical path).
// Nothing is loaded, and no dlopen happens, unless one of them names a library.
//
// Loading a library: dlopen (RTLD_NOW | RTLD_LOCAL, so its symbols stay its own), its faprobe_plugin_entry
// called once, the ABI version and every descriptor checked (a name of letters, digits, '_', '-' and '.';
// a known device and flags; supports and run present), and only then its implementations registered, all
// or none. Each failure is a UsageError of one line that names the library and where it was given, so the
// command exits 2 before anything is measured. Libraries stay loaded until the process exits.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace faprobe {

struct PluginRequest {
  std::string path;
  std::string origin;  // where it was given: "--plugin", "FAPROBE_PLUGIN_PATH", "--config c.json: \"plugins\""
};

struct LoadedPlugin {
  std::string path;  // canonical
  std::uint32_t abi_version = 0;
  std::vector<std::string> implementations;  // plugin.<name>, in the library's order
};

// The libraries FAPROBE_PLUGIN_PATH names (empty when it is unset or empty); a directory in it is expanded
// to its *.so files, sorted. Throws UsageError for an entry that does not exist.
std::vector<PluginRequest> plugin_requests_from_environment();

// Loads each library not loaded yet; throws UsageError (above).
void load_plugins(const std::vector<PluginRequest>& requests);

// Where plugins' supports() and workspace_bytes() run (kernels/plugin/plugin_abi.hpp): in a child per case
// (the default; timeout_s bounds it), or in this process (--no-isolate, and in an --isolate child).
void isolate_plugin_entry_points(bool isolated, double timeout_s);

// What has been loaded in this process, in load order.
const std::vector<LoadedPlugin>& loaded_plugins();
// The library an implementation came from, or nullptr for a built-in one.
const LoadedPlugin* plugin_of(const std::string& implementation);
// For the --json header: path, ABI version and implementations of each loaded library.
nlohmann::json plugins_metadata();

}  // namespace faprobe
