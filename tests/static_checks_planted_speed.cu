// Planted for test_static_checks, beside static_checks_planted.cu (in a file of its own, so that ptxas's per-file
// notes about the other planted kernels do not make the test compile these again entry by entry): the kernels
// that lose the speed the steady-state checks guard, each FA-2's or FA-3's own body with a planted defect (their
// Defect enums), compiled with the production kernels' launch bounds:
// - planted_fa3_slow_softmax: ex2.approx without .ftz (a range check and two multiplies around every MUFU.EX2)
//   and a compare-and-select max (no FMNMX): over the instruction budget;
// - planted_fa3_mask_every_block, planted_fa2_mask_every_block: the mask behind a run-time test in the
//   steady-state loop (a branch per block, index arithmetic per score): over the budget;
// - planted_fa3_unpinned_wait: without wgmma_wait_after ptxas moves the P·V wait above the softmax: no
//   exponential left between the two waits;
// - planted_fa3_scores_read_in_flight: the softmax reads S while its wgmma may still run (wait_group 2 where
//   1 is needed): ptxas serializes the kernel's wgmma ("Potential Performance Loss: wgmma.mma_async
//   instructions are serialized");
// - planted_decode_drain_every_tile: the decode kernel waiting for all its copies (wait_group 0) before each
//   tile: no tile left in flight at the wait;
// - planted_decode_divided_page: the paged decode kernel finding a key's page by division and remainder by
//   the runtime page size: I2F, MUFU.RCP and F2I in the loop;
// - planted_decode_global_table: the paged decode kernel reading the block table from global memory for
//   every 16-byte chunk: 16 LDG per tile.
#include "cuda/common/isa.hpp"
#include "cuda/decode/decode.cuh"
#include "cuda/fa2/fa2.cuh"
#include "cuda/fa3/fa3.cuh"

namespace faprobe::planted {

// FA-3 (bf16, head_dim 128, 128x128 tiles) and FA-2 (bf16, head_dim 128) with a planted loss of speed.
using PlantedFa3 = cuda::fa3::TraitsOf<cuda::isa::BFloat16, 128, 128, 128>;
template <cuda::fa3::Defect kDefect>
__device__ void planted_fa3(const cuda::fa3::Params& params) {
  cuda::fa3::forward_body<cuda::isa::BFloat16, 128, 128, 128, kDefect>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_slow_softmax(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::slow_softmax>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_mask_every_block(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::mask_every_block>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_unpinned_wait(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::unpinned_wait>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_scores_read_in_flight(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::scores_read_in_flight>(params);
}
using PlantedFa2 = cuda::fa2::Traits<128, 128, 32>;
__global__ void __launch_bounds__(PlantedFa2::threads, PlantedFa2::min_ctas_per_sm)
    planted_fa2_mask_every_block(const cuda::fa2::Params params) {
  cuda::fa2::forward_body<cuda::isa::BFloat16, 128, 128, 32, cuda::fa2::Defect::mask_every_block>(params);
}

// The decode kernel (bf16, head_dim 128), contiguous or paged, with a planted loss of speed.
using PlantedDecode = cuda::decode::Traits<128>;
__global__ void __launch_bounds__(PlantedDecode::threads, PlantedDecode::min_ctas_per_sm)
    planted_decode_drain_every_tile(const cuda::decode::Params params) {
  cuda::decode::attend_body<cuda::isa::BFloat16, 128, /*kPaged=*/false, cuda::decode::Defect::drain_every_tile>(params);
}
__global__ void __launch_bounds__(PlantedDecode::threads, PlantedDecode::min_ctas_per_sm)
    planted_decode_divided_page(const cuda::decode::Params params) {
  cuda::decode::attend_body<cuda::isa::BFloat16, 128, /*kPaged=*/true, cuda::decode::Defect::divided_page>(params);
}
__global__ void __launch_bounds__(PlantedDecode::threads, PlantedDecode::min_ctas_per_sm)
    planted_decode_global_table(const cuda::decode::Params params) {
  cuda::decode::attend_body<cuda::isa::BFloat16, 128, /*kPaged=*/true, cuda::decode::Defect::global_table>(params);
}

}  // namespace faprobe::planted
