// The one list of implementations (the interface they share is model/implementation.hpp). Nothing else in
// the program knows which implementations exist; adding one is its own file plus one line in registry.cpp.
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

}  // namespace faprobe
