// cuda.cudnn (kernels/cuda/cudnn.cpp) and the loader of cuDNN it runs on (kernels/cuda/runtime/cudnn_library.hpp).
//   - Registered once, for the GPU only (no emu.cudnn), and without a GPU every case is unsupported with a
//     reason that names the missing GPU (or the missing CUDA build).
//   - The loader through FAPROBE_CUDNN_LIBRARY: a missing file, a file that is not a library, a library
//     without cuDNN's entry points (the fake NVML) and a cuDNN that is not version 9 (a fake cuDNN 8.9.6:
//     the planted wrong library) are each unavailable with the reason, and nothing throws or crashes; a fake
//     cuDNN 9.19.0 with the entry points is taken, with its version, path and source.
//   - The search without FAPROBE_CUDNN_LIBRARY finds the real cuDNN where this machine has one (the CUDA
//     toolkit's; cudnnGetVersion needs no GPU) and reports its version; skipped with the reason otherwise.
//   - The Python site-packages directories the search looks in, over a planted tree.
//   - cuda.cudnn's graph through the frontend's validate() on the host for sm_90 and sm_80 (no GPU needed,
//     this machine's cuDNN is): faprobe's layouts, GQA, MQA, every mask and decode taken; fp32, fp8, a
//     head_dim that is not a multiple of 8, bottom-right causal with seq_q > seq_k and sm_75 refused with the
//     frontend's reasons.
//   - On a GPU: one odd-shaped GQA case through the harness, checked against the float64 reference (O and
//     the LSE), with cuDNN's version, library and plan in the record; skipped without one.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "case_support.hpp"
#include "cuda/cudnn.hpp"
#include "cuda/launchers.hpp"
#include "cuda/runtime/cudnn_library.hpp"
#include "cuda/runtime/gpu.hpp"
#include "harness/plan/registry.hpp"
#include "harness/run/pair_run.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;
using test_support::make_case;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const Implementation& cudnn_impl() {
  const Implementation* impl = find_implementation("cuda.cudnn");
  if (impl == nullptr) throw std::runtime_error("cuda.cudnn is not registered");
  return *impl;
}

// --- Registration, and no GPU ---

TEST(CudnnImplementation, IsRegisteredOnceForTheGpuOnly) {
  const std::vector<std::string> names = implementation_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "cuda.cudnn"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "emu.cudnn"), 0);  // the emulator cannot run cuDNN's engines
  const Implementation& impl = cudnn_impl();
  EXPECT_TRUE(impl.timed());
  EXPECT_TRUE(impl.runs_on_gpu());
  EXPECT_TRUE(impl.isolate_by_default());
}

TEST(CudnnImplementation, WithoutAGpuEveryCaseIsUnsupportedAndSaysWhy) {
  if (!gpu::devices().empty()) GTEST_SKIP() << "this machine has a GPU: cuda.cudnn's cases may run";
  const std::string expected = cuda::built_with_cuda() ? "no CUDA device" : "built without CUDA";
  std::vector<Case> cases;
  for (DType dtype : {DType::fp16, DType::bf16, DType::fp32, DType::fp8_e4m3})
    for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left})
      for (std::int64_t head_dim : {64, 72, 128, 256}) {
        cases.push_back(make_case(2, 8, 2, 77, 257, head_dim, dtype, mask));
      }
  cases.push_back(make_case(1, 4, 1, 1, 1000, 64, DType::bf16, Mask::none, Mode::decode));
  cases.push_back(test_support::make_decode_case({100, 37}, 16, 4, 2, 64, DType::fp16));  // paged, variable lengths
  for (const Case& c : cases) {
    const std::string reason = cudnn_impl().supports(c);
    EXPECT_TRUE(contains(reason, expected)) << c.label() << ": " << reason;
  }
  // The harness records such a case as unsupported, with that reason, and runs nothing.
  RunOptions options;
  options.timing = false;
  const Record record = run_one(cudnn_impl(), cases.front(), MeasureSettings{}, options);
  EXPECT_EQ(record.status, Status::unsupported);
  EXPECT_TRUE(contains(record.reason, expected)) << record.reason;
  EXPECT_EQ(record.impl, "cuda.cudnn");
}

// --- The loader ---

