// What every kjit fuzz target treats as a bug: anything but a kjit user error.
//
// A parser may reject its input with a kjit::Error of a user kind (SpecError, ...).
// An InternalError (kjit's own bug), a raw standard exception (std::out_of_range
// from stoll, ...) or a failed round trip aborts, so libFuzzer records the input.
#ifndef KJIT_TESTS_FUZZ_FUZZ_COMMON_H_
#define KJIT_TESTS_FUZZ_FUZZ_COMMON_H_

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "kjit/errors.h"

namespace kjit_fuzz {

/// Prints why the input is a bug and aborts (libFuzzer saves it as a crash).
[[noreturn]] inline void bug(const std::string& what) {
  std::fprintf(stderr, "kjit fuzz: BUG: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Runs `step`; a user error is a fine outcome, anything else thrown is a bug.
/// Returns true when `step` completed.
template <typename Step>
bool run_guarded(const char* stage, Step&& step) {
  try {
    step();
    return true;
  } catch (const kjit::Error& e) {
    if (e.error_kind() == kjit::ErrorKind::kInternalError) {
      bug(std::string(stage) + ": InternalError: " + e.what());
    }
    return false;
  } catch (const std::exception& e) {
    bug(std::string(stage) + ": a raw std::exception escaped (not a kjit::Error): " + e.what());
  } catch (...) {
    bug(std::string(stage) + ": a non-std exception escaped");
  }
}

}  // namespace kjit_fuzz

#endif  // KJIT_TESTS_FUZZ_FUZZ_COMMON_H_
