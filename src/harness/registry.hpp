// The one list of implementations (the interface they share is model/implementation.hpp). Nothing else in
// the program knows which implementations exist; adding one is its own file plus one line in registry.cpp.
// Plugins (harness/plugins.hpp) add theirs at run time, after the built-in ones, through register_implementation.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/implementation.hpp"

namespace faprobe {

// All registered implementations, in the order tables list them.
const std::vector<std::unique_ptr<Implementation>>& implementations();
const Implementation* find_implementation(const std::string& name);  // nullptr when unknown
std::vector<std::string> implementation_names();

// Appends an implementation to the list; throws UsageError when its name is taken, naming `origin` (the
// plugin file it came from). Implementations are never removed, so pointers to them stay valid.
void register_implementation(std::unique_ptr<Implementation> impl, const std::string& origin);

}  // namespace faprobe
