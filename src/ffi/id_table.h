// Engines Python holds by id (elementwise functions, reductions): a shared_ptr per
// id, so a call in flight keeps its engine through a free.
#ifndef KJIT_SRC_FFI_ID_TABLE_H_
#define KJIT_SRC_FFI_ID_TABLE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kjit/errors.h"

namespace kjit {

template <class T>
class IdTable {
 public:
  /// Keeps `item`; its id.
  int64_t add(std::shared_ptr<T> item) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(item));
    return static_cast<int64_t>(items_.size() - 1);
  }
  /// The item of `id`; an unknown or freed id is kjit's bug (Python passes only its own).
  std::shared_ptr<T> get(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    internal_check(id >= 0 && static_cast<size_t>(id) < items_.size() && items_[id] != nullptr, "unknown engine id");
    return items_[id];
  }
  /// Drops the table's reference (an unknown id: nothing).
  void free(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (id >= 0 && static_cast<size_t>(id) < items_.size()) items_[id].reset();
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<T>> items_;
};

}  // namespace kjit

#endif  // KJIT_SRC_FFI_ID_TABLE_H_
