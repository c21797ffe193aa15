// The headers every stub translation unit needs, and nothing else. Generated
// module sources include this first, so kjit can replace it with a precompiled
// header built with the JIT's default flags (docs/cache.md); the stub prelude
// includes it too, so the prelude still compiles alone.
#ifndef KJIT_DETAIL_STUB_INCLUDES_H_
#define KJIT_DETAIL_STUB_INCLUDES_H_

#include <kjit/kernel.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#endif  // KJIT_DETAIL_STUB_INCLUDES_H_
