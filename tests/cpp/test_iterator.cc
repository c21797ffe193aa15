// kjit/iterator.h from plain C++: the seed's TensorIterator example, the layout
// build() makes, cpu_kernel and cpu_reduce against loops written out by hand,
// every rejection's message, the accessor, the dispatch macros and parallel_for.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kjit/elementwise.h"
#include "kjit/iterator.h"

namespace {

/// An owned tensor: storage, shape and strides (in elements) behind a DLTensor.
template <typename T>
struct Tensor {
  // std::vector<bool> packs bits: bool tensors keep one byte per element.
  std::vector<std::conditional_t<std::is_same<T, bool>::value, char, T>> storage;
  std::vector<int64_t> shape, strides;
  DLTensor dl{};

  Tensor(std::vector<int64_t> shape_in, std::vector<int64_t> strides_in = {}, int64_t extent = -1)
      : shape(std::move(shape_in)), strides(std::move(strides_in)) {
    if (strides.empty()) {
      strides.assign(shape.size(), 1);
      for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
    }
    if (extent < 0) {
      extent = 1;
      for (size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * strides[d];
      for (int64_t s : shape) extent = s == 0 ? 1 : extent;
    }
    storage.resize(extent);
    dl.data = storage.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int>(shape.size());
    dl.dtype = kjit::dtype_of<T>();
    dl.shape = shape.data();
    dl.strides = strides.data();
  }
  kjit::TensorView view() const { return kjit::TensorView(&dl); }
  T& at(std::initializer_list<int64_t> idx) {
    int64_t off = 0, d = 0;
    for (int64_t i : idx) off += i * strides[d++];
    return storage[off];
  }
};

template <typename T>
void iota(Tensor<T>& t, T start = T(1)) {
  for (size_t i = 0; i < t.storage.size(); ++i) t.storage[i] = start + static_cast<T>(i % 97);
}

template <typename F>
std::string message_of(const F& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

using kjit::TensorIteratorConfig;

TEST(Iterator, SeedExampleWithTheNamespaceChanged) {
  Tensor<float> a({4, 5}), b({4, 5}), c({4, 5});
  iota(a);
  iota(b, 10.0f);
  // The seed's code, at:: and at::native:: spelled kjit::.
  kjit::TensorIteratorConfig iter_config;
  iter_config.add_output(c.view()).add_input(a.view()).add_input(b.view());

  auto iter = iter_config.build();

  // Element-wise add
  kjit::cpu_kernel(iter, [](float a, float b) -> float { return a + b; });
  for (size_t i = 0; i < c.storage.size(); ++i) EXPECT_EQ(c.storage[i], a.storage[i] + b.storage[i]);
  EXPECT_EQ(iter.ndim(), 1);  // contiguous: one dim
  EXPECT_TRUE(iter.is_contiguous());
}

TEST(Iterator, BroadcastsStridedInputs) {
  // out (3, 4) = col (3, 1) * row (4,) + transposed (3, 4)
  Tensor<double> out({3, 4}), col({3, 1}), row({4}), t({3, 4}, {1, 3}, 12);
  iota(col);
  iota(row, 2.0);
  iota(t, 5.0);
  auto iter = TensorIteratorConfig()
                  .add_output(out.view())
                  .add_input(col.view())
                  .add_input(row.view())
                  .add_input(t.view())
                  .build();
  kjit::cpu_kernel(iter, [](double x, double y, double z) { return x * y + z; });
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out.at({i, j}), col.at({i, 0}) * row.at({j}) + t.at({i, j}));
  }
  EXPECT_EQ(iter.shape().size(), 2u);
}

TEST(Iterator, ReordersToTheOutputsLayoutAndCoalesces) {
  // A transposed (column-major) output and input: one dim after reordering.
  Tensor<float> out({6, 7}, {1, 6}, 42), in({6, 7}, {1, 6}, 42);
  iota(in);
  auto iter = TensorIteratorConfig().add_output(out.view()).add_input(in.view()).build();
  EXPECT_EQ(iter.ndim(), 1);
  EXPECT_EQ(iter.strides(0)[0], 4);
  kjit::cpu_kernel(iter, [](float x) { return -x; });
  for (size_t i = 0; i < out.storage.size(); ++i) EXPECT_EQ(out.storage[i], -in.storage[i]);
  // A broadcast inner dim stays a dim of its own with stride 0 for that input.
  Tensor<float> o2({5, 8}), r({5, 1});
  auto it2 = TensorIteratorConfig().add_output(o2.view()).add_input(r.view()).build();
  ASSERT_EQ(it2.ndim(), 2);
  EXPECT_EQ(it2.shape()[0], 8);
  EXPECT_EQ(it2.strides(1)[0], 0);
}

TEST(Iterator, OperandRecordsDescribeEachOperand) {
  // out (3, 4) float32 = in (3, 1) int16 broadcast: one OperandInfo per operand.
  Tensor<float> out({3, 4});
  Tensor<int16_t> in({3, 1});
  auto iter = TensorIteratorConfig().check_all_same_dtype(false).add_output(out.view()).add_input(in.view()).build();
  const kjit::OperandInfo& o = iter.output();
  const kjit::OperandInfo& i = iter.input();
  EXPECT_TRUE(o.is_output);
  EXPECT_FALSE(i.is_output);
  EXPECT_FALSE(o.is_scalar || i.is_scalar);  // only the engines' Python scalars are
  EXPECT_EQ(o.data, reinterpret_cast<char*>(out.storage.data()));
  EXPECT_EQ(i.view.dltensor(), &in.dl);
  EXPECT_TRUE(kjit::same_dtype(i.dtype, kjit::dtype_of<int16_t>()));
  EXPECT_EQ(o.element_size, 4);
  EXPECT_EQ(i.element_size, 2);
  // Fastest dim first: (4, 3); the input steps 0 along the broadcast dim.
  ASSERT_EQ(iter.ndim(), 2);
  EXPECT_EQ(std::vector<int64_t>(o.strides.begin(), o.strides.end()), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(std::vector<int64_t>(i.strides.begin(), i.strides.end()), (std::vector<int64_t>{0, 2}));
  EXPECT_THROW(iter.operand(2), kjit::IndexError);
}

TEST(Iterator, InPlaceIsAllowed) {
  Tensor<int32_t> x({1000});
  iota(x, int32_t{0});
  std::vector<int32_t> before = x.storage;
  auto iter = TensorIteratorConfig().add_output(x.view()).add_input(x.view()).build();
  kjit::cpu_kernel(iter, [](int32_t v) { return v * 3 + 1; });
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(x.storage[i], before[i] * 3 + 1);
}

TEST(Iterator, OutputsOfTheirOwnTypeWithoutTheSameDtypeCheck) {
  Tensor<bool> out({33});
  Tensor<float> a({33}), b({33});
  iota(a);
  iota(b, 17.0f);
  auto iter = TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out.view())
                  .add_input(a.view())
                  .add_input(b.view())
                  .build();
  kjit::cpu_kernel(iter, [](float x, float y) { return x < y; });
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(out.storage[i], a.storage[i] < b.storage[i]);
}

TEST(Iterator, ZeroDimAndEmpty) {
  Tensor<float> o({}), i({});
  i.storage[0] = 2.5f;
  kjit::cpu_kernel(TensorIteratorConfig().add_output(o.view()).add_input(i.view()).build(),
                   [](float x) { return x * 2; });
  EXPECT_EQ(o.storage[0], 5.0f);
  Tensor<float> eo({3, 0}), ei({3, 0});
  eo.storage[0] = 7.0f;
  auto it = TensorIteratorConfig().add_output(eo.view()).add_input(ei.view()).build();
  EXPECT_EQ(it.numel(), 0);
  kjit::cpu_kernel(it, [](float x) { return x; });
  EXPECT_EQ(eo.storage[0], 7.0f);
}

TEST(Iterator, LargeLoopsRunOnThePoolAndMatch) {
  kjit::set_num_threads(2);
  const int64_t n = (int64_t{1} << 20) + 3;
  Tensor<float> out({n}), a({n}), b({n});
  iota(a);
  iota(b, 3.0f);
  kjit::cpu_kernel(TensorIteratorConfig().add_output(out.view()).add_input(a.view()).add_input(b.view()).build(),
                   [](float x, float y) { return x * y - 1.0f; });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.storage[i], a.storage[i] * b.storage[i] - 1.0f) << i;
  // A strided 2-D loop split mid-row by the chunks.
  Tensor<float> o2({1031, 1029}), s({1031, 1029}, {1, 1031}, 1031 * 1029);
  iota(s);
  kjit::cpu_kernel(TensorIteratorConfig().add_output(o2.view()).add_input(s.view()).build(),
                   [](float x) { return x + 0.5f; });
  for (int64_t i = 0; i < 1031; i += 7) {
    for (int64_t j = 0; j < 1029; j += 5) ASSERT_EQ(o2.at({i, j}), s.at({i, j}) + 0.5f);
  }
  kjit::set_num_threads(0);
}

