// The GPU emulator: runs a CUDA launch on the CPU so that kernels written on the instruction layer
// (cuda/common/isa.hpp) can be verified on machines without a GPU.
//
// How it works: launch() runs the grid CTA by CTA, in linear block order (x fastest) by default. Each CTA's
// threads are cooperative fibers (a hand-written stack switch on x86-64, POSIX ucontext elsewhere) on the
// calling OS thread, scheduled round robin: a fiber runs until it blocks at a barrier or a warp collective, or
// exits. A barrier or collective completes when
// its last participant arrives; that fiber releases the others and carries on. When no fiber can run and
// some have not exited, the launch is deadlocked and launch() throws EmulationError naming the kernel,
// block, the stuck threads and what each waits for. An exception thrown by a kernel body is caught at its
// fiber's entry (it never unwinds across a context switch); the other fibers of the CTA are then resumed
// with a cancellation that unwinds their stacks, and launch() throws EmulationError on the caller's side.
//
// The emulator as an adversary. A kernel that is right under one fixed schedule can still be wrong on the
// GPU through races and timing, so the emulator looks for exactly those bugs:
//   - Asynchronous results arrive late and are poison until then. A cp.async's bytes land in shared memory
//     when the issuing thread's cp.async.wait_group covers its group; a TMA load's when the mbarrier phase
//     its bytes complete does; a wgmma's accumulators when wgmma.wait_group retires it. Until then the
//     destination holds poison (0xFF bytes, NaN; accumulators a NaN pattern), and with the checks on a read
//     of it is reported naming the copy; so is a write to an in-flight accumulator, a change of the A
//     registers of an in-flight wgmma, a write to shared memory an in-flight wgmma reads, a wgmma after a
//     wgmma.wait_group without a wgmma.fence, and a thread that exits with wgmma in flight.
//   - Every shared-memory access goes through the race detector (race_detector.hpp): two accesses from
//     different threads, one a write, that no barrier, named barrier, mbarrier phase or __syncwarp orders,
//     are reported with both threads and the byte; so is an async-proxy read (wgmma, TMA store) of generic
//     writes without fence.proxy.async, and a named barrier left with arrivals pending at the CTA's end.
//   - Schedules vary (LaunchConfig::schedule_seed, ScopedSchedule, FAPROBE_EMU_SCHEDULE=<seed>): with a
//     seed other than 0, each round of the scheduler runs the runnable fibers in a freshly shuffled order,
//     fibers also yield at random at instruction-layer calls, and the CTAs run in a shuffled order. Results
//     must not depend on it.
// FAPROBE_EMU_CHECKS=off (or ScopedChecks) turns the race detector and the named reports of early reads
// off for speed; copies still land late and the poison stays, so an early read still shows as NaN.
//
// Deviations from hardware, on purpose: barriers count threads, not warps, so a thread that exits while
// others wait at bar.sync is a deadlock (undefined behaviour in CUDA); warp collectives require every lane
// of the member mask to arrive with the same mask and instruction, and report a mismatch at once. Only
// bar.warp.sync (__syncwarp) orders the memory accesses of lanes of one warp; shuffles, votes and the
// warp-wide matrix instructions do not. Reads of an in-flight accumulator are not seen as they happen
// (registers are plain C++ variables): they read the NaN poison, and a value written back is reported when
// the wgmma retires. Shared memory is filled with 0xFF bytes (a float NaN) at each CTA start.
//
// Costs: one stack per thread of a CTA (LaunchConfig::stack_bytes, default 256 KiB, mmap'd once per
// launch with a guard page below each, committed only as touched), reused by every CTA; a fiber switch
// is a few nanoseconds on x86-64 (registers and stack pointer, no system call; a swapcontext elsewhere,
// ~0.1-1 µs, as it saves the signal mask), and a 1024-thread CTA costs ~2 switches per thread per barrier; with the checks on, the race detector's costs (race_detector.hpp). Verification, not
// speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace faprobe::emu {

// A CUDA dim3: grid or block extents, and block or thread indices.
struct Dim3 {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
  std::size_t count() const { return std::size_t{x} * y * z; }
};

struct LaunchConfig {
  std::string kernel_name;               // named in every error
  Dim3 grid;                             // CTAs, run one at a time in linear order
  Dim3 block;                            // threads per CTA, at most 1024 as on the GPU (device.hpp)
  std::size_t shared_bytes = 0;          // dynamic shared memory per CTA, at most sm_90's 227 KiB (device.hpp)
  std::size_t stack_bytes = 256 * 1024;  // per-thread fiber stack
  // 0: the default schedule (or ScopedSchedule's, or FAPROBE_EMU_SCHEDULE's); else the seed of a varied one.
  std::uint64_t schedule_seed = 0;
};

