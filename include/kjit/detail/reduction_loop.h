// The loops of kjit.reduction's generated CPU kernels, over a problem the host
// planned (src/reduction): output dims ("kept") and reduced dims, each coalesced
// and ordered slowest first. A kernel defines an Ops type (the types, the map,
// the combine, the store) and instantiates kjit_red::Reducer<Ops>. Embedded by
// kjit::emit_reduction_cpu(); the host includes it for the problem's layout.
//
// Sums are pairwise: every reduced range longer than a block is split in halves
// and the halves combined, and a block runs in independent lanes folded pairwise,
// so float rounding error grows with the log of the count, as NumPy's pairwise
// summation, also over rows of an outer reduction (where NumPy adds row by row).
// The combine must be associative and commutative (CuPy's ReductionKernel rule).
//
// Ops: __Acc, __kOperands, __kSizes[__kOperands] (bytes, the output first),
// __map(in, index), __combine(a, b), __identity(bytes), __store(out, acc, count),
// and __kArg: true for a value-and-index reduction, whose Ops also has __Value,
// __value(bytes) and __better(a, b). Reserved names: the generated Ops follows the
// user's code, whose macros would rewrite any other (this header comes before it).
#ifndef KJIT_DETAIL_REDUCTION_LOOP_H_
#define KJIT_DETAIL_REDUCTION_LOOP_H_

#include <cstdint>

extern "C" {
/// One reduction call as the host planned it: strides in bytes, [dim][operand];
/// operand 0 is the output, 1.. the inputs. Dims are ordered slowest first.
struct kjit_red_problem {
  int32_t n_operands;              ///< 1 + inputs
  int32_t n_kept;                  ///< output dims (0: one output)
  int32_t n_reduced;               ///< reduced dims, at least 1
  int32_t reserved;                ///< zero
  const int64_t* kept_shape;       ///< [n_kept]
  const int64_t* kept_strides;     ///< [n_kept][n_operands]
  const int64_t* reduced_shape;    ///< [n_reduced]
  const int64_t* reduced_strides;  ///< [n_reduced][n_operands]; the output's are 0
  char* const* data;               ///< [n_operands]
  int64_t count;                   ///< elements reduced into each output (post's n)
  const void* identity;            ///< the identity in the accumulator type (empty reductions)
  void* partials;                  ///< [part][output] accumulators (kRedPartial, kRedFinish)
};
}

/// What kjit_red_kernel(data, range, mode, problem) does with range =
/// {out_begin, out_end, red_begin, red_end, part, parts}: store the outputs
/// [out_begin, out_end); write part `part`'s accumulators of every output over
/// [red_begin, red_end) of the outermost reduced dim; or combine the `parts`
/// partials of the outputs [out_begin, out_end) and store them.
enum kjit_red_mode { kRedStore = 0, kRedPartial = 1, kRedFinish = 2 };

/// The most kept dims a problem has (the host refuses more).
enum { kRedMaxDims = 64 };

namespace kjit_red {

template <class Ops>
class Reducer {
 public:
  using Acc = typename Ops::__Acc;
  static constexpr int kOps = Ops::__kOperands;  // 1 + inputs

  explicit Reducer(const kjit_red_problem& p) : p_(p) {}

  /// Stores the outputs [ob, oe), each the whole reduction.
  void store(int64_t ob, int64_t oe) const {
    if (p_.count == 0) {
      const Acc identity = Ops::__identity(p_.identity);
      for_outputs(ob, oe, [&](char* const* at, int64_t) { Ops::__store(at[0], identity, 0); });
      return;
    }
    if (vertical()) {
      vertical_rows(ob, oe, 0, p_.reduced_shape[0], [&](char* out, int64_t, const Acc* acc, int64_t w) {
        for (int64_t j = 0; j < w; ++j) Ops::__store(out + j * Ops::__kSizes[0], acc[j], p_.count);
      });
      return;
    }
    for_outputs(ob, oe,
                [&](char* const* at, int64_t) { Ops::__store(at[0], level(at, 0, 0, p_.reduced_shape[0]), p_.count); });
  }

  /// Writes the accumulators of every output over [rb, re) of the outermost
  /// reduced dim into partials[part][output].
  void partial(int64_t rb, int64_t re, int64_t part) const {
    const int64_t outputs = output_count();
    Acc* mine = static_cast<Acc*>(p_.partials) + part * outputs;
    if (vertical()) {
      vertical_rows(0, outputs, rb, re, [&](char*, int64_t o, const Acc* acc, int64_t w) {
        for (int64_t j = 0; j < w; ++j) mine[o + j] = acc[j];
      });
      return;
    }
    for_outputs(0, outputs, [&](char* const* at, int64_t o) { mine[o] = level(at, 0, rb, re); });
  }