TEST(Iterator, ForEachCoversEachElementOnce) {
  Tensor<int64_t> out({37, 1, 129}, {129 * 2, 1, 2}, 37 * 129 * 2);  // every other element
  std::atomic<int64_t> visits{0};
  auto iter = TensorIteratorConfig().add_output(out.view()).build();
  iter.for_each(
      [&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        for (int64_t j = 0; j < n1; ++j) {
          for (int64_t i = 0; i < n0; ++i) *reinterpret_cast<int64_t*>(data[0] + i * strides[0] + j * strides[1]) += 1;
        }
        visits += n0 * n1;
      },
      100);
  EXPECT_EQ(visits.load(), 37 * 129);
  for (size_t i = 0; i < out.storage.size(); ++i) ASSERT_EQ(out.storage[i], i % 2 == 0 ? 1 : 0) << i;
}

TEST(Iterator, RejectionsNameWhatWasWrong) {
  Tensor<float> a({3}), b({4}), out3({3}), out2({2, 3}), big({3, 4});
  Tensor<double> d({3});
  EXPECT_EQ(
      message_of(
          [&] { TensorIteratorConfig().add_output(big.view()).add_input(a.view()).add_input(b.view()).build(); }),
      "kjit::TensorIterator: the shapes of output 0 (3, 4) and input 0 (3,) do not broadcast: dim 1 is 4 in one and 3 "
      "in the other");
  EXPECT_EQ(
      message_of([&] { TensorIteratorConfig().add_input(a.view()).add_input(b.view()).build(); }),
      "kjit::TensorIterator: the shapes of input 0 (3,) and input 1 (4,) do not broadcast: dim 0 is 3 in one and 4 "
      "in the other");
  EXPECT_EQ(
      message_of([&] { TensorIteratorConfig().add_output(out2.view()).add_input(big.view()).build(); }),
      "kjit::TensorIterator: the shapes of output 0 (2, 3) and input 0 (3, 4) do not broadcast: dim 0 is 2 in one "
      "and 3 in the other");
  Tensor<float> row({1, 4});
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_output(row.view()).add_input(big.view()).build(); }),
            "kjit::TensorIterator: output 0 has shape (1, 4), the operands broadcast to (3, 4)");
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_output(out3.view()).add_input(d.view()).build(); }),
            "kjit::TensorIterator: input 0 is float64, output 0 is float32: the operands must have one dtype "
            "(check_all_same_dtype(false) allows several)");
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_input(a.view()).add_output(out3.view()); }),
            "kjit::TensorIterator: add every output before the first input (output 0 was added after input 0)");
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().build(); }),
            "kjit::TensorIterator: no operands: add_output and add_input come before build()");
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_output(kjit::TensorView()).build(); }),
            "kjit::TensorIterator: output 0 is undefined (an optional tensor passed as None)");
  // Overlap: an output with stride 0, and one that half-covers an input.
  Tensor<float> bcast({4}, {0}, 1), buf({8});
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_output(bcast.view()).add_input(b.view()).build(); }),
            "kjit::TensorIterator: output 0 has stride 0 at dim 0: more than one element of it refers to a single "
            "memory location");
  DLTensor shifted = buf.dl;
  int64_t four = 4;
  shifted.shape = &four;
  DLTensor head = shifted;
  shifted.byte_offset = 2 * sizeof(float);
  EXPECT_EQ(message_of([&] {
              TensorIteratorConfig().add_output(kjit::TensorView(&shifted)).add_input(kjit::TensorView(&head)).build();
            }),
            "kjit::TensorIterator: output 0 partially overlaps input 0: an output may share memory with an input only "
            "as the same tensor (in place)");
  // Devices.
  Tensor<float> gpu({3});
  gpu.dl.device = {kDLCUDA, 1};
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_output(out3.view()).add_input(gpu.view()).build(); }),
            "kjit::TensorIterator: input 0 is on cuda:1, output 0 on cpu:0: the operands must be on one device");
  // cpu_kernel against the lambda.
  auto iter = TensorIteratorConfig().add_output(out3.view()).add_input(a.view()).build();
  EXPECT_EQ(message_of([&] { kjit::cpu_kernel(iter, [](double x) { return static_cast<float>(x); }); }),
            "kjit::cpu_kernel: input 0 is float32, the lambda's argument 0 is float64");
  EXPECT_EQ(message_of([&] { kjit::cpu_kernel(iter, [](float x) { return static_cast<double>(x); }); }),
            "kjit::cpu_kernel: output 0 is float32, the lambda returns is float64");
  EXPECT_EQ(message_of([&] { kjit::cpu_kernel(iter, [](float x, float y) { return x + y; }); }),
            "kjit::cpu_kernel: the lambda takes 2 arguments, the iterator has 1 inputs");
  auto on_gpu = TensorIteratorConfig().add_output(gpu.view()).build();
  EXPECT_EQ(message_of([&] { kjit::cpu_kernel(on_gpu, []() { return 1.0f; }); }),
            "kjit::cpu_kernel: it runs on the CPU, the operands are on cuda:1");
  // Kinds: shapes and overlap are ValueErrors, dtypes TypeErrors.
  EXPECT_THROW(TensorIteratorConfig().add_output(out3.view()).add_input(d.view()).build(), kjit::TypeError);
  EXPECT_THROW(TensorIteratorConfig().add_output(out2.view()).add_input(big.view()).build(), kjit::ValueError);
}

