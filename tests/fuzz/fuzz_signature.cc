// Fuzzes the signature grammar: parse_signature on arbitrary text, and for every
// accepted signature the round trip of its canonical text.
//
// parse(print(x)) must print the same text, and must mean the same: the stub
// generated from the reparsed spec is the stub of the original (a canonical text
// that regroups `n*(k/2)` as `n*k / 2` prints stably but changes the stub).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "kjit/codegen.h"
#include "kjit/spec.h"

namespace {

void check_round_trip(const kjit::FunctionSpec& spec) {
  const std::string text = kjit::to_string(spec);
  kjit::FunctionSpec again;
  if (!kjit_fuzz::run_guarded("reparse", [&] { again = kjit::parse_signature("f", text); })) {
    kjit_fuzz::bug("the canonical text does not parse: '" + text + "'");
  }
  const std::string text_again = kjit::to_string(again);
  if (text_again != text) kjit_fuzz::bug("print(parse(print(x))) != print(x): '" + text + "' -> '" + text_again + "'");
  std::string stub, stub_again;
  const bool emitted = kjit_fuzz::run_guarded("emit_stub", [&] { stub = kjit::emit_stub(spec); });
  const bool emitted_again =
      kjit_fuzz::run_guarded("emit_stub (reparsed)", [&] { stub_again = kjit::emit_stub(again); });
  if (emitted != emitted_again || stub != stub_again) {
    kjit_fuzz::bug("the canonical text '" + text + "' generates a different stub than the spec it came from");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kjit::FunctionSpec spec;
  if (kjit_fuzz::run_guarded("parse_signature", [&] { spec = kjit::parse_signature("f", text); })) {
    check_round_trip(spec);
  }
  kjit_fuzz::run_guarded("parse_expr", [&] { kjit::parse_expr(text); });
  return 0;
}