class CudnnLibraryTest : public test_support::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    const char* setting = ::getenv(gpu::kCudnnLibraryVariable);
    if (setting != nullptr) saved_ = setting;
    had_setting_ = setting != nullptr;
  }
  void TearDown() override {
    if (had_setting_) {
      ::setenv(gpu::kCudnnLibraryVariable, saved_.c_str(), 1);
    } else {
      ::unsetenv(gpu::kCudnnLibraryVariable);
    }
    TempDirTest::TearDown();
  }
  // find_cudnn_library() with FAPROBE_CUDNN_LIBRARY set to `file`.
  static gpu::CudnnLibrary find_with(const std::string& file) {
    ::setenv(gpu::kCudnnLibraryVariable, file.c_str(), 1);
    return gpu::find_cudnn_library();
  }
  // Unavailable, with a reason that names the file, the variable and `expected`.
  static void expect_unavailable(const gpu::CudnnLibrary& library, const std::string& file,
                                 const std::string& expected) {
    EXPECT_FALSE(library.available());
    EXPECT_EQ(library.handle, nullptr);
    EXPECT_EQ(library.version, 0u);
    EXPECT_EQ(library.version_text(), "");
    EXPECT_TRUE(contains(library.reason_unavailable, file)) << library.reason_unavailable;
    EXPECT_TRUE(contains(library.reason_unavailable, gpu::kCudnnLibraryVariable)) << library.reason_unavailable;
    EXPECT_TRUE(contains(library.reason_unavailable, expected)) << library.reason_unavailable;
    const nlohmann::json summary = library.summary();
    EXPECT_EQ(summary, (nlohmann::json{{"available", false}, {"reason_unavailable", library.reason_unavailable}}));
  }

 private:
  std::string saved_;
  bool had_setting_ = false;
};

TEST(CudnnVersion, IsReadTheWayEachMajorEncodesIt) {
  EXPECT_EQ(gpu::cudnn_version_text(91900), "9.19.0");
  EXPECT_EQ(gpu::cudnn_version_text(90100), "9.1.0");
  EXPECT_EQ(gpu::cudnn_version_text(91002), "9.10.2");
  EXPECT_EQ(gpu::cudnn_version_text(8906), "8.9.6");  // cuDNN 8: major·1000 + minor·100 + patch
  EXPECT_EQ(gpu::cudnn_version_text(0), "");
}

TEST_F(CudnnLibraryTest, AMissingFileIsUnavailableWithTheReason) {
  const std::string file = path("no-such-libcudnn.so.9");
  expect_unavailable(find_with(file), file, "cannot load");
}

TEST_F(CudnnLibraryTest, AFileThatIsNotALibraryIsUnavailableWithTheReason) {
  const std::string file = path("libcudnn.so.9");
  std::ofstream(file) << "not a shared library\n";
  expect_unavailable(find_with(file), file, "cannot load");
}

TEST_F(CudnnLibraryTest, ALibraryWithoutCudnnsEntryPointsIsNotTaken) {
  const std::string file = FAPROBE_NOT_CUDNN_LIBRARY;  // the fake NVML: a library, but not cuDNN
  const gpu::CudnnLibrary library = find_with(file);
  expect_unavailable(library, file, "is not cuDNN: it has no cudnnGetVersion");
  EXPECT_TRUE(contains(library.reason_unavailable, "cudnnBackendExecute")) << library.reason_unavailable;
}

// The planted defect: a library with every entry point that is cuDNN 8, whose ABI is not the cudnn.h faprobe
// builds against. Taking it would pass the symbol check; the version check must refuse it.
TEST_F(CudnnLibraryTest, PlantedCudnn8IsRefusedByItsVersion) {
  const std::string file = FAPROBE_FAKE_CUDNN8;
  expect_unavailable(find_with(file), file, "is cuDNN 8.9.6; cuda.cudnn needs cuDNN 9");
}

TEST_F(CudnnLibraryTest, ACudnn9WithTheEntryPointsIsTakenWithItsVersionAndSource) {
  const std::string file = FAPROBE_FAKE_CUDNN9;
  const gpu::CudnnLibrary library = find_with(file);
  ASSERT_TRUE(library.available()) << library.reason_unavailable;
  EXPECT_EQ(library.version, 91900u);
  EXPECT_EQ(library.version_text(), "9.19.0");
  EXPECT_EQ(fs::canonical(library.path), fs::canonical(file));
  EXPECT_EQ(library.source, gpu::kCudnnLibraryVariable);
  EXPECT_TRUE(library.reason_unavailable.empty());
  const nlohmann::json summary = library.summary();
  EXPECT_EQ(summary["version"], "9.19.0");
  EXPECT_EQ(summary["version_number"], 91900);
  EXPECT_EQ(summary["library"], library.path);
  // Loading again (another find) is the same library, not a failure.
  EXPECT_EQ(find_with(file).handle, library.handle);
}

