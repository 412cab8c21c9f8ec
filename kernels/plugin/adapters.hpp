// The two adapters that make a plugin's implementation descriptor a faprobe implementation, one per
// device of include/faprobe/plugin.h: plugin_cpu.cpp and plugin_cuda.cpp. The loader
// (src/harness/plan/plugins.hpp) checks the descriptor and registers what these return.
#pragma once
#include <memory>

#include "model/implementation.hpp"
#include "plugin/plugin_abi.hpp"

namespace faprobe::plugin {

std::unique_ptr<Implementation> make_cpu_plugin(Descriptor descriptor);   // FAPROBE_DEVICE_CPU
std::unique_ptr<Implementation> make_cuda_plugin(Descriptor descriptor);  // FAPROBE_DEVICE_CUDA

}  // namespace faprobe::plugin