TEST(Iterator, HostileSizesAndStrides) {
  Tensor<float> a({3});
  int64_t huge[2] = {int64_t{1} << 62, 4};
  DLTensor h = a.dl;
  h.ndim = 2;
  h.shape = huge;
  int64_t hs[2] = {4, 1};
  h.strides = hs;
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_input(kjit::TensorView(&h)).build(); }),
            "kjit::TensorIterator: the loop of shape (4611686018427387904, 4) has more than 2^63 elements");
  int64_t neg = -1;
  DLTensor n = a.dl;
  n.shape = &neg;
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_input(kjit::TensorView(&n)).build(); }),
            "kjit::TensorIterator: input 0 has a negative size -1 at dim 0");
  int64_t min_stride = INT64_MIN;
  DLTensor s = a.dl;
  s.strides = &min_stride;
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_input(kjit::TensorView(&s)).build(); }),
            "kjit::TensorIterator: input 0's stride -9223372036854775808 at dim 0 overflows in bytes");
  DLTensor packed = a.dl;
  packed.dtype = {kDLInt, 4, 1};
  EXPECT_EQ(message_of([&] { TensorIteratorConfig().add_input(kjit::TensorView(&packed)).build(); }),
            "kjit::TensorIterator: input 0 is int4: the iterator takes one-lane dtypes of whole bytes");
}

