// The one list of implementations (the interface they share is model/implementation.hpp). Nothing else in
// the program, or in the unit tests, knows which implementations exist: adding one is its own file, its line
// in its folder's CMakeLists.txt (kernels/cpu/, or a CUDA kernel's folder, which kernels/cuda/CMakeLists.txt
// adds) and its factory listed: a CPU kernel's in kernels/cpu/factories.hpp (declared and listed), any other's
// in registry.cpp. tests/test_cpu_kernels.cpp checks every CPU implementation registered here against the
// reference.
// Plugins (harness/plan/plugins.hpp) add theirs at run time, after the built-in ones, through register_implementation.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/implementation.hpp"

namespace faprobe {

// All registered implementations, in the order tables list them (variants apart).
const std::vector<std::unique_ptr<Implementation>>& implementations();
// The variants (Implementation::variant_of: one tile of a kernel, "cuda.fa3@128x176"): run only when named.
const std::vector<std::unique_ptr<Implementation>>& variant_implementations();
// An implementation or a variant by name; nullptr when unknown.
const Implementation* find_implementation(const std::string& name);
std::vector<std::string> implementation_names();  // variants apart
std::vector<std::string> variant_names();

// Appends an implementation to the list; throws UsageError when its name is taken, naming `origin` (the
// plugin file it came from). Implementations are never removed, so pointers to them stay valid.
void register_implementation(std::unique_ptr<Implementation> impl, const std::string& origin);

}  // namespace faprobe