  /// Combines the `parts` partials of the outputs [ob, oe) in order and stores them.
  void finish(int64_t ob, int64_t oe, int64_t parts) const {
    const int64_t outputs = output_count();
    const Acc* all = static_cast<const Acc*>(p_.partials);
    for_outputs(ob, oe, [&](char* const* at, int64_t o) {
      Acc acc = all[o];
      for (int64_t q = 1; q < parts; ++q) acc = Ops::__combine(acc, all[q * outputs + o]);
      Ops::__store(at[0], acc, p_.count);
    });
  }

 private:
  /// Lanes of a contiguous block: four to eight vectors of the accumulator.
  static constexpr int kLanes = sizeof(Acc) >= 16 ? 8 : (sizeof(Acc) >= 8 ? 16 : 32);
  /// Elements of a block: each lane adds 32 of them in order. An arg reduction is
  /// exact in any order, so its blocks are long: a block ends in a fold of its lanes.
  static constexpr int64_t kBlock = Ops::__kArg ? int64_t{1} << 16 : 32 * kLanes;
  /// Outputs an outer reduction carries at once, and rows before it splits.
  static constexpr int64_t kColumns = 4096 / (sizeof(Acc) < 4 ? 4 : sizeof(Acc));
  static constexpr int64_t kRows = 16;

  int64_t output_count() const {
    int64_t n = 1;
    for (int d = 0; d < p_.n_kept; ++d) n *= p_.kept_shape[d];
    return n;
  }
  int64_t kept_stride(int d, int op) const { return p_.kept_strides[d * p_.n_operands + op]; }
  int64_t reduced_stride(int d, int op) const { return p_.reduced_strides[d * p_.n_operands + op]; }

  /// Calls f(pointers, index) for each output in [ob, oe): pointers of every
  /// operand at that output's first reduced element.
  template <class F>
  void for_outputs(int64_t ob, int64_t oe, F f) const {
    if (ob >= oe) return;
    int64_t idx[kRedMaxDims] = {};
    char* at[kOps];
    position(ob, idx, at);
    for (int64_t o = ob; o < oe; ++o) {
      f(at, o);
      advance(idx, at);
    }
  }

  /// The multi-index of output `o`, and the operands' pointers there.
  void position(int64_t o, int64_t* idx, char** at) const {
    for (int op = 0; op < kOps; ++op) at[op] = p_.data[op];
    for (int d = p_.n_kept - 1; d >= 0; --d) {
      idx[d] = o % p_.kept_shape[d];
      o /= p_.kept_shape[d];
      for (int op = 0; op < kOps; ++op) at[op] += idx[d] * kept_stride(d, op);
    }
  }

  /// The next output in row-major order of the kept dims.
  void advance(int64_t* idx, char** at) const {
    for (int d = p_.n_kept - 1; d >= 0; --d) {
      for (int op = 0; op < kOps; ++op) at[op] += kept_stride(d, op);
      if (++idx[d] < p_.kept_shape[d]) return;
      for (int op = 0; op < kOps; ++op) at[op] -= idx[d] * kept_stride(d, op);
      idx[d] = 0;
    }
  }

  /// Reduced level `lvl` over [b, e) from pointers `at`, pairwise.
  Acc level(char* const* at, int lvl, int64_t b, int64_t e) const {
    if (lvl == p_.n_reduced - 1) return leaf(at, b, e);
    if (e - b > 1) {
      const int64_t m = b + (e - b) / 2;
      return Ops::__combine(level(at, lvl, b, m), level(at, lvl, m, e));
    }
    char* row[kOps];
    for (int op = 0; op < kOps; ++op) row[op] = at[op] + b * reduced_stride(lvl, op);
    return level(row, lvl + 1, 0, p_.reduced_shape[lvl + 1]);
  }

  /// The innermost reduced dim over [b, e): blocks of kBlock elements, whose sums
  /// are combined as a binary counter combines (block sums of equal level pair
  /// up), which is pairwise summation without recursion.
  Acc leaf(char* const* at, int64_t b, int64_t e) const {
    const int inner = p_.n_reduced - 1;
    bool contiguous = true;
    int64_t step[kOps];
    for (int op = 0; op < kOps; ++op) {
      step[op] = reduced_stride(inner, op);
      if (op > 0) contiguous = contiguous && step[op] == Ops::__kSizes[op];
    }
    Acc stack[64];
    int level[64];
    int top = 0;
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t end = e - i < kBlock ? e : i + kBlock;
      Acc sum = contiguous && end - i >= kLanes ? block(at, i, end) : strided(at, step, i, end);
      int lv = 0;
      while (top > 0 && level[top - 1] == lv) {
        sum = Ops::__combine(stack[--top], sum);
        ++lv;
      }
      stack[top] = sum;
      level[top++] = lv;
    }
    Acc acc = stack[--top];
    while (top > 0) acc = Ops::__combine(stack[--top], acc);
    return acc;
  }

