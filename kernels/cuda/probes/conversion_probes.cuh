// Instruction probes, part 3: the conversions between fp32 and the 16-bit storage types of the instruction
// layer (isa.hpp part 3: cvt.rn.f16.f32, cvt.rn.bf16.f32, their packed .f16x2 / .bf16x2 forms, and the exact
// widenings cvt.f32.f16, cvt.f32.bf16). A kernel body like parts 1 and 2: compiled by nvcc in
// matrix_probes.cu and by the host compiler in probe_suite.cpp, where `faprobe probes` compares the
// emulator's conversions (Eigen's half and bfloat16) with the hardware's, bit for bit, over inputs that
// include ties, overflow, subnormals, infinities and NaNs.
//
// Costs: one word in and one out per thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/probes/warp_probes.cuh"

namespace faprobe::cuda::probes {

enum class ConversionProbe : unsigned {
  f32_to_f16,      // out = float_to_half(x), in bits 0-15
  f32_to_bf16,     // out = float_to_bfloat16(x), in bits 0-15
  f16_to_f32,      // out = the bits of half_to_float(the low 16 bits of the word)
  bf16_to_f32,     // out = the bits of bfloat16_to_float(the low 16 bits of the word)
  f32x2_to_f16x2,  // out = pack_half2(x, y)
  f32x2_to_bf16x2  // out = pack_bfloat162(x, y)
};

// Thread i (global_thread_idx(), threads past in.size() do nothing) converts word in[i], read as the float
// x or as 16-bit storage in its low half; y is the next word (wrapping) read as a float.
FAPROBE_DEVICE void convert(ConversionProbe probe, GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out) {
  const std::size_t i = global_thread_idx();
  if (i >= in.size()) return;
  const std::uint32_t word = in[i];
  const float x = isa::detail::from_bits<float>(word);
  const float y = isa::detail::from_bits<float>(in[(i + 1) % in.size()]);
  const auto low_half = static_cast<std::uint16_t>(word & 0xffffu);
  std::uint32_t result = 0;
  switch (probe) {
    case ConversionProbe::f32_to_f16: result = isa::float_to_half(x); break;
    case ConversionProbe::f32_to_bf16: result = isa::float_to_bfloat16(x); break;
    case ConversionProbe::f16_to_f32: result = isa::detail::to_bits(isa::half_to_float(low_half)); break;
    case ConversionProbe::bf16_to_f32: result = isa::detail::to_bits(isa::bfloat16_to_float(low_half)); break;
    case ConversionProbe::f32x2_to_f16x2: result = isa::pack_half2(x, y); break;
    case ConversionProbe::f32x2_to_bf16x2: result = isa::pack_bfloat162(x, y); break;
  }
  out[i] = result;
}

}  // namespace faprobe::cuda::probes
