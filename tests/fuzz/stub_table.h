// The table kjit_fuzz_stubgen appends to the generated stubs: each stub's name, its
// tvm-ffi safe call and its signature, for the stub fuzzer to pick from and to run
// the call model (src/call) beside.
#ifndef KJIT_TESTS_FUZZ_STUB_TABLE_H_
#define KJIT_TESTS_FUZZ_STUB_TABLE_H_

#include <tvm/ffi/c_api.h>

struct KjitFuzzStub {
  const char* name;
  int (*call)(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);
  int num_args;           ///< the caller arguments of its spec
  const char* signature;  ///< its canonical signature: the call model's spec
};

extern "C" const KjitFuzzStub kjit_fuzz_stubs[];
extern "C" const int kjit_fuzz_stub_count;

#endif  // KJIT_TESTS_FUZZ_STUB_TABLE_H_
