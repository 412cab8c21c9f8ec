// The host's vector extensions (src/model/host_info.hpp): the flags of a CPU that has AVX512-BF16, AVX-VNNI
// and AMX (a Sapphire Rapids line of /proc/cpuinfo) give them in the compiler's names, one without them
// (Zen 3: AVX2, no AVX-512) does not, an Arm "Features" line gives NEON and SVE, and on this machine the
// CPU's extensions agree with what the CPU itself says through cpuid.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/host_info.hpp"

namespace faprobe {
namespace {

using Names = std::vector<std::string>;

bool has(const Names& names, const std::string& name) {
  for (const std::string& entry : names) {
    if (entry == name) return true;
  }
  return false;
}

TEST(HostInfo, SapphireRapidsFlagsGiveAvx512Bf16AvxVnniAndAmx) {
  const std::string flags =
      " fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 "
      "ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology "
      "pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 "
      "x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cat_l2 "
      "avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb "
      "intel_pt avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd "
      "dtherm ida arat pln pts avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni "
      "avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect cldemote movdiri movdir64b enqcmd fsrm "
      "md_clear serialize tsxldtrk pconfig arch_lbr ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d";
  EXPECT_EQ(vector_extensions_from_cpu_flags(flags),
            (Names{"sse2", "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl",
                   "avx512bf16", "avx512fp16", "avx512vnni", "avxvnni", "amx-tile", "amx-bf16", "amx-int8"}));
}

TEST(HostInfo, Zen3FlagsHaveNoAvx512AndNoAmx) {
  const std::string flags =
      " fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
      "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid "
      "aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx "
      "f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit "
      "wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba ibrs "
      "ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a rdseed adx smap clflushopt clwb "
      "sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf "
      "xsaveerptr rdpru wbnoinvd arat npt lbrv svm_lock nrip_save vaes vpclmulqdq rdpid overflow_recov succor smca";
  const Names extensions = vector_extensions_from_cpu_flags(flags);
  EXPECT_EQ(extensions, (Names{"sse2", "sse4.2", "avx", "avx2", "fma", "f16c"}));
  // A name that only starts like an extension is not that extension ("avx512" is not in this line).
  EXPECT_EQ(vector_extensions_from_cpu_flags("avx512 avx2x amx_tile_x sse4_2"), Names{"sse4.2"});
}

TEST(HostInfo, ArmFeaturesGiveNeonAndSve) {
  EXPECT_EQ(vector_extensions_from_cpu_flags(" fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp "
                                             "cpuid asimdrdm lrcpc dcpop asimddp sve sve2 bf16 i8mm"),
            (Names{"neon", "sve", "sve2"}));
}

TEST(HostInfo, ThisCpusExtensionsAgreeWithCpuid) {
  const HostInfo info = host_info();
  const nlohmann::json json = info;
  ASSERT_TRUE(json.contains("cpu_vector_extensions"));
  EXPECT_EQ(json["cpu_vector_extensions"].get<Names>(), info.cpu_vector_extensions);
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  EXPECT_EQ(has(info.cpu_vector_extensions, "avx2"), bool(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(has(info.cpu_vector_extensions, "avx512f"), bool(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(has(info.cpu_vector_extensions, "fma"), bool(__builtin_cpu_supports("fma")));
  // The widest ISA cpuid reports is among the extensions /proc/cpuinfo lists.
  EXPECT_TRUE(has(info.cpu_vector_extensions, info.cpu_vector_isa == "avx512" ? "avx512f" : info.cpu_vector_isa))
      << info.cpu_vector_isa;
#endif
  // What the binary was compiled for runs here, so the CPU has every extension the compiler used.
  for (const std::string& extension : info.vector_extensions) {
    EXPECT_TRUE(has(info.cpu_vector_extensions, extension)) << extension << " compiled in but not in /proc/cpuinfo";
  }
}

}  // namespace
}  // namespace faprobe
