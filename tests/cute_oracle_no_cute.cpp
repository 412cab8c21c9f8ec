// The CuTe side of the CuTe oracle where CuTe's headers were not found at configure time: every function
// throws, and the tests skip before calling any (FAPROBE_HAVE_CUTE is 0; FAPROBE_CUTE_MISSING says why).
#include <stdexcept>

#include "cute_oracle_tables.hpp"

namespace faprobe::cute_oracle::cute_side {
namespace {
[[noreturn]] void no_cute() { throw std::logic_error("faprobe was configured without CuTe's headers"); }
}  // namespace

MmaLayouts mma_layouts(MmaElement) { no_cute(); }
LayoutTable ldmatrix_layout(unsigned, bool) { no_cute(); }
LayoutTable stmatrix_layout(unsigned, bool) { no_cute(); }
std::vector<std::uint64_t> gmma_descriptors(const GmmaTile&) { no_cute(); }
LayoutTable gmma_offsets(const GmmaTile&) { no_cute(); }
LayoutTable wgmma_d_layout(WgmmaElement, unsigned) { no_cute(); }
LayoutTable wgmma_a_layout(WgmmaElement) { no_cute(); }
LayoutTable tma_box_layout(const TmaBox&) { no_cute(); }

}  // namespace faprobe::cute_oracle::cute_side
