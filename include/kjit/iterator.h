// kjit/iterator.h — TensorIterator for kernels written in C++, in one include:
// TensorIteratorConfig and TensorIterator (kjit/tensor_iterator.h), cpu_kernel
// and cpu_reduce (kjit/cpu_kernel.h), parallel_for (kjit/parallel.h) and the
// KJIT_DISPATCH_* macros (kjit/dispatch.h). docs/iterator.md shows them in use.
#ifndef KJIT_ITERATOR_H_
#define KJIT_ITERATOR_H_

#include "kjit/cpu_kernel.h"
#include "kjit/dispatch.h"
#include "kjit/parallel.h"
#include "kjit/tensor_iterator.h"

#endif  // KJIT_ITERATOR_H_
