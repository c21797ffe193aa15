// kjit/small_vector.h — a vector that keeps its first N elements inline: the
// per-call buffers of a bound call (values, symbols, shapes, output dims) and a
// TensorIterator's operands and dims then cost no heap allocation in the common
// case. Standard library only.
#ifndef KJIT_SMALL_VECTOR_H_
#define KJIT_SMALL_VECTOR_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace kjit {

template <typename T, size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  explicit SmallVector(size_t n, T fill = T()) { resize(n, fill); }
  SmallVector(const SmallVector& other) { *this = other; }
  SmallVector& operator=(const SmallVector& other) {
    if (this == &other) return *this;
    clear();
    for (const T& v : other) push_back(v);
    return *this;
  }
  SmallVector(SmallVector&& other) noexcept { *this = std::move(other); }
  SmallVector& operator=(SmallVector&& other) noexcept {
    for (size_t i = 0; i < other.size_ && i < N; ++i) small_[i] = std::move(other.small_[i]);
    large_ = std::move(other.large_);
    size_ = other.size_;
    other.large_.clear();
    other.size_ = 0;
    return *this;
  }

  void resize(size_t n, T fill = T()) {
    if (n > N && large_.empty()) large_.assign(small_, small_ + size_);
    if (n > N || !large_.empty()) large_.resize(n, fill);
    for (size_t i = size_; i < n && large_.empty(); ++i) small_[i] = fill;
    size_ = n;
  }
  void push_back(T v) {
    if (size_ < N && large_.empty()) {  // the common case: room inline
      small_[size_++] = std::move(v);
      return;
    }
    resize(size_ + 1);
    data()[size_ - 1] = std::move(v);
  }
  void clear() { resize(0); }
  T& back() { return data()[size_ - 1]; }
  T* data() { return large_.empty() ? small_ : large_.data(); }
  const T* data() const { return large_.empty() ? small_ : large_.data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  T small_[N];            ///< not value-initialised: resize() writes every element it adds
  std::vector<T> large_;  ///< in use once more than N elements were needed
  size_t size_ = 0;
};

}  // namespace kjit

#endif  // KJIT_SMALL_VECTOR_H_
