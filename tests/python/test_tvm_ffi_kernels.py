"""Kernels written for tvm_ffi.cpp.load_inline load through kjit.load_inline unchanged.

The kernel texts are those of tvm-ffi's own tests (tests/python/test_load_inline.py
and test_build.py) that run on CPU; only the load call differs. kjit adds its checks
(with a signature) and exports tvm-ffi's function metadata.
"""

import gc

import numpy as np
import pytest
from tvm_ffi.core import TypeSchema

import kjit
from conftest import build

ADD_ONE_CPU = r"""
            void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
              // implementation of a library function
              TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1D tensor";
              DLDataType f32_dtype{kDLFloat, 32, 1};
              TVM_FFI_ICHECK(x.dtype() == f32_dtype) << "x must be a float tensor";
              TVM_FFI_ICHECK(y.ndim() == 1) << "y must be a 1D tensor";
              TVM_FFI_ICHECK(y.dtype() == f32_dtype) << "y must be a float tensor";
              TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same shape";
              for (int i = 0; i < x.size(0); ++i) {
                static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 1;
              }
            }
        """

ADD_TWO_CPU = r"""
            void add_two_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
              // implementation of a library function
              TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1D tensor";
              DLDataType f32_dtype{kDLFloat, 32, 1};
              TVM_FFI_ICHECK(x.dtype() == f32_dtype) << "x must be a float tensor";
              TVM_FFI_ICHECK(y.ndim() == 1) << "y must be a 1D tensor";
              TVM_FFI_ICHECK(y.dtype() == f32_dtype) << "y must be a float tensor";
              TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same shape";
              for (int i = 0; i < x.size(0); ++i) {
                static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 2;
              }
            }
        """

IO_TYPES = r"""
            // int input -> int output
            int square(int x) {
                return x * x;
            }

            // float input -> float output
            float reciprocal(float x) {
                return 1.0f / x;
            }

            // bool input -> bool output
            bool negate(bool x) {
                return !x;
            }

            // String input -> String output
            tvm::ffi::String uppercase_first(tvm::ffi::String s) {
                std::string result(s.c_str());
                if (!result.empty()) {
                    result[0] = std::toupper(result[0]);
                }
                return tvm::ffi::String(result);
            }

            // Multiple inputs: int, float -> float
            float weighted_sum(int count, float weight) {
                return static_cast<float>(count) * weight;
            }

            // Multiple inputs: String, int -> String
            tvm::ffi::String repeat_string(tvm::ffi::String s, int times) {
                std::string result;
                for (int i = 0; i < times; ++i) {
                    result += s.c_str();
                }
                return tvm::ffi::String(result);
            }

            // Mixed types: bool, int, float, String -> String
            tvm::ffi::String format_data(bool flag, int count, float value, tvm::ffi::String label) {
                std::ostringstream oss;
                oss << label.c_str() << ": flag=" << (flag ? "true" : "false")
                    << ", count=" << count << ", value=" << value;
                return tvm::ffi::String(oss.str());
            }

            // Tensor input/output
            void double_tensor(tvm::ffi::TensorView input, tvm::ffi::TensorView output) {
                TVM_FFI_ICHECK(input.ndim() == 1);
                TVM_FFI_ICHECK(output.ndim() == 1);
                TVM_FFI_ICHECK(input.size(0) == output.size(0));
                DLDataType f32_dtype{kDLFloat, 32, 1};
                TVM_FFI_ICHECK(input.dtype() == f32_dtype);
                TVM_FFI_ICHECK(output.dtype() == f32_dtype);

                for (int i = 0; i < input.size(0); ++i) {
                    static_cast<float*>(output.data_ptr())[i] =
                        static_cast<const float*>(input.data_ptr())[i] * 2.0f;
                }
            }
        """
IO_FUNCTIONS = [
    "square",
    "reciprocal",
    "negate",
    "uppercase_first",
    "weighted_sum",
    "repeat_string",
    "format_data",
    "double_tensor",
]

DOCS = r"""
            int add(int a, int b) {
                return a + b;
            }

            int subtract(int a, int b) {
                return a - b;
            }

            float divide(float a, float b) {
                TVM_FFI_ICHECK(b != 0.0f) << "Division by zero";
                return a / b;
            }
        """

SIMPLE_ADD = r"""
            // Note: NOT defining TVM_FFI_DLL_EXPORT_INCLUDE_METADATA

            int simple_add(int a, int b) {
                return a + b;
            }
        """

RETURN_TENSOR = r"""
            #include <tvm/ffi/function.h>
            #include <tvm/ffi/container/tensor.h>

            namespace ffi = tvm::ffi;

            ffi::Tensor return_tensor(tvm::ffi::TensorView x) {
                ffi::Tensor y = ffi::Tensor::FromEnvAlloc(
                    TVMFFIEnvTensorAlloc, x.shape(), x.dtype(), x.device());
                return y;
            }
        """