TEST_F(CudnnLibraryTest, TheSearchFindsThisMachinesCudnnAndItsVersion) {
  ::unsetenv(gpu::kCudnnLibraryVariable);
  const gpu::CudnnLibrary library = gpu::find_cudnn_library();
  if (!library.available()) GTEST_SKIP() << "no cuDNN on this machine: " << library.reason_unavailable;
  EXPECT_GE(library.version, 90000u);
  EXPECT_LT(library.version, 100000u);
  EXPECT_EQ(library.version_text().rfind("9.", 0), 0u) << library.version_text();
  EXPECT_TRUE(fs::is_regular_file(library.path)) << library.path;
  EXPECT_FALSE(library.source.empty());
  // The file it found, named explicitly, is the same cuDNN.
  const gpu::CudnnLibrary again = find_with(library.path);
  ASSERT_TRUE(again.available()) << again.reason_unavailable;
  EXPECT_EQ(again.version, library.version);
  EXPECT_EQ(again.source, gpu::kCudnnLibraryVariable);
#if defined(FAPROBE_TOOLKIT_CUDNN_VERSION)
  // Where the toolkit's own cuDNN is the one found, it is the version of the toolkit's cudnn.h.
  const std::string toolkit = fs::canonical(FAPROBE_TOOLKIT_ROOT).string() + "/";
  if (fs::canonical(library.path).string().rfind(toolkit, 0) == 0) {
    EXPECT_EQ(library.version, std::size_t(FAPROBE_TOOLKIT_CUDNN_VERSION)) << library.path;
  }
#endif
}

TEST_F(CudnnLibraryTest, PythonSitePackagesAreFoundFromThePythonsOnThePath) {
  // A virtual environment whose python3 links to a "system" Python elsewhere, a directory on the PATH
  // without python3, and a user site under HOME.
  const fs::path system = directory_ / "system", venv = directory_ / "venv", home = directory_ / "home";
  for (const fs::path& directory : {system / "bin", system / "lib/python3.11/site-packages",
                                    system / "local/lib/python3.11/dist-packages", venv / "bin",
                                    venv / "lib/python3.12/site-packages", home / ".local/lib/python3.11/site-packages",
                                    directory_ / "empty/bin"}) {
    fs::create_directories(directory);
  }
  std::ofstream(system / "bin/python3.11") << "#!/bin/sh\n";
  fs::create_symlink(system / "bin/python3.11", system / "bin/python3");
  fs::create_symlink(system / "bin/python3", venv / "bin/python3");
  const std::string path_variable =
      (directory_ / "empty/bin").string() + "::" + (venv / "bin").string() + ":" + (system / "bin").string();
  std::vector<std::string> found = gpu::python_site_directories(path_variable, home.string());
  for (std::string& directory : found) directory = fs::canonical(directory).string();  // as TMPDIR may be a link
  std::vector<std::string> expected;
  for (const fs::path& directory : {venv / "lib/python3.12/site-packages", system / "lib/python3.11/site-packages",
                                    system / "local/lib/python3.11/dist-packages",
                                    home / ".local/lib/python3.11/site-packages"}) {
    expected.push_back(fs::canonical(directory).string());
  }
  EXPECT_EQ(found, expected);  // each once, in search order: the venv's, then the Python it links to, then ~/.local
  EXPECT_TRUE(gpu::python_site_directories("", "").empty());
}

// --- The graph, validated on the host for a given architecture (no GPU) ---

// cuda.cudnn's graph for c as the frontend's validate() sees it on an sm_<sm> GPU.
std::string graph_support(const Case& c, int sm) {
  return cuda::cudnn_graph_support(c, sm);
}