// The schedule seed launches use when their LaunchConfig names none, while the object lives (tests run a
// kernel under several schedules; for the process, not thread-safe: set it before launching); 0 restores
// the default schedule.
class ScopedSchedule {
 public:
  explicit ScopedSchedule(std::uint64_t seed);
  ~ScopedSchedule();
  ScopedSchedule(const ScopedSchedule&) = delete;
  ScopedSchedule& operator=(const ScopedSchedule&) = delete;

 private:
  std::uint64_t previous_;
  bool had_previous_;
};
// The same for the checks (race detector and named early-read reports), which FAPROBE_EMU_CHECKS=off
// turns off by default.
class ScopedChecks {
 public:
  explicit ScopedChecks(bool enabled);
  ~ScopedChecks();
  ScopedChecks(const ScopedChecks&) = delete;
  ScopedChecks& operator=(const ScopedChecks&) = delete;

 private:
  int previous_;
};
// What a launch now would use: its seed (0 default) and whether the checks are on.
std::uint64_t effective_schedule_seed(std::uint64_t config_seed);
bool checks_enabled();

// Every error the emulator detects: deadlocks, out-of-bounds accesses, misuse of an instruction, and an
// exception escaping a kernel body. The message names the kernel, block and thread(s).
class EmulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs kernel_body once per thread of every CTA of config.grid; returns when the grid has finished.
// Throws EmulationError on any detected error. Not reentrant: a kernel body may not launch.
void launch(const LaunchConfig& config, std::function<void()> kernel_body);

// --- What the running thread sees; each throws EmulationError outside a launch. ---
Dim3 thread_idx();
Dim3 block_idx();
Dim3 block_dim();
Dim3 grid_dim();
unsigned thread_linear_idx();  // x fastest, as CUDA numbers the threads of a CTA into warps
unsigned lane_id();            // thread_linear_idx() % 32
unsigned warp_id();            // thread_linear_idx() / 32
// "kernel 'name' block (x,y,z) thread (x,y,z)", or "outside any launch".
std::string current_location();

// --- CTA barriers (PTX bar.sync / bar.arrive; __syncthreads is bar_sync(0, 0)). ---
inline constexpr unsigned barrier_count = 16;  // named barriers per CTA, ids 0..15
// Waits until thread_count threads (0: every thread of the CTA) have arrived at barrier id.
void bar_sync(unsigned id, unsigned thread_count);
// Counts the calling thread at barrier id without waiting (producer side of a named barrier).
void bar_arrive(unsigned id, unsigned thread_count);

// --- Warp collectives, with the operands of the PTX instructions. ---
enum class ShuffleMode { idx, up, down, bfly };
// shfl.sync.<mode>.b32 d, a, b, c, membermask: value is a, source_operand b (lane, delta or lane mask),
// clamp_segmask c (clamp value in bits 0-4, segment mask in bits 8-12).
std::uint32_t shfl_sync(ShuffleMode mode, std::uint32_t member_mask, std::uint32_t value,
                        std::uint32_t source_operand, std::uint32_t clamp_segmask);
// vote.sync.ballot.b32: bit i set when lane i of member_mask has predicate true.
std::uint32_t vote_ballot(std::uint32_t member_mask, bool predicate);
bool vote_all(std::uint32_t member_mask, bool predicate);
bool vote_any(std::uint32_t member_mask, bool predicate);

// --- Warp-level matrix instructions: every lane of a whole warp (member mask all 32 lanes, as .aligned
// requires) passes its own fragment, and receives its own; the layouts are in collectives.cpp beside the code
// that applies them, with the PTX ISA figure each follows. ---
enum class MmaInput { f16, bf16 };
// mma.sync.aligned.m16n8k16.row.col.f32.<input>.<input>.f32 {d0..d3}, {a0..a3}, {b0,b1}, {c0..c3}: D = A·B + C,
// A 16x16, B 16x8, C and D 16x8 in fp32. Each element of D is accumulated in a fixed order, in fp32:
// acc = C[m][n]; then acc += A[m][k]·B[k][n] for k = 0, 1, ..., 15, each product exact in fp32 (11- or
// 8-bit significands; only bf16 products below fp32's range round), each addition rounded to nearest even. Hardware's internal order and precision are
// unspecified, so only inputs whose partial sums are exact (small integers) must give hardware's bits.
void mma_m16n8k16(MmaInput input, const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], const float (&c)[4],
                  float (&d)[4]);