TEST(Iterator, ReducesLikeLoopsWrittenOut) {
  const int64_t rows = 37, cols = 301;
  Tensor<float> m({rows, cols});
  iota(m);
  Tensor<double> by_row({rows, 1}), by_col({1, cols}), all({1, 1});
  auto sum = [](double acc, float x) { return acc + x; };
  auto join = [](double a, double b) { return a + b; };
  kjit::cpu_reduce(TensorIteratorConfig()
                       .is_reduction(true)
                       .check_all_same_dtype(false)
                       .add_output(by_row.view())
                       .add_input(m.view())
                       .build(),
                   0.0, sum, join);
  kjit::cpu_reduce(TensorIteratorConfig()
                       .is_reduction(true)
                       .check_all_same_dtype(false)
                       .add_output(by_col.view())
                       .add_input(m.view())
                       .build(),
                   0.0, sum, join);
  kjit::cpu_reduce(TensorIteratorConfig()
                       .is_reduction(true)
                       .check_all_same_dtype(false)
                       .add_output(all.view())
                       .add_input(m.view())
                       .build(),
                   0.0, sum, join);
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double r = 0;
    for (int64_t j = 0; j < cols; ++j) r += m.at({i, j});
    EXPECT_EQ(by_row.at({i, 0}), r);
    total += r;
  }
  for (int64_t j = 0; j < cols; ++j) {
    double c = 0;
    for (int64_t i = 0; i < rows; ++i) c += m.at({i, j});
    EXPECT_EQ(by_col.at({0, j}), c);
  }
  EXPECT_EQ(all.storage[0], total);
}

