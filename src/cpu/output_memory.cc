// New outputs' host memory. Small blocks come from malloc; from 4 MiB, blocks ask
// for transparent huge pages as NumPy's arrays do; from 32 MiB, where glibc maps
// every block afresh, a block is faulted in on the calling thread before the loop,
// and up to kKeptBlocks freed blocks are kept for the next output of their size.
#include "cpu/output_memory.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kjit {
namespace cpu {
namespace {

constexpr size_t kAlignFrom = size_t{1} << 20, kHugeFrom = size_t{1} << 22, kPage = 4096;
constexpr size_t kHugePage = size_t{1} << 21;

/// The freed blocks kept for reuse, oldest first. The lock is held across fork()
/// (pthread_atfork), so a child never inherits it locked; it is never held while
/// memory is freed or advised.
class KeptBlocks {
 public:
  static KeptBlocks& instance() {
    static KeptBlocks* kept = [] {
      auto* made = new KeptBlocks();  // never destroyed: deleters may run at exit
      pthread_atfork([] { instance().mu_.lock(); }, [] { instance().mu_.unlock(); }, [] { instance().mu_.unlock(); });
      return made;
    }();
    return *kept;
  }

  /// A kept block of exactly `capacity` bytes, taken; null when none.
  void* take(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = count_ - 1; i >= 0; --i) {  // the newest first
      if (blocks_[i].capacity != capacity) continue;
      void* data = blocks_[i].data;
      std::copy(blocks_ + i + 1, blocks_ + count_, blocks_ + i);
      --count_;
      return data;
    }
    return nullptr;
  }

  /// Keeps `block`; returns the oldest one when that made room (the caller frees
  /// it), else an empty block.
  OutputBlock keep(OutputBlock block) {
    std::lock_guard<std::mutex> lock(mu_);
    OutputBlock evicted;
    if (count_ == kKeptBlocks) {
      evicted = blocks_[0];
      std::copy(blocks_ + 1, blocks_ + count_, blocks_);
      --count_;
    }
    blocks_[count_++] = block;
    return evicted;
  }

 private:
  std::mutex mu_;
  OutputBlock blocks_[kKeptBlocks];
  int count_ = 0;
};

bool keeping_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("KJIT_OUTPUT_CACHE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

/// The whole pages inside [data, data + bytes): advice must not reach a neighbour's memory.
void advise_pages(void* data, size_t bytes, int advice) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (address + kPage - 1) / kPage * kPage, end = (address + bytes) / kPage * kPage;
  if (end > begin) madvise(static_cast<char*>(data) + (begin - address), end - begin, advice);
}

/// Faults a large block's pages in on the calling thread (MADV_POPULATE_WRITE,
/// Linux 5.14+): left to the loop, its threads fault them concurrently, which on
/// this project's VM is at times as slow as 13-48 ms per 32 MiB, against 2.2-2.9
/// ms on one thread; float32 add with a new 2^24-element output then took 47-56 ms,
/// and 11-16 ms with the pages faulted first, against np.add's 14-18 ms. Pages a
/// kept block still has cost only the walk over them. Advice only: where it
/// fails, the loop faults the pages as before.
void fault_in(void* data, size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
  advise_pages(data, bytes, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

/// Keeps a freed block for the next output of its size; the oldest kept block
/// makes room when there is none.
void keep(OutputBlock block) {
  // The pages' contents are not needed: under memory pressure the kernel may
  // take them back instead of swapping them (reused, they are zero pages then).
  advise_pages(block.data, block.capacity, MADV_FREE);
  std::free(KeptBlocks::instance().keep(block).data);
}

/// A block of whole huge pages, one size class per 2 MiB.
size_t large_capacity(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

bool keepable(size_t capacity) { return capacity >= kKeepFrom && capacity <= kKeepUpTo && keeping_enabled(); }

}  // namespace

OutputBlock acquire_output_memory(size_t bytes) {
  if (bytes < kAlignFrom) return {std::malloc(bytes), bytes};  // aligned_alloc costs 30 ns more (glibc)
  if (bytes < kKeepFrom) {
    OutputBlock block{std::aligned_alloc(64, (bytes + 63) / 64 * 64), bytes};  // for vector and streaming stores
    if (block.data != nullptr && bytes >= kHugeFrom) advise_pages(block.data, bytes, MADV_HUGEPAGE);
    return block;
  }
  OutputBlock block{nullptr, large_capacity(bytes)};
  if (keepable(block.capacity)) block.data = KeptBlocks::instance().take(block.capacity);
  if (block.data == nullptr) {
    block.data = std::aligned_alloc(kHugePage, block.capacity);
    if (block.data == nullptr) return block;
    advise_pages(block.data, block.capacity, MADV_HUGEPAGE);
  }
  fault_in(block.data, bytes);
  return block;
}

void release_output_memory(OutputBlock block) {
  if (block.data == nullptr) return;
  if (keepable(block.capacity)) {
    keep(block);
  } else {
    std::free(block.data);
  }
}

}  // namespace cpu
}  // namespace kjit