  /// [b, e) one element after another.
  static Acc strided(char* const* at, const int64_t* step, int64_t b, int64_t e) {
    Acc acc = map_at(at, step, b, b);
    for (int64_t i = b + 1; i < e; ++i) acc = Ops::__combine(acc, map_at(at, step, i, i));
    return acc;
  }

  /// A contiguous block: lanes of values, or for an arg reduction (Ops::__kArg) arg_block.
  static Acc block(char* const* at, int64_t b, int64_t e) {
    if constexpr (Ops::__kArg) {
      return arg_block<typename Ops::__Value>(at[1], b, e);
    } else {
      return lanes(at, b, e);
    }
  }

  /// The best element of a contiguous block and its index. Values first: groups
  /// of G vectors of L lanes are folded to one vector as a tree (no chain from one
  /// vector to the next, so the compiler's selects overlap), and each lane keeps
  /// its best value and the first group that reached it. The first group holding
  /// the best value is then searched for its first element no worse than it; a
  /// tail shorter than a group is searched element by element. Of equals the
  /// first wins, as in a loop written out.
  template <typename V>
  static Acc arg_block(const char* in, int64_t b, int64_t e) {
    constexpr int L = sizeof(V) >= 64 ? 1 : static_cast<int>(64 / sizeof(V));  // one 64-byte vector of values
    constexpr int G = 8;
    constexpr int32_t kGroup = L * G;
    constexpr int64_t kSize = Ops::__kSizes[1];
    const char* base = in + b * kSize;
    const auto n = static_cast<int32_t>(e - b);  // a block is shorter than 2^31
    const int32_t groups = n / kGroup;
    // The tail, after the groups (when there is one): its best and where it is first.
    const bool has_tail = groups * kGroup < n;
    int32_t tail_at = groups * kGroup;
    V tail = has_tail ? Ops::__value(base + tail_at * kSize) : V{};
    for (int32_t k = tail_at + 1; k < n; ++k) {
      const V v = Ops::__value(base + k * kSize);
      if (Ops::__better(v, tail)) tail = v, tail_at = k;
    }
    if (groups == 0) return Acc{tail, b + tail_at};
    V best[L];
    int32_t first_group[L];
    for (int32_t g = 0; g < groups; ++g) {
      V t[G][L];
      const char* at = base + static_cast<int64_t>(g) * kGroup * kSize;
#pragma GCC unroll 8
      for (int k = 0; k < G; ++k) {
        for (int j = 0; j < L; ++j) t[k][j] = Ops::__value(at + (k * L + j) * kSize);
      }
#pragma GCC unroll 8
      for (int w = G / 2; w > 0; w /= 2) {
#pragma GCC unroll 8
        for (int k = 0; k < w; ++k) {
          for (int j = 0; j < L; ++j) t[k][j] = Ops::__better(t[k + w][j], t[k][j]) ? t[k + w][j] : t[k][j];
        }
      }
      if (g == 0) {
        for (int j = 0; j < L; ++j) best[j] = t[0][j], first_group[j] = 0;
        continue;
      }
      for (int j = 0; j < L; ++j) {
        const bool wins = Ops::__better(t[0][j], best[j]);
        best[j] = wins ? t[0][j] : best[j];
        first_group[j] = wins ? g : first_group[j];
      }
    }
    V top = best[0];
    int32_t group = first_group[0];
    for (int j = 1; j < L; ++j) {
      if (Ops::__better(best[j], top) || (!Ops::__better(top, best[j]) && first_group[j] < group)) {
        top = best[j], group = first_group[j];
      }
    }
    if (has_tail && Ops::__better(tail, top)) return Acc{tail, b + tail_at};
    int32_t at = group * kGroup;
    while (Ops::__better(top, Ops::__value(base + at * kSize))) ++at;  // the group holds an element no worse than top
    return Acc{top, b + at};
  }

