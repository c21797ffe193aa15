// Lets brainevent kernel sources that `#include "brainevent/common.h"` compile
// under kjit unchanged: BE::Tensor is kjit's tensor view. kjit puts this directory
// on the include path only for sources that use brainevent's spelling.
#ifndef KJIT_COMPAT_BRAINEVENT_COMMON_H_
#define KJIT_COMPAT_BRAINEVENT_COMMON_H_

#include <kjit/kernel.h>

namespace BE {
using Tensor = ::kjit::TensorView;
}  // namespace BE

#endif  // KJIT_COMPAT_BRAINEVENT_COMMON_H_
