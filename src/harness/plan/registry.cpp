#include "harness/plan/registry.hpp"

#include <fmt/format.h>

#include "cpu/factories.hpp"
#include "cuda/factories.hpp"
#include "model/errors.hpp"

namespace faprobe {

// One line per implementation below (the CPU ones: kernels/cpu/factories.hpp's list); each factory lives in
// the implementation's own file.

namespace {

std::vector<std::unique_ptr<Implementation>>& registered() {
  static std::vector<std::unique_ptr<Implementation>> all = [] {
    std::vector<std::unique_ptr<Implementation>> list;
    for (const cpu::Factory make : cpu::kFactories) list.push_back(make());  // kernels/cpu/factories.hpp
    list.push_back(cuda::make_naive(cuda::Target::gpu));
    list.push_back(cuda::make_fa1(cuda::Target::gpu));
    list.push_back(cuda::make_fa2(cuda::Target::gpu));
    list.push_back(cuda::make_fa3(cuda::Target::gpu));
    list.push_back(cuda::make_fa3_incoherent(cuda::Target::gpu));
    list.push_back(cuda::make_decode(cuda::Target::gpu));
    list.push_back(cuda::make_decode_splitk(cuda::Target::gpu));
    list.push_back(cuda::make_cudnn());
    list.push_back(cuda::make_naive(cuda::Target::emulator));
    list.push_back(cuda::make_fa1(cuda::Target::emulator));
    list.push_back(cuda::make_fa2(cuda::Target::emulator));
    list.push_back(cuda::make_fa3(cuda::Target::emulator));
    list.push_back(cuda::make_fa3_incoherent(cuda::Target::emulator));
    list.push_back(cuda::make_decode(cuda::Target::emulator));
    list.push_back(cuda::make_decode_splitk(cuda::Target::emulator));
    return list;
  }();
  return all;
}

// The variants: implementations run only when named (Implementation::variant_of), one line per kernel with
// variants.
std::vector<std::unique_ptr<Implementation>>& registered_variants() {
  static std::vector<std::unique_ptr<Implementation>> all = [] {
    std::vector<std::unique_ptr<Implementation>> list;
    const auto append = [&list](std::vector<std::unique_ptr<Implementation>> more) {
      for (auto& impl : more) list.push_back(std::move(impl));
    };
    append(cuda::make_fa2_variants(cuda::Target::gpu));
    append(cuda::make_fa3_variants(cuda::Target::gpu));
    append(cuda::make_fa2_variants(cuda::Target::emulator));
    append(cuda::make_fa3_variants(cuda::Target::emulator));
    return list;
  }();
  return all;
}

}  // namespace

const std::vector<std::unique_ptr<Implementation>>& implementations() { return registered(); }

const std::vector<std::unique_ptr<Implementation>>& variant_implementations() { return registered_variants(); }

void register_implementation(std::unique_ptr<Implementation> impl, const std::string& origin) {
  if (find_implementation(impl->name()) != nullptr) {
    throw UsageError(fmt::format("{}: implementation {} is already registered (names must be unique among the "
                                 "built-in implementations and every plugin loaded)", origin, impl->name()));
  }
  registered().push_back(std::move(impl));
}

const Implementation* find_implementation(const std::string& name) {
  for (const auto& impl : implementations()) {
    if (impl->name() == name) return impl.get();
  }
  for (const auto& impl : variant_implementations()) {
    if (impl->name() == name) return impl.get();
  }
  return nullptr;
}

std::vector<std::string> implementation_names() {
  std::vector<std::string> names;
  for (const auto& impl : implementations()) names.push_back(impl->name());
  return names;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& impl : variant_implementations()) names.push_back(impl->name());
  return names;
}

}  // namespace faprobe