TEST(Iterator, LongReductionsSplitIntoPartsAndMax) {
  kjit::set_num_threads(2);
  const int64_t n = (int64_t{1} << 21) + 5;
  Tensor<int64_t> v({n}), out({1});
  iota(v, int64_t{-40});
  v.storage[123457] = 1000;
  kjit::cpu_reduce(TensorIteratorConfig().is_reduction(true).add_output(out.view()).add_input(v.view()).build(),
                   INT64_MIN, [](int64_t a, int64_t b) { return a > b ? a : b; });
  EXPECT_EQ(out.storage[0], 1000);
  kjit::cpu_reduce(TensorIteratorConfig().is_reduction(true).add_output(out.view()).add_input(v.view()).build(),
                   int64_t{0}, [](int64_t a, int64_t b) { return a + b; });
  EXPECT_EQ(out.storage[0], std::accumulate(v.storage.begin(), v.storage.end(), int64_t{0}));
  kjit::set_num_threads(0);
}

TEST(Iterator, InterleavedViewsThatShareNoElementAreAccepted) {
  // out = x[1::2] beside an input x[::2]: byte ranges that meet but no shared
  // element (NumPy and torch accept them); the exact test decides, as the engines'.
  Tensor<float> buf({16});
  iota(buf);
  DLTensor evens = buf.dl, odds = buf.dl;
  int64_t eight = 8, two = 2;
  evens.shape = odds.shape = &eight;
  evens.strides = odds.strides = &two;
  odds.byte_offset = sizeof(float);
  auto iter = TensorIteratorConfig().add_output(kjit::TensorView(&odds)).add_input(kjit::TensorView(&evens)).build();
  kjit::cpu_kernel(iter, [](float x) { return 10 * x; });
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(buf.storage[2 * i + 1], 10 * buf.storage[2 * i]);
  // z.imag written from z.real of complex64 data: float views 8 bytes apart.
  Tensor<float> z({2 * 5});
  iota(z);
  DLTensor re = z.dl, im = z.dl;
  int64_t five = 5;
  re.shape = im.shape = &five;
  re.strides = im.strides = &two;
  im.byte_offset = sizeof(float);
  kjit::cpu_kernel(TensorIteratorConfig().add_output(kjit::TensorView(&im)).add_input(kjit::TensorView(&re)).build(),
                   [](float x) { return -x; });
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(z.storage[2 * i + 1], -z.storage[2 * i]);
  // A reduction into x[1] of x[::2]: no shared element either.
  Tensor<float> v({9});
  iota(v);
  DLTensor every_other = v.dl, one = v.dl;
  int64_t n5 = 5, n1 = 1;
  every_other.shape = &n5;
  every_other.strides = &two;
  one.shape = &n1;
  one.byte_offset = sizeof(float);
  kjit::cpu_reduce(TensorIteratorConfig()
                       .is_reduction(true)
                       .add_output(kjit::TensorView(&one))
                       .add_input(kjit::TensorView(&every_other))
                       .build(),
                   0.0f, [](float a, float b) { return a + b; });
  EXPECT_EQ(v.storage[1], v.storage[0] + v.storage[2] + v.storage[4] + v.storage[6] + v.storage[8]);
  // Still refused: x[1::2] written from x[:8] (element 1 is both).
  DLTensor first_eight = buf.dl;
  first_eight.shape = &eight;
  EXPECT_EQ(
      message_of([&] {
        TensorIteratorConfig().add_output(kjit::TensorView(&odds)).add_input(kjit::TensorView(&first_eight)).build();
      }),
      "kjit::TensorIterator: output 0 partially overlaps input 0: an output may share memory with an input only "
      "as the same tensor (in place)");
}