  /// A contiguous block in kLanes independent accumulators, folded pairwise.
  static Acc lanes(char* const* at, int64_t b, int64_t e) {
    // Unrolled in full, so the lanes live in vector registers, not in memory.
    Acc acc[kLanes];
#pragma GCC unroll 64
    for (int j = 0; j < kLanes; ++j) acc[j] = map_at(at, Ops::__kSizes, b + j, b + j);
    int64_t i = b + kLanes;
    for (; i + kLanes <= e; i += kLanes) {
#pragma GCC unroll 64
      for (int j = 0; j < kLanes; ++j) acc[j] = Ops::__combine(acc[j], map_at(at, Ops::__kSizes, i + j, i + j));
    }
#pragma GCC unroll 8
    for (int w = kLanes / 2; w > 0; w /= 2) {
#pragma GCC unroll 64
      for (int j = 0; j < w; ++j) acc[j] = Ops::__combine(acc[j], acc[j + w]);
    }
    for (; i < e; ++i) acc[0] = Ops::__combine(acc[0], map_at(at, Ops::__kSizes, i, i));
    return acc[0];
  }

  /// The mapped value of the element `i` steps (bytes per operand) from `at`,
  /// whose index along the innermost reduced dim is `index` (what value-and-index
  /// reductions keep; value reductions ignore it).
  static Acc map_at(char* const* at, const int64_t* step, int64_t i, int64_t index) {
    const char* in[kOps];
    for (int op = 1; op < kOps; ++op) in[op] = at[op] + i * step[op];
    return Ops::__map(in, index);
  }

  /// An outer reduction: one reduced dim whose inputs are not contiguous, under an
  /// innermost output dim along which every operand is: it runs across kColumns
  /// outputs at once, a row at a time (vectorised across the outputs).
  bool vertical() const {
    if (p_.n_kept == 0 || p_.n_reduced != 1) return false;
    const int d = p_.n_kept - 1;
    bool inner_contiguous = true, reduced_contiguous = true;
    for (int op = 0; op < kOps; ++op) {
      inner_contiguous = inner_contiguous && kept_stride(d, op) == Ops::__kSizes[op];
      if (op > 0) reduced_contiguous = reduced_contiguous && reduced_stride(0, op) == Ops::__kSizes[op];
    }
    return inner_contiguous && !reduced_contiguous && p_.kept_shape[d] > 1;
  }

  /// For the outputs [ob, oe), in runs along the innermost output dim of at most
  /// kColumns, calls done(output pointer, first output, accumulators, width) with
  /// the accumulators over rows [rb, re).
  template <class Done>
  void vertical_rows(int64_t ob, int64_t oe, int64_t rb, int64_t re, Done done) const {
    const int64_t width = p_.kept_shape[p_.n_kept - 1];
    int64_t idx[kRedMaxDims] = {};
    char* at[kOps];
    int64_t o = ob;
    while (o < oe) {
      position(o, idx, at);
      const int64_t col = idx[p_.n_kept - 1];
      int64_t w = width - col < oe - o ? width - col : oe - o;
      if (w > kColumns) w = kColumns;
      Acc acc[kColumns];
      columns(at, rb, re, w, acc);
      done(at[0], o, acc, w);
      o += w;
    }
  }

  /// acc[0..w) = the reductions of rows [rb, re) of w adjacent outputs, pairwise over rows.
  void columns(char* const* at, int64_t rb, int64_t re, int64_t w, Acc* acc) const {
    if (re - rb > kRows) {
      const int64_t m = rb + (re - rb) / 2;
      Acc right[kColumns];
      columns(at, rb, m, w, acc);
      columns(at, m, re, w, right);
      for (int64_t j = 0; j < w; ++j) acc[j] = Ops::__combine(acc[j], right[j]);
      return;
    }
    char* row[kOps];
    for (int op = 0; op < kOps; ++op) row[op] = at[op] + rb * reduced_stride(0, op);
    for (int64_t j = 0; j < w; ++j) acc[j] = map_at(row, Ops::__kSizes, j, rb);
    for (int64_t r = rb + 1; r < re; ++r) {
      for (int op = 0; op < kOps; ++op) row[op] += reduced_stride(0, op);
      for (int64_t j = 0; j < w; ++j) acc[j] = Ops::__combine(acc[j], map_at(row, Ops::__kSizes, j, r));
    }
  }

  const kjit_red_problem& p_;
};

/// kjit_red_kernel's body for a kernel's Ops: runs `mode` over `range` (see
/// kjit_red_mode). Here, before the user's code, so the generated entry after it
/// names nothing a user's macro could rewrite.
template <class Ops>
void kjit_red_run(const int64_t* range, int64_t mode, const void* problem) {
  const Reducer<Ops> r(*static_cast<const kjit_red_problem*>(problem));
  if (mode == kRedStore) {
    r.store(range[0], range[1]);
  } else if (mode == kRedPartial) {
    r.partial(range[2], range[3], range[4]);
  } else {
    r.finish(range[0], range[1], range[5]);
  }
}

}  // namespace kjit_red

#endif  // KJIT_DETAIL_REDUCTION_LOOP_H_