def schema_of(mod, fn):
    return str(TypeSchema.from_json_str(mod.get_function_metadata(fn)["type_schema"]))


# ---- test_load_inline.py's CPU kernels ----


def test_add_one_cpu_inferred():
    mod = build("tvf_add_one", ADD_ONE_CPU, ["add_one_cpu"])
    assert mod.functions == {"add_one_cpu": "x: any[...] out, y: any[...] out"}
    x = np.array([1, 2, 3, 4, 5], dtype=np.float32)
    y = np.empty_like(x)
    mod.add_one_cpu(x, y)
    np.testing.assert_equal(x + 1, y)


def test_add_one_cpu_with_a_signature_gets_kjit_checks():
    mod = build("tvf_add_one_sig", ADD_ONE_CPU, {"add_one_cpu": "x: float32[n], y: float32[n] out"})
    x = np.array([1, 2, 3, 4, 5], dtype=np.float32)
    y = np.empty_like(x)
    mod.add_one_cpu(x, y)
    np.testing.assert_equal(x + 1, y)
    with pytest.raises(ValueError) as err:
        mod.add_one_cpu(x, np.empty(4, dtype=np.float32))
    assert str(err.value) == "add_one_cpu: argument #1 'y': shape[0] must equal n = 5 (bound by x.shape[0]), got 4"
    with pytest.raises(TypeError) as err:
        mod.add_one_cpu(x.astype(np.float64), y)
    assert str(err.value) == "add_one_cpu: argument #0 'x': dtype must be float32, got float64"


def test_icheck_in_the_kernel_is_a_runtime_error_naming_the_function():
    mod = build("tvf_add_one", ADD_ONE_CPU, ["add_one_cpu"])
    x = np.zeros(3, dtype=np.float64)
    with pytest.raises(RuntimeError) as err:
        mod.add_one_cpu(x, np.empty_like(x))
    assert type(err.value) is RuntimeError
    assert str(err.value) == "add_one_cpu: Check failed: (x.dtype() == f32_dtype) is false: x must be a float tensor"


def test_multiple_sources():
    mod = kjit.load_inline(
        "tvf_two_sources", cpp_sources=[ADD_ONE_CPU, ADD_TWO_CPU], functions=["add_one_cpu", "add_two_cpu"]
    )
    x = np.array([1, 2, 3, 4, 5], dtype=np.float32)
    y = np.empty_like(x)
    mod.add_one_cpu(x, y)
    np.testing.assert_equal(x + 1, y)
    mod.add_two_cpu(x, y)
    np.testing.assert_equal(x + 2, y)


def test_build_directory(tmp_path):
    mod = build("tvf_build_dir", ADD_ONE_CPU, ["add_one_cpu"], build_directory=str(tmp_path / "build_add_one"))
    assert mod.path.startswith(str(tmp_path / "build_add_one"))
    x = np.array([1, 2, 3, 4, 5], dtype=np.float32)
    y = np.empty_like(x)
    mod.add_one_cpu(x, y)
    np.testing.assert_equal(x + 1, y)


def test_returned_tvm_ffi_tensor_is_allocated_by_torch():
    torch = pytest.importorskip("torch")
    mod = build("tvf_return_tensor", RETURN_TENSOR, ["return_tensor"])
    assert mod.functions == {"return_tensor": "x: any[...] out"}
    assert schema_of(mod, "return_tensor") == "Callable[[Tensor], Tensor]"

    def run_check():
        # Returned objects are released before the module could go away.
        x = torch.arange(16, dtype=torch.float32)
        y = mod.return_tensor(x)
        assert isinstance(y, torch.Tensor)
        assert y.shape == (16,) and y.dtype == torch.float32

    run_check()
    gc.collect()


# ---- test_build.py's kernels: scalars, strings, tensors, and their metadata ----


def test_io_types_and_their_metadata():
    mod = build("tvf_io_types", IO_TYPES, IO_FUNCTIONS)
    assert mod.functions == {
        "square": "x: int32",
        "reciprocal": "x: float32",
        "negate": "x: bool",
        "uppercase_first": "s: str",
        "weighted_sum": "count: int32, weight: float32",
        "repeat_string": "s: str, times: int32",
        "format_data": "flag: bool, count: int32, value: float32, label: str",
        "double_tensor": "input: any[...] out, output: any[...] out",
    }
    assert mod.square(5) == 25
    assert abs(mod.reciprocal(2.0) - 0.5) < 0.001
    assert mod.negate(True) is False
    assert mod.negate(False) is True
    assert mod.uppercase_first("hello") == "Hello"
    assert abs(mod.weighted_sum(10, 2.5) - 25.0) < 0.001
    assert mod.repeat_string("ab", 3) == "ababab"
    result = mod.format_data(True, 42, 3.14, "test")
    assert "test:" in result and "flag=true" in result and "count=42" in result and "value=3.14" in result
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    y = np.empty_like(x)
    mod.double_tensor(x, y)
    np.testing.assert_allclose(y, x * 2.0)
    schemas = {fn: schema_of(mod, fn) for fn in IO_FUNCTIONS}
    assert schemas == {
        "square": "Callable[[int], int]",
        "reciprocal": "Callable[[float], float]",
        "negate": "Callable[[bool], bool]",
        "uppercase_first": "Callable[[str], str]",
        "weighted_sum": "Callable[[int, float], float]",
        "repeat_string": "Callable[[str, int], str]",
        "format_data": "Callable[[bool, int, float, str], str]",
        "double_tensor": "Callable[[Tensor, Tensor], None]",
    }
    del result, x, y, mod
    gc.collect()


