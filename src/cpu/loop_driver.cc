// Picks a loop's lane once per plan, then runs it: one kernel call, rows split
// across the thread pool, or tile runs; the kernel has the vectorised inner loops.
#include "cpu/loop_driver.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "cpu/thread_pool.h"
#include "kjit/elementwise.h"

namespace kjit {
namespace cpu {
namespace {

/// Per-operand and per-dim buffers of a call: inline up to 16, so a 1-element
/// call pays for no heap allocation.
template <typename T>
using CallVector = SmallVector<T, 16>;

/// The last-level data cache's size in bytes from sysfs (cpu0's highest-level
/// data or unified cache), 0 when unknown. sysfs, not sysconf: glibc's
/// _SC_LEVEL3_CACHE_SIZE sums the L3s of the whole package on some AMD parts (320
/// MiB here, where each L3 is 32 MiB).
int64_t read_last_level_cache_bytes() {
  int64_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) continue;
    if (type == "Instruction" || level < best_level || size.empty()) continue;
    char* end = nullptr;
    const long long n = std::strtoll(size.c_str(), &end, 10);
    const int64_t unit = *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : *end == '\0' ? 1 : 0;
    if (n <= 0 || unit == 0) continue;
    best = n * unit;
    best_level = level;
  }
  return best;
}

int64_t last_level_cache_bytes() {
  static const int64_t bytes = read_last_level_cache_bytes();
  return bytes;
}

/// The longest run one kernel call may take. The kernel streams a run of
/// kStreamBytes of output or more past the caches (codegen_cpu), which pays only
/// when the call's operands do not fit in the last-level cache anyway: below that,
/// runs stay shorter, so the output stays cached as NumPy's and torch's plain
/// stores keep it (float32 add, 2^21, 24 MiB of operands in a 32 MiB L3: 316 us
/// streamed, 201 us for torch). Unknown cache size: runs are not limited.
int64_t longest_run(int64_t total, const detail::Operands& operands) {
  const int64_t cache = last_level_cache_bytes();
  if (cache == 0 || operands.empty()) return total;
  int64_t element_bytes = 0;
  for (const OperandInfo& op : operands) element_bytes += op.element_size;
  if (total > cache / std::max<int64_t>(element_bytes, 1)) return total;  // beyond the cache: stream
  return std::max<int64_t>(1, (kStreamBytes - 1) / std::max<int64_t>(operands[0].element_size, 1));
}

/// Threads for a loop of `total` elements: one per started grain, as torch's
/// parallel_for counts them, so a loop of up to one grain runs on the calling
/// thread. With two per grain, float32 add at 2^15 took 3.3-3.6 us on two threads
/// against 2.1 on one whenever the other core's L2 did not hold its half
/// (bench_elementwise --sizes, each size's variants interleaved).
int threads_for(int64_t total) {
  if (total <= kGrainSize) return 1;
  return static_cast<int>(std::min<int64_t>(get_num_threads(), (total + kGrainSize - 1) / kGrainSize));
}

/// The chunks a loop of `total` elements is cut into for `threads` threads: a few
/// per thread, so a thread that starts late or is preempted leaves its share to
/// the others, none below half the grain, and, when runs are not limited (see
/// longest_run), none below kStreamBytes of output when the output is that large
/// per thread (the kernel streams a run only when the run itself is that large).
int chunks_for(int64_t total, int threads, int64_t out_elem_bytes, bool runs_limited) {
  int64_t chunks = std::min<int64_t>(int64_t{threads} * kChunksPerThread, total / (kGrainSize / 2));
  const int64_t out_bytes = total * out_elem_bytes;
  if (!runs_limited && out_bytes >= threads * kStreamBytes) chunks = std::min(chunks, out_bytes / kStreamBytes);
  return static_cast<int>(std::max<int64_t>(chunks, threads));
}

/// Rows of the inner dim: elements [begin, end) of the loop's odometer order, at
/// most `max_run` elements per row of a kernel call; whole rows along dim 1 go in
/// one call (the kernel's outer loop), the rest of a row in a call of its own.
/// `steps`: the plan's strides (LoopPlan::strides).
void run_range(const Kernel& kernel, const detail::LoopLayout& loop, const int64_t* steps, char* const* data,
               const void* extra, int64_t begin, int64_t end, int64_t max_run) {
  const size_t n_ops = loop.operands.size(), n_dims = loop.shape.size();
  const int64_t n0 = loop.shape[0], n1 = n_dims > 1 ? loop.shape[1] : 1;
  // Small fixed arrays: a 1-element call should not pay for heap allocations.
  CallVector<int64_t> idx(n_dims, 0);
  int64_t row = begin / n0, col = begin % n0;
  for (size_t d = 1; d < n_dims; ++d) {  // odometer position of `row`
    idx[d] = row % loop.shape[d];
    row /= loop.shape[d];
  }
  CallVector<char*> ptr(n_ops, nullptr);
  int64_t pos = begin;
  while (pos < end) {
    for (size_t op = 0; op < n_ops; ++op) {
      const int64_t* strides = loop.operands[op].strides.data();
      char* p = data[op] + col * strides[0];
      for (size_t d = 1; d < n_dims; ++d) p += idx[d] * strides[d];
      ptr[op] = p;
    }
    const int64_t n = std::min({n0 - col, end - pos, max_run});
    const int64_t rows = n == n0 && n_dims > 1 ? std::min(n1 - idx[1], (end - pos) / n0) : 1;
    kernel(ptr.data(), steps, n, rows, extra);
    pos += n * rows;
    col += n;
    if (col < n0) continue;  // the rest of this row
    col = 0;
    if (n_dims > 1) idx[1] += rows - 1;  // the call's last row; the odometer steps past it
    for (size_t d = 1; d < n_dims; ++d) {
      if (++idx[d] < loop.shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// Rows of the inner dim, split across threads from the grain up.
void execute_rows(const Kernel& kernel, const LoopPlan& plan, char* const* data, const void* extra) {
  const detail::LoopLayout& loop = plan.loop;
  const int64_t* steps = plan.strides.data();
  const int64_t total = loop.numel();
  if (total == 0) return;
  const int threads = threads_for(total);
  const int64_t max_run = longest_run(total, loop.operands);
  if (threads == 1) {
    run_range(kernel, loop, steps, data, extra, 0, total, max_run);
    return;
  }
  const int chunks = chunks_for(total, threads, loop.operands[0].element_size, max_run < total);
  parallel_for(chunks, threads, [&](int chunk) {
    run_range(kernel, loop, steps, data, extra, total * chunk / chunks, total * (chunk + 1) / chunks, max_run);
  });
}

/// The tiled layout (tiles_small_inner_dim): per index of the outer dims, the K*rows
/// dense elements go through the kernel's contiguous path in runs of a tile's
/// length, with each repeating operand's K values copied into a tile.
void execute_tiled(const Kernel& kernel, const detail::LoopLayout& loop, char* const* data, const void* extra) {
  const size_t n_ops = loop.operands.size();
  const int64_t k = loop.shape[0], span = k * loop.shape[1];
  int64_t outer = 1;
  for (size_t d = 2; d < loop.shape.size(); ++d) outer *= loop.shape[d];
  const int64_t tile_len = std::max<int64_t>(k, 512 / k * k);  // a multiple of k: every run starts in phase
  std::vector<bool> repeat(n_ops);
  std::vector<int64_t> strides(2 * n_ops, 0);  // contiguous runs: element sizes, no outer stride
  std::vector<int64_t> sizes(n_ops);
  for (size_t op = 0; op < n_ops; ++op) {
    repeat[op] = loop.operands[op].strides[1] == 0;
    strides[op] = sizes[op] = loop.operands[op].element_size;
  }
  auto run_outer = [&](int64_t begin, int64_t end) {
    std::vector<std::vector<char>> tiles(n_ops);
    std::vector<char*> base(n_ops), ptr(n_ops);
    for (int64_t o = begin; o < end; ++o) {
      int64_t rest = o;
      for (size_t op = 0; op < n_ops; ++op) base[op] = data[op];
      for (size_t d = 2; d < loop.shape.size(); ++d) {
        int64_t i = rest % loop.shape[d];
        rest /= loop.shape[d];
        for (size_t op = 0; op < n_ops; ++op) base[op] += i * loop.operands[op].strides[d];
      }
      for (size_t op = 0; op < n_ops; ++op) {
        if (!repeat[op]) continue;
        std::vector<char>& t = tiles[op];
        const size_t period = static_cast<size_t>(k * sizes[op]), total = static_cast<size_t>(tile_len * sizes[op]);
        t.resize(total);
        for (int64_t e = 0; e < k; ++e) {
          std::memcpy(t.data() + e * sizes[op], base[op] + e * loop.operands[op].strides[0], sizes[op]);
        }
        for (size_t filled = period; filled < total; filled *= 2) {  // doubling copies
          std::memcpy(t.data() + filled, t.data(), std::min(filled, total - filled));
        }
      }
      for (int64_t off = 0; off < span; off += tile_len) {
        for (size_t op = 0; op < n_ops; ++op) ptr[op] = repeat[op] ? tiles[op].data() : base[op] + off * sizes[op];
        kernel(ptr.data(), strides.data(), std::min(tile_len, span - off), 1, extra);
      }
    }
  };
  const int threads = static_cast<int>(std::min<int64_t>(threads_for(loop.numel()), outer));
  if (threads <= 1) {
    run_outer(0, outer);
    return;
  }
  const int chunks = static_cast<int>(std::min<int64_t>(outer, int64_t{threads} * kChunksPerThread));
  parallel_for(chunks, threads, [&](int chunk) { run_outer(outer * chunk / chunks, outer * (chunk + 1) / chunks); });
}

}  // namespace

LoopPlan plan_loop(const std::vector<int64_t>& shape, detail::Operands operands, size_t n_out, bool cuda) {
  LoopPlan plan;
  plan.loop = iterator::make_loop(shape, std::move(operands), n_out);
  const bool tiled = !cuda && iterator::tiles_small_inner_dim(plan.loop);
  if (!tiled) iterator::move_small_inner_dim_out(&plan.loop);
  const int64_t numel = plan.loop.numel();
  if (cuda) {
    plan.lane = Lane::kCuda;
  } else if (tiled) {
    plan.lane = Lane::kTiled;
  } else if (plan.loop.shape.size() == 1 && numel > 0 && numel <= kGrainSize) {
    plan.lane = Lane::kOneRow;
  }
  const size_t n_ops = plan.loop.operands.size();
  plan.strides.assign(2 * n_ops, 0);
  for (size_t op = 0; op < n_ops; ++op) {
    const auto& strides = plan.loop.operands[op].strides;
    plan.strides[op] = strides[0];
    if (strides.size() > 1) plan.strides[n_ops + op] = strides[1];
  }
  return plan;
}

void execute_loop_nest(const Kernel& kernel, const LoopPlan& plan, char** data, const void* extra) {
  if (plan.lane == Lane::kTiled) {
    execute_tiled(kernel, plan.loop, data, extra);
  } else {
    execute_rows(kernel, plan, data, extra);
  }
}

}  // namespace cpu
}  // namespace kjit