// ldmatrix.sync.aligned.m8n8.x<matrices>[.trans].shared.b16: matrices is 1, 2 or 4. Lanes 0..8·matrices-1
// each supply the shared-memory byte offset of one 16-byte row (matrix lane/8, row lane%8), 16-byte aligned
// and inside the launch's shared memory (else EmulationError naming the lane); the other lanes' offsets
// are ignored. d[i] receives the lane's register of matrix i; d[matrices..3] are left unchanged.
void ldmatrix(unsigned matrices, bool transpose, std::size_t row_offset_bytes, std::uint32_t (&d)[4]);

// --- Asynchronous copies: cp.async.cg.shared.global, cp.async.commit_group, cp.async.wait_group. ---
// cp_async reads the bytes (4, 8 or 16) of source at issue and checks the shared range as shared_memory()
// does, with alignment to the copy's size; the destination holds 0xFF poison until the issuing thread's
// cp_async_wait_group covers the copy's group, when the bytes land (PTX: the copies of a group are complete
// once wait_group leaves at most N newer groups pending; copies never committed are not covered). Groups
// are counted per thread: a wait on more groups than exist, or with nothing committed, returns at once.
void cp_async(std::size_t shared_offset_bytes, const void* source, std::size_t bytes);
void cp_async_commit_group();
void cp_async_wait_group(unsigned pending_groups);

// --- Hopper's transaction barriers: PTX ISA "Parallel Synchronization and Communication Instructions:
// mbarrier" (sm_90 for expect_tx and try_wait). An mbarrier is an 8-byte object in shared memory; the
// emulator keeps its state beside the launch, by shared offset (the 8 bytes must lie in the launch's shared
// memory, 8-byte aligned): the arrival count it was initialized with, the arrivals and transaction bytes
// still pending in the current phase, and how many phases have completed. A phase completes when both
// pending counts are zero (PTX: "pending arrival count" and "tx-count"); the next phase then starts with the
// same arrival count and no transaction bytes. A barrier's state lives for one CTA, as shared memory does.
// When a CTA ends, a barrier whose transaction bytes are not settled (expect_tx and the copies' bytes
// disagree, so some phase completed before its data landed or never can) is reported as an EmulationError.
// mbarrier.init.shared::cta.b64 [offset], count: count in 1..2^20 - 1 (PTX's limit).
void mbarrier_init(std::size_t offset_bytes, unsigned count);
// mbarrier.expect_tx: the current phase waits for tx_bytes more bytes of asynchronous copies.
void mbarrier_expect_tx(std::size_t offset_bytes, std::uint32_t tx_bytes);
// mbarrier.arrive.shared::cta.b64 (with .expect_tx when tx_bytes > 0: expect_tx first, then arrive). Returns
// the parity of the phase the arrival counted in (the low bit of PTX's state token).
unsigned mbarrier_arrive(std::size_t offset_bytes, std::uint32_t tx_bytes);
// The complete-tx side of an asynchronous copy (cp.async.bulk with .mbarrier::complete_tx::bytes), or
// mbarrier.complete_tx by a thread standing in for one: the pending transaction bytes drop by tx_bytes. A
// TMA load's bytes land when the phase they count in completes (land_async_copy).
void mbarrier_complete_tx(std::size_t offset_bytes, std::uint32_t tx_bytes);
// mbarrier.try_wait.parity in a loop (PTX's waiting idiom): returns once the phase of parity `parity` has
// completed, i.e. at once unless the current phase has that parity, else when the current phase completes.
// The waiting thread blocks; if no thread can complete the phase the launch reports a deadlock naming the
// barrier, its pending arrivals and transaction bytes, instead of hanging.
void mbarrier_wait_parity(std::size_t offset_bytes, unsigned parity);
// mbarrier.test_wait.parity: the same test without waiting.
bool mbarrier_test_parity(std::size_t offset_bytes, unsigned parity);