TEST(Iterator, BoolReductionsDoNotRaceOnTheirParts) {
  // The parts of a long reduction were a std::vector<bool>: threads wrote bits of
  // one word at once, and `all` of 2^22 ones was sometimes false.
  kjit::set_num_threads(2);
  const int64_t n = int64_t{1} << 22;
  Tensor<bool> ones({n}), out({1});
  std::fill(ones.storage.begin(), ones.storage.end(), true);
  auto iter = TensorIteratorConfig().is_reduction(true).add_output(out.view()).add_input(ones.view()).build();
  for (int round = 0; round < 200; ++round) {
    out.storage[0] = false;
    kjit::cpu_reduce(iter, true, [](bool a, bool b) { return a && b; });
    ASSERT_TRUE(out.storage[0]) << "round " << round;
  }
  kjit::set_num_threads(0);
}

TEST(Iterator, ReductionsGiveTheSameBitsOnAnyThreadCount) {
  // Float sums depend on how the elements are grouped: the grouping must come from
  // the problem, not from the pool's size.
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {int64_t{1} << 21}, {3, (int64_t{1} << 19) + 7}, {63, 70001}, {64, 40000}, {1000, 3001}}) {
    const std::vector<int64_t> kept_shape = {shape.size() == 1 ? 1 : shape[0], 1};
    Tensor<float> in(shape);
    for (size_t i = 0; i < in.storage.size(); ++i) in.storage[i] = 1.0f / static_cast<float>(1 + i % 977);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3, 8}) {
      kjit::set_num_threads(threads);
      Tensor<float> out(shape.size() == 1 ? std::vector<int64_t>{1} : kept_shape);
      kjit::cpu_reduce(TensorIteratorConfig().is_reduction(true).add_output(out.view()).add_input(in.view()).build(),
                       0.0f, [](float a, float b) { return a + b; });
      results.push_back(out.storage);
    }
    kjit::set_num_threads(0);
    for (size_t k = 1; k < results.size(); ++k) {
      ASSERT_EQ(std::memcmp(results[k].data(), results[0].data(), results[0].size() * sizeof(float)), 0)
          << "shape[0] " << shape[0];
    }
  }
}

TEST(Iterator, EmptyReductionsGiveTheIdentity) {
  Tensor<float> in({4, 0}), out({4, 1});
  auto iter = TensorIteratorConfig().is_reduction(true).add_output(out.view()).add_input(in.view()).build();
  kjit::cpu_reduce(iter, -1.5f, [](float a, float b) { return a + b; });
  for (float v : out.storage) EXPECT_EQ(v, -1.5f);
  EXPECT_EQ(
      message_of([&] {
        Tensor<float> o({1, 3}), i({4, 3});
        TensorIteratorConfig().is_reduction(true).add_output(o.view()).add_input(i.view()).build();
        Tensor<float> bad({3});
        TensorIteratorConfig().is_reduction(true).add_output(bad.view()).add_input(i.view()).build();
      }),
      "kjit::TensorIterator: output 0 has shape (3,), a reduction's output needs the inputs' dims with 1 where it "
      "reduces: (4, 3)");
  auto plain = TensorIteratorConfig().add_output(out.view()).add_input(out.view()).build();
  EXPECT_EQ(message_of([&] { kjit::cpu_reduce(plain, 0.0f, [](float a, float b) { return a + b; }); }),
            "kjit::cpu_reduce: it takes an iterator built with is_reduction(true) over one output and one input");
}

TEST(Iterator, Accessor) {
  Tensor<float> m({3, 4}, {1, 3}, 12);
  iota(m);
  kjit::TensorView v = m.view();
  auto acc = v.accessor<float, 2>();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(acc[i][j], m.at({i, j}));
  }
  acc[2][3] = 99.0f;
  EXPECT_EQ(m.at({2, 3}), 99.0f);
  const kjit::TensorView cv = v;
  auto cacc = cv.accessor<float, 2>();
  static_assert(std::is_same<decltype(cacc[0][0]), const float&>::value, "a const view reads only");
  static_assert(std::is_same<decltype(cv.data<float>()), const float*>::value, "a const view reads only");
  EXPECT_EQ(cacc[1][2], m.at({1, 2}));
  EXPECT_EQ(cacc.size(1), 4);
  // A compact DLTensor without strides.
  Tensor<int32_t> c({2, 3});
  iota(c, 0);
  c.dl.strides = nullptr;
  kjit::TensorView compact(&c.dl);
  auto ints = compact.accessor<int32_t, 2>();
  EXPECT_EQ(ints[1][2], 5);
  auto as_double = [&] { v.accessor<double, 2>(); };
  auto as_1d = [&] { v.accessor<float, 1>(); };
  EXPECT_EQ(message_of(as_double), "kjit::TensorView::accessor<float64, 2>: the tensor is 2-d float32");
  EXPECT_EQ(message_of(as_1d), "kjit::TensorView::accessor<float32, 1>: the tensor is 2-d float32");
}