TEST(CudnnGraph, FaprobesCasesPassTheFrontendsRulesAndTheOthersAreRefusedWithItsWords) {
#if !defined(FAPROBE_TEST_CUDNN_FRONTEND)
  const std::string reason = graph_support(make_case(1, 4, 4, 64, 64, 64, DType::bf16, Mask::none), 90);
  EXPECT_TRUE(contains(reason, "built without")) << reason;
  GTEST_SKIP() << "built without the cudnn-frontend graph: " << reason;
#else
  if (const gpu::CudnnLibrary& library = gpu::cudnn_library(); !library.available()) {
    EXPECT_TRUE(contains(graph_support(make_case(1, 4, 4, 64, 64, 64, DType::bf16, Mask::none), 90),
                         "cuDNN unavailable: " + library.reason_unavailable));
    GTEST_SKIP() << "no cuDNN on this machine: " << library.reason_unavailable;
  }
  // Taken on Hopper and Ampere: GQA, MQA, seq_q != seq_k, every mask, fp16 and bf16, decode.
  for (int sm : {90, 80}) {
    for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left}) {
      for (const Case& c : {make_case(2, 8, 2, 77, 257, 64, DType::bf16, mask),
                            make_case(1, 4, 1, 128, 128, 128, DType::fp16, mask),
                            make_case(3, 6, 6, 1, 1000, 64, DType::bf16, mask, Mode::decode)}) {
        EXPECT_EQ(graph_support(c, sm), "") << "sm_" << sm << " " << c.label();
      }
    }
  }
  EXPECT_EQ(graph_support(make_case(1, 8, 8, 256, 256, 256, DType::bf16, Mask::causal), 90), "");
  // Refused, each with its reason.
  const std::pair<Case, std::string> refused[] = {
      {make_case(1, 8, 8, 64, 64, 64, DType::fp32, Mask::none), "fp32 is not supported"},
      {make_case(1, 8, 8, 64, 64, 64, DType::fp8_e4m3, Mask::none), "fp8_e4m3 is not supported"},
      {make_case(1, 8, 8, 64, 64, 100, DType::bf16, Mask::none), "multiple of 8"},
      // bottom-right causal with more queries than keys: rows that see no key, which cuDNN cannot give
      {make_case(1, 8, 8, 300, 100, 64, DType::bf16, Mask::causal), "Bottom right causal mask does not support"},
  };
  for (const auto& [c, expected] : refused) {
    const std::string reason = graph_support(c, 90);
    EXPECT_TRUE(contains(reason, expected)) << c.label() << ": " << reason;
  }
  EXPECT_TRUE(contains(graph_support(make_case(1, 8, 8, 64, 64, 64, DType::bf16, Mask::none), 75), "SM80"));
  // Top-left causal has no such limit: row i sees keys j <= i.
  EXPECT_EQ(graph_support(make_case(1, 8, 8, 300, 100, 64, DType::bf16, Mask::causal_top_left), 90), "");
#endif
}

// --- On a GPU ---

TEST(CudnnOnGpu, AnOddGqaCaseMatchesTheReferenceWithItsLse) {
  if (gpu::devices().empty()) GTEST_SKIP() << "no GPU: " << gpu::no_device_reason();
  for (Mask mask : {Mask::causal, Mask::causal_top_left, Mask::none}) {
    const Case c = make_case(2, 8, 2, 77, 257, 64, DType::bf16, mask);
    const std::string reason = cudnn_impl().supports(c);
    if (!reason.empty()) GTEST_SKIP() << c.label() << ": " << reason;
    RunOptions options;
    options.timing = false;
    const Record record = run_one(cudnn_impl(), c, MeasureSettings{}, options);
    ASSERT_EQ(record.status, Status::ok) << c.label() << ": " << record.reason;
    ASSERT_TRUE(record.verify.has_value());
    EXPECT_TRUE(record.verify->passed) << record.verify->note;
    EXPECT_TRUE(record.verify->lse_checked);
    for (const char* field : {"cudnn_version", "cudnn_library", "cudnn_library_source", "plan", "workspace_bytes"}) {
      EXPECT_TRUE(record.details.contains(field)) << field << " in " << record.details.dump();
    }
    EXPECT_EQ(record.details["workspace_bytes"].get<std::uint64_t>(), record.memory.workspace_bytes);
    EXPECT_LE(record.memory.peak_bytes, record.memory.predicted_bytes);
  }
}

}  // namespace
}  // namespace faprobe
