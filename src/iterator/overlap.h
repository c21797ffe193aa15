// The exact overlap test of the engines (NumPy's may_share_memory): the one copy in
// kjit/detail/memory_overlap.h, which kjit::TensorIterator uses too, named in the
// iterator core's namespace.
#ifndef KJIT_SRC_ITERATOR_OVERLAP_H_
#define KJIT_SRC_ITERATOR_OVERLAP_H_

#include "kjit/detail/memory_overlap.h"

namespace kjit {
namespace iterator {

using detail::kOverlapMaxWork;
using detail::may_share_memory;
using detail::Overlap;
using detail::OverlapInt;
using detail::OverlapTerm;
using detail::OverlapUInt;
using detail::solve_bounded_sum;
using detail::StridedBytes;

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_OVERLAP_H_