template <typename T>
std::string type_name_of() {
  return kjit::dtype_name(kjit::dtype_of<T>());
}

TEST(Iterator, DispatchMacros) {
  auto name_of = [](DLDataType d) {
    return KJIT_DISPATCH_ALL_TYPES_AND_COMPLEX(d, "my_kernel", [&] { return type_name_of<scalar_t>(); });
  };
  EXPECT_EQ(name_of({kDLFloat, 32, 1}), "float32");
  EXPECT_EQ(name_of({kDLInt, 64, 1}), "int64");
  EXPECT_EQ(name_of({kDLComplex, 128, 1}), "complex128");
  int calls = 0;
  KJIT_DISPATCH_FLOATING_TYPES(DLDataType({kDLFloat, 64, 1}), "f", [&] {
    static_assert(std::is_floating_point<scalar_t>::value, "floating");
    calls += sizeof(scalar_t);
  });
  EXPECT_EQ(calls, 8);
  EXPECT_EQ((message_of([&] {
              KJIT_DISPATCH_FLOATING_TYPES(DLDataType({kDLInt, 32, 1}), "my_kernel", [&] {});
            })),
            "my_kernel: dtype int32 is not supported (it takes float32, float64)");
  EXPECT_EQ((message_of([&] {
              KJIT_DISPATCH_INTEGRAL_TYPES(DLDataType({kDLFloat, 32, 4}), "k", [&] {});
            })),
            "k: dtype float32x4 is not supported (it takes uint8, int8, int16, int32, int64)");
  auto bfloat16 = [] { KJIT_DISPATCH_ALL_TYPES(DLDataType({kDLBfloat, 16, 1}), "k", [&] {}); };
  EXPECT_THROW(bfloat16(), kjit::TypeError);
}

TEST(Iterator, ParallelForCoversTheRangeAndRethrows) {
  kjit::set_num_threads(2);
  std::vector<std::atomic<int>> hits(100000);
  kjit::parallel_for(0, 100000, 1000, [&](int64_t b, int64_t e) {
    EXPECT_GE(e - b, 1000);
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_THROW(kjit::parallel_for(0, 100000, 10,
                                  [](int64_t b, int64_t) {
                                    if (b > 0) throw kjit::IndexError("chunk failed");
                                  }),
               kjit::IndexError);
  int serial = 0;
  kjit::parallel_for(5, 10, 100, [&](int64_t b, int64_t e) { serial += static_cast<int>(e - b); });
  EXPECT_EQ(serial, 5);
  kjit::parallel_for(10, 5, 1, [&](int64_t, int64_t) { serial = -1; });
  EXPECT_EQ(serial, 5);
  kjit::set_num_threads(0);
}

TEST(Iterator, DtypeNames) {
  EXPECT_EQ(kjit::dtype_name({kDLBool, 8, 1}), "bool");
  EXPECT_EQ(kjit::dtype_name({kDLBfloat, 16, 1}), "bfloat16");
  EXPECT_EQ(kjit::dtype_name({kDLFloat8_e4m3fn, 8, 1}), "float8_e4m3fn");
  EXPECT_EQ(kjit::dtype_name({kDLFloat4_e2m1fn, 4, 2}), "float4_e2m1fnx2");
  EXPECT_EQ(kjit::dtype_name({99, 8, 1}), "dtype(code=99, bits=8)");
  EXPECT_EQ(type_name_of<long long>(), "int64");
  EXPECT_EQ(type_name_of<unsigned char>(), "uint8");
  EXPECT_EQ(type_name_of<std::complex<float>>(), "complex64");
}

}  // namespace
