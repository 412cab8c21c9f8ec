#include "registry.hpp"

namespace faprobe {

// One line per implementation; each factory lives in the implementation's own file.
namespace cpu {
std::unique_ptr<Implementation> make_naive();
std::unique_ptr<Implementation> make_tiled();
std::unique_ptr<Implementation> make_decode();
std::unique_ptr<Implementation> make_decode_splitk();
}  // namespace cpu

const std::vector<std::unique_ptr<Implementation>>& implementations() {
  static const std::vector<std::unique_ptr<Implementation>> all = [] {
    std::vector<std::unique_ptr<Implementation>> list;
    list.push_back(cpu::make_naive());
    list.push_back(cpu::make_tiled());
    list.push_back(cpu::make_decode());
    list.push_back(cpu::make_decode_splitk());
    return list;
  }();
  return all;
}

const Implementation* find_implementation(const std::string& name) {
  for (const auto& impl : implementations()) {
    if (impl->name() == name) return impl.get();
  }
  return nullptr;
}

std::vector<std::string> implementation_names() {
  std::vector<std::string> names;
  for (const auto& impl : implementations()) names.push_back(impl->name());
  return names;
}

std::uint64_t io_bytes(const Case& c) {
  return std::uint64_t(2 * c.q_elements() + 2 * c.kv_elements()) * dtype_bytes(c.dtype);
}

}  // namespace faprobe