// --- Hopper's warpgroup matrix multiply and stmatrix (isa_wgmma.hpp has the layouts and the PTX ISA sections). ---
enum class WgmmaInput { f16, bf16, e4m3 };
struct WgmmaShape {
  WgmmaInput input = WgmmaInput::f16;
  unsigned n = 0;               // N: a multiple of 8 in 8..256; K is 16 (f16, bf16) or 32 (e4m3), M is 64
  bool a_in_registers = false;  // A from the threads' fragments, else from shared memory by desc_a
  bool b_mn_major = false;      // B's descriptor describes an N-major tile (imm-tnsp-b), else K-major
};
// wgmma.mma_async.sync.aligned.m64nNkK: a warpgroup collective (the 128 threads of the caller's warpgroup
// must all call it with the same shape, descriptors and accumulate flag; else EmulationError). a_registers:
// the thread's 4 A registers (a_in_registers), d: its N/2 accumulators, read when accumulate and written.
// Each element of D is accumulated in a fixed order in fp32, acc = (accumulate ? D : 0), then acc += A·B
// for k = 0, 1, ..., K-1 (every product exact in fp32); hardware's order is unspecified, as for mma.sync.
// Every shared element read is checked against the launch's shared memory. Asynchronous, as on hardware:
// the operands are read at issue (a wgmma on an accumulator still in flight takes the in-flight result, as
// the tensor cores chain them), d holds a NaN poison pattern until wgmma_wait_group retires the wgmma's
// group, and then receives D; shared bytes it reads count as read until then. A wgmma needs a wgmma_fence by
// the thread since its last wgmma_wait_group (PTX: wgmma.fence orders earlier register accesses).
void wgmma_fence();
void wgmma_commit_group();
void wgmma_wait_group(unsigned pending_groups);
void wgmma(const WgmmaShape& shape, std::uint64_t desc_a, const std::uint32_t* a_registers, std::uint64_t desc_b,
           float* d, bool accumulate);
// The shared-memory byte offset of element (row, k) of a wgmma operand: row is the M index of A or the N index
// of B; mn_major: the descriptor describes an M/N-major tile. Exposed for tests; the layout is in isa_wgmma.hpp.
std::size_t wgmma_element_offset(std::uint64_t descriptor, bool mn_major, unsigned element_bytes, unsigned row,
                                 unsigned k);
// cvt.rn.satfinite.e4m3x2.f32, one value: the e4m3 code nearest to value (ties to the even code), finite
// values past ±448 saturate to ±448, NaN gives 0x7F. Found by binary search over the positive codes, whose
// values increase with the code.
std::uint8_t e4m3_from_float(float value);
// stmatrix.sync.aligned.m8n8.x<matrices>[.trans].shared.b16: the inverse of ldmatrix (same lane roles and
// checks); r[i] is the lane's fragment of matrix i.
void stmatrix(unsigned matrices, bool transpose, std::size_t row_offset_bytes, const std::uint32_t (&r)[4]);

// --- Memory ordering. ---
// bar.warp.sync (__syncwarp): the lanes of member_mask meet, and their memory accesses before it are ordered
// before those after it.
void sync_warp(std::uint32_t member_mask);
// fence.proxy.async.shared::cta: the calling thread's earlier generic-proxy writes to shared memory are
// ordered before later async-proxy accesses (wgmma, TMA) that synchronize with it.
void fence_proxy_async();

// --- Memory. ---
// The CTA's dynamic shared memory from offset_bytes, size_bytes long; throws EmulationError when the range
// exceeds LaunchConfig::shared_bytes or offset_bytes is not a multiple of alignment.
std::byte* shared_memory(std::size_t offset_bytes, std::size_t size_bytes, std::size_t alignment);
// Throws EmulationError "<location>: <space> access out of bounds: <name>[index], size <size>".
[[noreturn]] void report_out_of_bounds(const char* space, const char* name, std::size_t index, std::size_t size);
// A load (write false) or store by the running thread of bytes at address, which lies in the CTA's shared
// memory (from shared_memory()): checked by the race detector and against in-flight copies (SharedSpan's
// element accesses call it).
void shared_access(const void* address, std::size_t bytes, bool write);

// --- The copy engines' side (tma.cpp). ---
// One piece of an asynchronous copy into shared memory: bytes (at most 16) of data for shared offset.
struct SharedChunk {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  unsigned char data[16] = {};
};
// A TMA load issued by the running thread: its chunks (inside shared memory, checked by the caller) become
// poison at once and land when the mbarrier phase that tx_bytes completes on (the current one) completes;
// then tx_bytes complete_tx on the mbarrier at mbarrier_offset.
void land_async_copy(std::size_t mbarrier_offset, const SharedChunk* chunks, std::size_t count, std::uint32_t tx_bytes);
// An async-proxy read of shared memory by the running thread (a TMA store's source): checked as such.
void async_proxy_read(std::size_t offset, std::size_t bytes);

}  // namespace faprobe::emu
