// The vector instruction set the CPU kernels use, chosen at run time: a binary built for any x86-64 level
// carries the AVX-512 code paths (compiled through function attributes) and takes the best one the CPU and
// the OS can run. FAPROBE_MAX_CPU_ISA caps the choice (as oneDNN's ONEDNN_MAX_CPU_ISA does), to compare
// paths on one machine or to test the portable one on an AVX-512 CPU:
//   portable      Eigen and what the build's -march gives; every CPU
//   avx512        + AVX512F/BW/DQ/VL kernels (fp32 FMA)
//   avx512-bf16   + AVX512_BF16 dot products (vdpbf16ps) for bf16 inputs
//   amx           + AMX-TILE and AMX-BF16 tile products (tdpbf16ps) for bf16 inputs, where Linux grants the
//                 process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once)
// A cap above what the CPU has changes nothing; a value not in this list is an error.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace faprobe::cpu {

enum class CpuIsa { portable, avx512, avx512_bf16, amx };  // each level includes the ones before it

inline constexpr const char* kMaxCpuIsaVariable = "FAPROBE_MAX_CPU_ISA";

std::string_view to_string(CpuIsa isa);
std::optional<CpuIsa> parse_cpu_isa(std::string_view text);  // "portable", "avx512", "avx512-bf16", "amx"
CpuIsa detected_cpu_isa();  // the highest level this CPU and OS run

// Why a CPU with AMX-TILE and AMX-BF16 does not get the amx level ("" when it does, or has no AMX): the OS does
// not enable the tile state, or refused this process's request for it. Asked once per process.
std::string amx_refusal();

// FAPROBE_MAX_CPU_ISA's value (unset or empty: no cap). Throws std::invalid_argument with one line naming
// the variable and the allowed values when it is not one of them.
std::optional<CpuIsa> max_cpu_isa_setting();

// What the kernels use: the detected level, capped by FAPROBE_MAX_CPU_ISA.
CpuIsa cpu_isa();

// Where a CPU kernel has several paths at one level, it chooses by measurement (cpu.tiled's bf16: its AMX path,
// its AVX512_BF16 path or the fp32 path on the same data, whichever this CPU runs fastest). FAPROBE_CPU_PATH forces
// one where the case can take it, to measure it or to test it: "portable-fp32", "avx512-fp32", "avx512-bf16"
// or "amx-bf16" (FAPROBE_MAX_CPU_ISA still caps). Its value (unset or empty: none); throws
// std::invalid_argument with one line naming the variable and the paths when it is not one of them.
inline constexpr const char* kCpuPathVariable = "FAPROBE_CPU_PATH";
std::optional<std::string> cpu_path_setting();
inline constexpr const char* kCpuPaths[] = {"portable-fp32", "avx512-fp32", "avx512-bf16", "amx-bf16"};

}  // namespace faprobe::cpu
