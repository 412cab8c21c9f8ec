// The GPU emulator's launch and its scheduler (emulator.hpp, launch.hpp): launch() checks the configuration
// and runs the grid CTA by CTA; each CTA's threads are fibers (fiber.hpp) run round robin, in a shuffled order
// under a varied schedule, each until it blocks or exits, and a round in which none can run is a deadlock,
// reported with what each stuck thread waits for. An exception in a kernel body is caught at its fiber's
// entry and the other fibers are unwound by cancellation. Here too: what the running thread sees (its
// indices, its location), the bounds of shared memory, every shared access handed to the race detector and
// its findings put in words, and the schedule and checks settings (FAPROBE_EMU_SCHEDULE, FAPROBE_EMU_CHECKS).
#include "cuda/common/emu/launch.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>

namespace faprobe::emu {
namespace {

// The schedule and checks overrides of ScopedSchedule and ScopedChecks, for the process (a test sets them and
// may launch from another OS thread, as its deadline runner does).
std::optional<std::uint64_t> scoped_schedule;
int scoped_checks = -1;  // -1: none, 0: off, 1: on

}  // namespace

namespace detail {
namespace {
[[noreturn]] void fiber_entry();
}  // namespace

Launch::Launch(const LaunchConfig& config, std::function<void()> body)
    : config_(config),
      body_(std::move(body)),
      thread_count_(static_cast<unsigned>(config.block.count())),
      stacks_(thread_count_, config.stack_bytes),
      fibers_(thread_count_),
      warps_((thread_count_ + warp_size - 1) / warp_size),
      warpgroups_((thread_count_ + warpgroup_size - 1) / warpgroup_size),
      shared_(static_cast<std::byte*>(::operator new(std::max<std::size_t>(config.shared_bytes, 1),
                                                     std::align_val_t{emulated_device.shared_base_alignment}))),
      detector_(thread_count_, config.shared_bytes, checks_enabled()),
      seed_(effective_schedule_seed(config.schedule_seed)),
      random_(seed_),
      order_(thread_count_) {
  for (unsigned i = 0; i < thread_count_; ++i) {
    fibers_[i].linear = i;
    fibers_[i].thread = {i % config.block.x, i / config.block.x % config.block.y,
                         i / (config.block.x * config.block.y)};
  }
  for (std::size_t w = 0; w < warps_.size(); ++w) {
    const unsigned lanes = std::min(warp_size, thread_count_ - static_cast<unsigned>(w) * warp_size);
    warps_[w].existing_lanes = lanes == warp_size ? ~0u : (1u << lanes) - 1u;
  }
}

void Launch::run() {
  const Dim3& grid = config_.grid;
  std::vector<std::size_t> blocks(grid.count());
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = i;
  if (seed_ != 0) std::shuffle(blocks.begin(), blocks.end(), random_);
  for (const std::size_t linear : blocks) {
    block_ = {static_cast<unsigned>(linear % grid.x), static_cast<unsigned>(linear / grid.x % grid.y),
              static_cast<unsigned>(linear / (std::size_t{grid.x} * grid.y))};
    run_block();
  }
}

void Launch::run_block() {
  std::memset(shared_.get(), 0xFF, config_.shared_bytes);  // poison: every float and double reads as NaN
  for (Barrier& b : barriers_) b = Barrier{};
  mbarriers_.clear();
  copies_.clear();
  wgmma_operations_.clear();
  detector_.begin_cta();
  for (Warp& w : warps_) w.open.clear();
  for (WarpgroupCollective& g : warpgroups_) g = WarpgroupCollective{};
  for (unsigned i = 0; i < thread_count_; ++i) {
    Fiber& fiber = fibers_[i];
    fiber.state = FiberState::runnable;
    fiber.started = false;
    fiber.wait = WaitKind::none;
    fiber.cp_async_in_flight.clear();
    fiber.cp_async_committed = 0;
    fiber.wgmma_in_flight.clear();
    fiber.wgmma_committed = 0;
    fiber.wgmma_fenced = false;
    fiber.context.prepare(stacks_.stack(i), stacks_.stack_bytes(), fiber_entry);
  }
  for (unsigned i = 0; i < thread_count_; ++i) order_[i] = i;
  for (;;) {
    bool progressed = false;
    if (seed_ != 0) std::shuffle(order_.begin(), order_.end(), random_);
    for (const unsigned i : order_) {
      if (fibers_[i].state != FiberState::runnable) continue;
      resume(i);
      progressed = true;
      if (failed_) abandon_block(error_message_);
    }
    const bool all_exited = std::all_of(fibers_.begin(), fibers_.end(),
                                        [](const Fiber& f) { return f.state == FiberState::exited; });
    if (all_exited) {
      check_transaction_bytes_settled();
      check_barriers_balanced();
      return;
    }
    if (!progressed) abandon_block(deadlock_message());
  }
}

void Launch::resume(unsigned i) {
  running_ = i;
  fibers_[i].started = true;
  void* fake_stack = nullptr;
  sanitizer_start_switch(&fake_stack, stacks_.stack(i), stacks_.stack_bytes());
  FiberContext::swap(scheduler_, fibers_[i].context);
  sanitizer_finish_switch(fake_stack, nullptr, nullptr);
}

// Back to the scheduler from the running fiber, which resumes here when scheduled again (or unwinds when
// the launch is being abandoned).
void Launch::switch_to_scheduler() {
  Fiber& self = running();
  void* fake_stack = nullptr;
  sanitizer_start_switch(&fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
  FiberContext::swap(self.context, scheduler_);
  sanitizer_finish_switch(fake_stack, nullptr, nullptr);
  if (cancelling_) throw FiberCancelled{};
}

void Launch::suspend() {
  running().state = FiberState::blocked;
  switch_to_scheduler();
}

// Called first and last on every fiber, around the kernel body.
void Launch::fiber_started() { sanitizer_finish_switch(nullptr, &scheduler_stack_bottom_, &scheduler_stack_size_); }

// The last thing an exited fiber does: back to the scheduler, never to be resumed.
void Launch::fiber_exit() {
  sanitizer_start_switch(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
  FiberContext finished;
  FiberContext::swap(finished, scheduler_);
  std::abort();  // unreachable: nothing resumes `finished`
}

// Records the first error of the CTA; run_block() rethrows it once the failing fiber has exited.
void Launch::record_failure(std::string message) {
  if (!failed_) error_message_ = std::move(message);
  failed_ = true;
}

// Unwinds every suspended fiber of the CTA, then throws message on the caller's side.
void Launch::abandon_block(std::string message) {
  cancelling_ = true;
  for (unsigned i = 0; i < thread_count_; ++i) {
    Fiber& fiber = fibers_[i];
    if (fiber.state == FiberState::exited) continue;
    if (fiber.started) resume(i);
    fiber.state = FiberState::exited;
  }
  cancelling_ = false;
  throw EmulationError(message);
}

std::string Launch::wait_description(const Fiber& fiber) const {
  if (fiber.wait == WaitKind::mbarrier) {
    const MBarrier& b = mbarriers_.at(fiber.wait_mbarrier);
    return fmt::format("wait on the mbarrier at shared offset {} for its phase of parity {} ({} of {} arrivals "
                       "pending, {} transaction bytes pending)",
                       fiber.wait_mbarrier, fiber.wait_parity, b.pending_arrivals, b.count, b.pending_tx);
  }
  if (fiber.wait == WaitKind::warpgroup) {
    const WarpgroupCollective& c = warpgroups_[fiber.wait_barrier];
    return fmt::format("wait in a wgmma of warpgroup {} ({} of {} threads arrived)", fiber.wait_barrier, c.arrived,
                       warpgroup_size);
  }
  if (fiber.wait == WaitKind::barrier) {
    const Barrier& b = barriers_[fiber.wait_barrier];
    return fmt::format("wait at barrier {} ({} of {} threads arrived)", fiber.wait_barrier, b.arrived, b.expected);
  }
  std::uint32_t arrived = 0;
  for (const Collective& c : warps_[fiber.linear / warp_size].open)
    if (c.member_mask == fiber.wait_mask) arrived = c.arrived;
  return fmt::format("wait in {} of warp {} with member mask {:#010x} (lanes arrived {:#010x})",
                     instruction_name(fiber.wait_collective), fiber.linear / warp_size, fiber.wait_mask, arrived);
}

std::string Launch::deadlock_message() const {
  std::vector<std::pair<std::string, std::vector<unsigned>>> groups;  // in order of first appearance
  unsigned exited = 0;
  for (const Fiber& fiber : fibers_) {
    if (fiber.state == FiberState::exited) {
      ++exited;
      continue;
    }
    std::string what = wait_description(fiber);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
    if (group == groups.end()) {
      groups.emplace_back(std::move(what), std::vector<unsigned>{});
      group = groups.end() - 1;
    }
    group->second.push_back(fiber.linear);
  }
  std::string message = fmt::format("kernel '{}' block {}: deadlock, no thread can proceed:", config_.kernel_name,
                                    format_dim(block_));
  constexpr std::size_t named_threads = 6;
  for (const auto& [what, threads] : groups) {
    message += fmt::format(" {} thread{}", threads.size(), threads.size() == 1 ? "" : "s");
    for (std::size_t i = 0; i < std::min(threads.size(), named_threads); ++i)
      message += " " + format_dim(fibers_[threads[i]].thread);
    if (threads.size() > named_threads) message += fmt::format(" and {} more", threads.size() - named_threads);
    message += " " + what + ";";
  }
  message += fmt::format(" {} of {} threads have exited", exited, thread_count_);
  return message;
}

void Launch::report(const Hazard& hazard, unsigned thread) const {
  const std::string where = location_of(thread);
  const std::string other = format_dim(fibers_[hazard.other_thread].thread);
  switch (hazard.kind) {
    case Hazard::Kind::in_flight_copy:
      throw EmulationError(fmt::format("{}: {} of shared byte offset {} before it has landed: the byte is the "
                                       "destination of {}",
                                       where, access_name(hazard.access), hazard.offset,
                                       describe_copy(hazard.tag)));
    case Hazard::Kind::in_flight_wgmma_read:
      throw EmulationError(fmt::format("{}: {} writes shared byte offset {} while a wgmma.mma_async in flight reads "
                                       "it (no wgmma.wait_group has retired that wgmma in every thread of its "
                                       "warpgroup)",
                                       where, access_name(hazard.access), hazard.offset));
    case Hazard::Kind::missing_proxy_fence:
      throw EmulationError(fmt::format("{}: {} (async proxy) reads shared byte offset {}, which thread {} wrote "
                                       "with {} (generic proxy) and has executed no fence.proxy.async since",
                                       where, access_name(hazard.access), hazard.offset, other,
                                       access_name(hazard.other_access)));
    case Hazard::Kind::race: break;
  }
  const char* hint = hazard.other_access == Access::tma_load
                         ? " (the TMA load landed, but this thread has not waited on its mbarrier phase)"
                         : "";
  throw EmulationError(fmt::format("{}: race on shared memory byte offset {}: {} by this thread and {} by thread "
                                   "{}{} are ordered by no barrier, named barrier, mbarrier phase or __syncwarp",
                                   where, hazard.offset, access_name(hazard.access),
                                   access_name(hazard.other_access), other, hint));
}

std::byte* Launch::shared_memory(std::size_t offset, std::size_t size, std::size_t alignment) const {
  if (alignment == 0 || offset % alignment != 0)
    fail_here(fmt::format("shared memory at byte offset {} is not aligned to {} bytes", offset, alignment));
  if (offset > config_.shared_bytes || size > config_.shared_bytes - offset)
    fail_here(fmt::format("shared memory bytes [{}, {}) exceed the launch's {} bytes of shared memory", offset,
                          offset + size, config_.shared_bytes));
  return shared_.get() + offset;
}

void Launch::shared_access(const void* address, std::size_t bytes, bool write) {
  maybe_yield();
  const auto* byte = static_cast<const std::byte*>(address);
  if (byte < shared_.get() || byte + bytes > shared_.get() + config_.shared_bytes)
    fail_here("a shared-memory access outside the launch's shared memory");
  const auto offset = static_cast<std::size_t>(byte - shared_.get());
  const unsigned self = running_;
  check(write ? detector_.write(self, offset, bytes, Access::write) : detector_.read(self, offset, bytes, Access::read),
        self);
}

// A thread's kernel body has returned: its copies land (nothing can be ordered after them), and wgmma in
// flight is an error (its accumulators and shared reads outlive the thread).
void Launch::thread_finished() {
  Fiber& self = running();
  for (const std::uint32_t tag : self.cp_async_in_flight) land(tag);
  self.cp_async_in_flight.clear();
  if (!self.wgmma_in_flight.empty())
    fail_here(fmt::format("the thread exits with {} wgmma.mma_async in flight: no wgmma.wait_group retired them",
                          self.wgmma_in_flight.size()));
}

std::string format_dim(const Dim3& d) { return fmt::format("({},{},{})", d.x, d.y, d.z); }

void fail_outside_launch(const char* what) {
  throw EmulationError(fmt::format("emulator: {} called outside a launch", what));
}

namespace {

[[noreturn]] void fiber_entry() {
  Launch& launch = *current_launch;
  Fiber& fiber = launch.running();
  launch.fiber_started();
  try {
    launch.body()();
    launch.thread_finished();
  } catch (const FiberCancelled&) {
    // the launch is abandoned; the stack is unwound
  } catch (const EmulationError& e) {
    launch.record_failure(e.what());
  } catch (const std::exception& e) {
    launch.record_failure(launch.location() + ": the kernel threw: " + e.what());
  } catch (...) {
    launch.record_failure(launch.location() + ": the kernel threw an exception not derived from std::exception");
  }
  fiber.state = FiberState::exited;
  launch.fiber_exit();
}

}  // namespace
}  // namespace detail

void launch(const LaunchConfig& config, std::function<void()> kernel_body) {
  using detail::current_launch;
  using detail::format_dim;
  if (current_launch != nullptr)
    throw EmulationError(fmt::format("kernel '{}': launched from inside {}", config.kernel_name,
                                     current_launch->location()));
  const Dim3& block = config.block;
  const Dim3& grid = config.grid;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.count() > emulated_device.max_block_threads)
    throw EmulationError(fmt::format("kernel '{}': block {} is empty or has more than {} threads", config.kernel_name,
                                     format_dim(block), emulated_device.max_block_threads));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw EmulationError(fmt::format("kernel '{}': empty grid {}", config.kernel_name, format_dim(grid)));
  if (config.shared_bytes > emulated_device.max_shared_bytes_per_block)
    throw EmulationError(fmt::format("kernel '{}': {} bytes of dynamic shared memory, more than the {} an {} block "
                                     "may have",
                                     config.kernel_name, config.shared_bytes,
                                     emulated_device.max_shared_bytes_per_block, emulated_device.name));
  if (!kernel_body) throw EmulationError(fmt::format("kernel '{}': no kernel body", config.kernel_name));
  detail::Launch state(config, std::move(kernel_body));
  current_launch = &state;
  try {
    state.run();
  } catch (...) {
    current_launch = nullptr;
    throw;
  }
  current_launch = nullptr;
}

Dim3 thread_idx() { return detail::running_launch("thread_idx").running().thread; }
Dim3 block_idx() { return detail::running_launch("block_idx").block(); }
Dim3 block_dim() { return detail::running_launch("block_dim").config().block; }
Dim3 grid_dim() { return detail::running_launch("grid_dim").config().grid; }
unsigned thread_linear_idx() { return detail::running_launch("thread_linear_idx").running().linear; }
unsigned lane_id() { return thread_linear_idx() % detail::warp_size; }
unsigned warp_id() { return thread_linear_idx() / detail::warp_size; }

std::string current_location() {
  return detail::current_launch == nullptr ? std::string("outside any launch") : detail::current_launch->location();
}

std::byte* shared_memory(std::size_t offset_bytes, std::size_t size_bytes, std::size_t alignment) {
  return detail::running_launch("shared_memory").shared_memory(offset_bytes, size_bytes, alignment);
}
void shared_access(const void* address, std::size_t bytes, bool write) {
  detail::running_launch("a shared-memory access").shared_access(address, bytes, write);
}
void report_out_of_bounds(const char* space, const char* name, std::size_t index, std::size_t size) {
  throw EmulationError(fmt::format("{}: {} access out of bounds: {}[{}], size {}", current_location(), space, name,
                                   index, size));
}

ScopedSchedule::ScopedSchedule(std::uint64_t seed)
    : previous_(scoped_schedule.value_or(0)), had_previous_(scoped_schedule.has_value()) {
  scoped_schedule = seed;
}
ScopedSchedule::~ScopedSchedule() {
  if (had_previous_) scoped_schedule = previous_;
  else scoped_schedule.reset();
}
ScopedChecks::ScopedChecks(bool enabled) : previous_(scoped_checks) { scoped_checks = enabled ? 1 : 0; }
ScopedChecks::~ScopedChecks() { scoped_checks = previous_; }

std::uint64_t effective_schedule_seed(std::uint64_t config_seed) {
  if (config_seed != 0) return config_seed;
  if (scoped_schedule) return *scoped_schedule;
  const char* text = std::getenv("FAPROBE_EMU_SCHEDULE");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const unsigned long long seed = std::strtoull(text, &end, 10);
  if (*end != '\0' || *text == '-')
    throw EmulationError(fmt::format("FAPROBE_EMU_SCHEDULE={}: expected a schedule seed, a non-negative integer "
                                     "(0: the default schedule)",
                                     text));
  return seed;
}

bool checks_enabled() {
  if (scoped_checks >= 0) return scoped_checks == 1;
  const char* text = std::getenv("FAPROBE_EMU_CHECKS");
  if (text == nullptr || *text == '\0') return true;
  const std::string value(text);
  if (value == "on" || value == "1") return true;
  if (value == "off" || value == "0") return false;
  throw EmulationError(fmt::format("FAPROBE_EMU_CHECKS={}: expected on or off", value));
}

}  // namespace faprobe::emu
