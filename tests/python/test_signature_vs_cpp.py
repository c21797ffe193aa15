"""A signature that disagrees with the C++ definition kjit found is a SpecError
before any compile, naming both sides (kjit.resolve and load_inline alike)."""

import pytest

import kjit

HEAD = "#include <kjit/kernel.h>\n"

REJECTED = [
    ("void f(const kjit::TensorView x, kjit::TensorView y) {}", "x: float32[n], y: float32[n] out, z: float32",
     "signature of 'f': 3 parameters, but f at cpp_sources:2 takes 2 (x, y); the signature lists the C++ parameters "
     "in order"),
    ("void f(const kjit::TensorView x, kjit::TensorView y, int k, float a = 1.0f) {}", "x: float32[n], y: float32[n] out",
     "signature of 'f': 2 parameters, but f at cpp_sources:2 takes 3 to 4 (x, y, k, a); the signature lists the C++ "
     "parameters in order"),
    ("void f(const float* x, float alpha) {}", "alpha: float32, x: float32[n]",
     "signature of 'f': parameter #0 'alpha: float32' is a scalar, but C++ parameter #0 'const float* x' of f at "
     "cpp_sources:2 is a tensor; the signature lists the C++ parameters in order"),
    ("void f(const kjit::TensorView x, float alpha) {}", "x: float32[n], alpha: int32",
     "signature of 'f': parameter #1 'alpha: int32' is int32, but C++ parameter #1 'float alpha' of f at "
     "cpp_sources:2 takes float32; declare 'alpha: float32' or change the C++ type"),
    ("void f(const float* x, const float* y) {}", "x: float32[n], y: float32[n] out",
     "signature of 'f': parameter #1 'y: float32[n] out' is an output, but C++ parameter #1 'const float* y' of f at "
     "cpp_sources:2 is read-only to the kernel; drop the const, or drop 'out' if the kernel only reads it"),
    ("void f(const kjit::TensorView x, const kjit::TensorView& y) {}", "x: float32[n], y: float32[n] out",
     "signature of 'f': parameter #1 'y: float32[n] out' is an output, but C++ parameter #1 'const kjit::TensorView& "
     "y' of f at cpp_sources:2 is read-only to the kernel; drop the const, or drop 'out' if the kernel only reads it"),
    ("void f(kjit::TensorView x, std::complex<float> c) {}", "x: float32[n] out, c: float64",
     "signature of 'f': parameter #1 'c: float64' is float64, but C++ parameter #1 'std::complex<float> c' of f at "
     "cpp_sources:2 takes complex64; declare 'c: complex64' or change the C++ type"),
]

ACCEPTED = [
    ("void f(const kjit::TensorView x, kjit::TensorView y, float a = 1.0f) {}", "x: float32[n], y: float32[n] out"),
    ("void f(const kjit::TensorView x, uint16_t h) {}", "x: float32[n], h: float16"),  # raw bits, as brainevent
    ("void f(const kjit::TensorView x, double a) {}", "x: float32[n], a: float32"),  # one family
    ("template <typename T> void f(T x, int n) {}", "x: float32[n], n: int64"),  # a type kjit cannot map: the compiler's
]


@pytest.mark.parametrize("source, signature, message", REJECTED)
def test_mismatches_are_spec_errors_naming_both_sides(source, signature, message):
    with pytest.raises(kjit.SpecError) as err:
        kjit.resolve(HEAD + "#include <complex>\n" * 0 + source, {"f": signature})
    assert str(err.value) == message


@pytest.mark.parametrize("source, signature", ACCEPTED)
def test_what_the_kernel_takes_as_meant_passes(source, signature):
    assert kjit.resolve(HEAD + source, {"f": signature}) == {"f": signature}


def test_load_inline_refuses_before_compiling(tmp_path):
    with pytest.raises(kjit.SpecError, match=r"is int32, but C\+\+ parameter #1 'float alpha'"):
        kjit.load_inline("sig_vs_cpp", cpp_sources=HEAD + "void f(const kjit::TensorView x, float alpha) {}",
                         functions={"f": "x: float32[n], alpha: int32"}, build_directory=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing was built