def test_metadata_carries_kjit_signature_and_doc():
    mod = build("tvf_docs", DOCS, ["add", "subtract", "divide"])
    assert mod.add(10, 5) == 15
    assert mod.subtract(10, 5) == 5
    assert abs(mod.divide(10.0, 2.0) - 5.0) < 0.001
    meta = mod.ffi_module.get_function_metadata("add")
    assert set(meta) == {"type_schema", "kjit_signature", "kjit_device", "doc"}
    assert meta["kjit_signature"] == "a: int32, b: int32"
    assert meta["kjit_device"] == "none"  # what the stub checks: kjit.load holds the manifest against both
    doc = "add(a: int32, b: int32)\n\nArguments are checked by kjit before the kernel runs."
    assert meta["doc"] == doc
    assert mod.get_function_doc("add") == doc
    assert mod.ffi_module.get_function_doc("add") == doc
    assert schema_of(mod, "divide") == "Callable[[float, float], float]"
    with pytest.raises(RuntimeError) as err:
        mod.divide(1.0, 0.0)
    assert str(err.value) == "divide: Check failed: (b != 0.0f) is false: Division by zero"


def test_simple_add_infers_and_checks_its_ints():
    mod = build("tvf_simple_add", SIMPLE_ADD, ["simple_add"])
    assert mod.simple_add(10, 20) == 30
    assert schema_of(mod, "simple_add") == "Callable[[int, int], int]"
    with pytest.raises(ValueError) as err:
        mod.simple_add(2**40, 1)
    assert str(err.value) == "simple_add: argument #0 'a': 1099511627776 is out of range for int32 [-2147483648, 2147483647]"


# ---- str and bytes without tvm-ffi, and what kjit checks of them ----

TEXT_SRC = r"""
#include <string>
#include <string_view>
std::string greet(const std::string& name, std::string_view punct) { return "hi " + name + std::string(punct); }
int64_t count_bytes(std::string data) { return static_cast<int64_t>(data.size()); }
"""


def test_str_and_bytes_without_tvm_ffi():
    mod = build("tvf_text", TEXT_SRC, {"greet": "name: str, punct: str", "count_bytes": "data: bytes"})
    assert "tvm/ffi/function.h" not in mod.get_host_source()
    assert mod.greet("kjit", "!") == "hi kjit!"
    assert mod.greet("a longer name than seven bytes", "?") == "hi a longer name than seven bytes?"
    assert mod.count_bytes(b"\x00\x01\x02") == 3
    assert mod.count_bytes(b"x" * 100) == 100
    assert schema_of(mod, "greet") == "Callable[[str, str], str]"
    assert schema_of(mod, "count_bytes") == "Callable[[bytes], int]"


def test_str_and_bytes_are_inferred():
    assert kjit.resolve(TEXT_SRC, ["greet", "count_bytes"]) == {"greet": "name: str, punct: str", "count_bytes": "data: str"}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.greet(3, "!"), "greet: argument #0 'name': expected a str (str), got int 3"),
        (lambda m: m.greet("a", b"!"), "greet: argument #1 'punct': expected a str (str), got bytes"),
        (lambda m: m.count_bytes("abc"), "count_bytes: argument #0 'data': expected bytes (bytes), got a string"),
    ],
)
def test_str_and_bytes_kind_errors(call, message):
    mod = build("tvf_text", TEXT_SRC, {"greet": "name: str, punct: str", "count_bytes": "data: bytes"})
    with pytest.raises(TypeError) as err:
        call(mod)
    assert str(err.value) == message


def test_tvm_ffi_headers_only_when_the_sources_use_tvm_ffi():
    plain = build("tvf_plain", "int twice(int a) { return 2 * a; }", ["twice"])
    assert "#include <tvm/ffi/function.h>" not in plain.get_host_source()
    uses = build("tvf_docs", DOCS, ["add", "subtract", "divide"])
    assert "#include <tvm/ffi/function.h>" in uses.get_host_source()


def test_str_parameters_cannot_cross_xla():
    pytest.importorskip("jax")
    with pytest.raises(kjit.SpecError) as err:
        build("tvf_text_jax", TEXT_SRC, {"greet": "name: str, punct: str"}, jax=True)
    assert str(err.value) == (
        "function 'greet': parameter 'name' is str, which kjit's XLA FFI handlers do not pass (numeric attrs only); "
        "load it without jax=True"
    )
