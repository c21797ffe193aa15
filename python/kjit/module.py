"""``load_inline`` and ``Module``: a thin layer over the kjit.load_inline global function."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import types
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _pairing
from . import function as _function
from ._lib import api
from .spec import Spec



class FrontEndFunctions:
    """A module's functions in one front end (``mod.torch``, ``mod.jax``): ``ns.fn``
    is a plain instance attribute (torch.compile reads it like any); the functions the
    front end cannot express are in ``skipped``, with the reason their attribute's
    AttributeError gives."""

    #: "kjit.torch", "kjit.jax": how messages start
    _front_end = "kjit"
    #: what the attribute is not, when skipped: "is not a torch op"
    _skipped_text = "is skipped"
    #: what the front end calls its functions: "op", "function"
    _noun = "function"

    def __init__(self) -> None:
        self._items: Dict[str, object] = {}
        self._skipped: Dict[str, str] = {}

    def _add(self, name: str, item) -> None:
        self._items[name] = item
        if not hasattr(type(self), name):
            self.__dict__[name] = item

    def _skip(self, name: str, why: str) -> None:
        self._skipped[name] = why

    def __getattr__(self, name: str):
        items = self.__dict__.get("_items", {})
        if name in items:
            return items[name]
        skipped = self.__dict__.get("_skipped", {})
        if name in skipped:
            raise AttributeError(f"{self._front_end}: '{name}' {self._skipped_text}: {skipped[name]}")
        raise AttributeError(f"{self._front_end}: no {self._noun} '{name}' ({self._noun}s: {', '.join(items) or 'none'})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._items))

    @property
    def skipped(self) -> Dict[str, str]:
        """{function: why the front end has none of it}."""
        return dict(self._skipped)


class _FrontEnd:
    """``mod.torch`` (kjit.torch.register(mod)) and ``mod.jax`` (kjit.jax.functions(mod)):
    made on first use, then a plain instance attribute (which torch.compile reads
    like any other; it cannot trace the registration itself)."""

    def __init__(self, module: str, maker: str) -> None:
        self.module, self.maker = module, maker

    def __get__(self, mod, owner=None):
        if mod is None:
            return self
        import importlib  # noqa: PLC0415 (kjit.torch and kjit.jax import torch and jax)

        made = getattr(importlib.import_module(f"kjit.{self.module}"), self.maker)(mod)
        mod.__dict__[self.module] = made
        return made


class Module:
    """A loaded kjit module.

    ``mod.fn`` and ``mod["fn"]`` are tvm-ffi functions: call them with NumPy arrays,
    PyTorch tensors, any DLPack object or ``tvm_ffi.Tensor``, and Python or NumPy
    scalars. Each call runs the generated checks before the kernel.
    """

    def __init__(self, res, options: dict):
        """``res``: the fields the C++ kjit.load_inline returns (objects and long texts,
        and the short plain fields as one JSON "record"); ``options``: what it took."""
        record = json.loads(str(res["record"]))
        functions = record["functions"]
        names = [f["name"] for f in functions]
        self.name: str = record["name"]
        self.path: str = record["path"]
        self.ffi_module = res["module"]
        #: function name -> canonical signature string (docs/spec.md)
        self.functions: Dict[str, str] = {n: f["signature"] for n, f in zip(names, functions)}
        #: function name -> arg_spec tokens (arg, ret, attr.<name>:<type>, stream)
        self.arg_specs: Dict[str, List[str]] = {n: f["arg_spec"] for n, f in zip(names, functions)}
        #: function name -> device kind of its tensors ("cpu", "cuda", or "none")
        self.devices: Dict[str, str] = {n: f["device"] for n, f in zip(names, functions)}
        self.source: str = str(res["source"])
        self.cache_hit: bool = record["cache_hit"]
        #: content hash of the build (same sources, specs, flags and compiler: same key)
        self.key: str = record["key"]
        #: whether the library also has XLA FFI handlers (load_inline(jax=True))
        self.has_xla_handlers: bool = record["has_xla_handlers"]
        self._options = options
        self._pairings: Dict[str, _pairing.Pairing] = {}
        self._stubs = {n: str(s) for n, s in zip(names, res["stubs"])}
        #: function name -> the tvm_ffi.Function of its stub (positional arguments only)
        self.ffi_functions = dict(zip(names, res["functions"]))
        models = dict(zip(names, res["models"]))
        direct_abi = not record["tvm_ffi_bridge"]
        self._fns = {n: _function.make_function(self.name, f, self.ffi_functions[n], models[n], direct_abi)
                     for n, f in zip(names, functions)}
        for fn_name, fn in self._fns.items():
            # Plain instance attributes, and no __getattr__ on the class: that keeps
            # mod.fn on CPython's fast attribute path (~15 ns a call). A name the
            # Module itself uses (its methods and fields, any private name) stays
            # mod["name"] only, so no function can shadow the module's own state.
            if not (fn_name.startswith("_") or hasattr(Module, fn_name) or fn_name in self.__dict__):
                self.__dict__[fn_name] = fn
        # Pairs declared in the sources (// @kjit f(...) backward=g), kept in the
        # library's manifest too: the module's pairing starts from them.
        declared = {f["name"]: f["backward"] for f in functions if f.get("backward")}
        if declared:
            self._add_pairings(self._new_pairings(declared, "// @kjit ... backward="))

    torch = _FrontEnd("torch", "register")
    jax = _FrontEnd("jax", "functions")

    @property
    def backward(self) -> Mapping[str, str]:
        """{forward function: the function computing its gradients}, read-only: the
        module's one gradient pairing, which ``mod.torch`` (autograd) and ``mod.jax``
        (``jax.custom_vjp``) both use. Set by ``load_inline(..., backward=...)``,
        ``kjit.load(path, backward=...)`` and ``kjit.torch.register(mod, backward=...)``."""
        return types.MappingProxyType({fwd: p.backward for fwd, p in self._pairings.items()})

    def _new_pairings(self, backward, where: str) -> Dict[str, "_pairing.Pairing"]:
        """The pairs of ``backward=`` checked against this module and its pairing
        (TypeError/SpecError, nothing changed); add them with _add_pairings."""
        pairs = _pairing.pairings(self, backward, where)
        _pairing.conflicts(self._pairings, pairs, where)
        return pairs

    def _add_pairings(self, pairs: Mapping[str, "_pairing.Pairing"]) -> None:
        self._pairings.update(pairs)

    def __getitem__(self, fn_name: str):
        try:
            return self._fns[fn_name]
        except KeyError:
            raise KeyError(
                f"module '{self.name}' has no function '{fn_name}' (it has: {', '.join(self._fns)})"
            ) from None

    def __contains__(self, fn_name: str) -> bool:
        return fn_name in self._fns

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._fns))

    def get_host_source(self, fn_name: Optional[str] = None) -> str:
        """The generated host stub of ``fn_name``; with no name, the whole translation unit."""
        if fn_name is None:
            return self.source
        if fn_name not in self._stubs:
            raise KeyError(
                f"module '{self.name}' has no function '{fn_name}' (it has: {', '.join(self._fns)})"
            )
        return self._stubs[fn_name]

    def stub(self, path: Optional[str] = None) -> str:
        """The text of a ``.pyi`` typing this module's functions (``class Module(kjit.Module)``
        with a method per function); written to ``path`` when given."""
        return _function.write_stub(self.name, self._fns, path)

    def get_function_metadata(self, fn_name: str) -> Optional[dict]:
        """tvm-ffi's metadata of ``fn_name``: ``type_schema`` (as TVM_FFI_DLL_EXPORT_TYPED_FUNC
        exports it), ``kjit_signature`` (the canonical signature) and ``doc``."""
        return self.ffi_module.get_function_metadata(fn_name)

    def get_function_doc(self, fn_name: str) -> Optional[str]:
        """The doc tvm-ffi reads for ``fn_name`` (its canonical signature)."""
        return self.ffi_module.get_function_doc(fn_name)

    def __repr__(self) -> str:
        fns = ", ".join(f"{k}({v})" for k, v in self.functions.items())
        return f"<kjit.Module {self.name} [{fns}] at {self.path}>"


def _string_list(value, what: str) -> list:
    if isinstance(value, str):
        return [value]
    if isinstance(value, os.PathLike):
        return [os.fspath(value)]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what} must be a str or a list of str, got {type(value).__name__}") from None
    for i, item in enumerate(items):
        if isinstance(item, os.PathLike):
            items[i] = os.fspath(item)
        elif not isinstance(item, str):
            raise TypeError(f"{what}[{i}] must be a str, got {type(item).__name__}")
    return items


_FUNCTIONS_FORMS = (
    "functions must be a dict {name: signature string, kjit.Spec, list of arg_spec tokens or None}, "
    "a list of function names (specs inferred from the C++ definitions), or None (read // @kjit annotations)"
)


def _declarations(functions) -> list:
    """The declarations as named fields for the C++ side: {"name", "origin", "form"}
    with "signature" or "tokens" (see to_decl in global_functions.cc)."""
    if functions is None:
        return []
    if isinstance(functions, str):
        raise TypeError(f"{_FUNCTIONS_FORMS}; got the str {functions!r} (did you mean [{functions!r}]?)")
    if isinstance(functions, Mapping):
        return [_declaration(fn_name, decl) for fn_name, decl in functions.items()]
    try:
        names = list(functions)
    except TypeError:
        raise TypeError(f"{_FUNCTIONS_FORMS}; got {type(functions).__name__}") from None
    decls = []
    for i, fn_name in enumerate(names):
        if not isinstance(fn_name, str):
            raise TypeError(f"functions[{i}] must be a function name (str), got {type(fn_name).__name__}")
        decls.append({"name": fn_name, "origin": f"functions[{i}]", "form": "infer"})
    return decls


def _declaration(fn_name, decl) -> dict:
    if not isinstance(fn_name, str):
        raise TypeError(f"functions: a function name must be a str, got {type(fn_name).__name__}")
    origin = f"functions['{fn_name}']"
    if decl is None:
        return {"name": fn_name, "origin": origin, "form": "infer"}
    if isinstance(decl, Spec):
        return {"name": fn_name, "origin": origin, "form": "signature", "signature": decl.signature(fn_name)}
    if isinstance(decl, str):
        return {"name": fn_name, "origin": origin, "form": "signature", "signature": decl}
    if isinstance(decl, (list, tuple)):
        for i, tok in enumerate(decl):
            if not isinstance(tok, str):
                raise TypeError(f"{origin}[{i}] must be an arg_spec token (str), got {type(tok).__name__}")
        return {"name": fn_name, "origin": origin, "form": "tokens", "tokens": list(decl)}
    raise TypeError(
        f"{origin} must be a signature string, a kjit.Spec, a list of arg_spec tokens or None (inferred from the "
        f"C++ definition), got {type(decl).__name__}"
    )


def resolve(cpp_sources: Union[str, Sequence[str]] = (), functions=None, *,
            cuda_sources: Union[str, Sequence[str]] = ()) -> Dict[str, str]:
    """What kjit reads off the declarations without compiling: {name: signature}.

    ``functions`` takes every form ``load_inline`` takes. Raises SpecError.
    """
    return {str(f["name"]): str(f["signature"]) for f in _resolved(cpp_sources, functions, cuda_sources)}


def resolve_arg_specs(cpp_sources: Union[str, Sequence[str]] = (), functions=None, *,
                      cuda_sources: Union[str, Sequence[str]] = ()) -> Dict[str, List[str]]:
    """The canonical arg_spec tokens of each declared function, without compiling:
    {name: ["arg", "ret", "attr.alpha:float32", "stream"]}, in declaration order
    (brainevent's ``parse_annotations`` form). Raises SpecError."""
    return {str(f["name"]): [str(t) for t in f["arg_spec"]] for f in _resolved(cpp_sources, functions, cuda_sources)}


def _resolved(cpp_sources, functions, cuda_sources):
    return api.resolve_functions({
        "cpp_sources": _string_list(cpp_sources, "cpp_sources"),
        "functions": _declarations(functions),
        "cuda_sources": _string_list(cuda_sources, "cuda_sources"),
    })


def normalize_arg_spec(tokens: Sequence[str], *, name: str = "fn") -> List[str]:
    """brainevent/kernix tokens in canonical form (``args`` -> ``arg``, ``attrs.x`` ->
    ``attr.x``, ...); raises SpecError on an invalid list."""
    toks = _string_list(tokens, "tokens")
    return [str(t) for t in api.normalize_arg_spec(name, toks)]


def load_inline(
    name: str,
    *,
    cpp_sources: Union[str, Sequence[str]] = (),
    cuda_sources: Union[str, Sequence[str]] = (),
    sources: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]] = (),
    functions: Union[None, Mapping[str, Union[str, Spec, Sequence[str]]], Sequence[str]] = None,
    extra_cflags: Iterable[str] = (),
    extra_cuda_cflags: Iterable[str] = (),
    cuda_arch: Union[None, str, Sequence[str]] = None,
    extra_ldflags: Iterable[str] = (),
    extra_include_paths: Iterable[str] = (),
    build_directory: Optional[str] = None,
    verbose: bool = False,
    force_rebuild: bool = False,
    jax: bool = False,
    torch: Union[bool, Mapping[str, object]] = False,
    relocatable: bool = False,
    backward: Optional[Mapping[str, str]] = None,
    isa: Optional[str] = None,
) -> Module:
    """Compiles C++ kernels with generated, checked host stubs and loads them.

    ``functions`` declares the exported functions, in any of these forms:

    - ``{"f": "x: float32[n], y: float32[n] out"}``: signature strings (docs/spec.md)
      or ``kjit.Spec`` builders;
    - ``{"f": ["arg", "ret", "attr.scale", "stream"]}``: brainevent arg_spec tokens;
    - ``["f", "g"]``: names only, specs inferred from the C++ definitions (as a
      ``None`` value in the dict: ``{"f": "...", "g": None}``);
    - ``None``: read ``// @kjit NAME ...`` (or ``// @BE NAME ...``) lines in the sources.

    The build is cached by content under ``build_directory`` (default: KJIT_CACHE_DIR
    or ~/.cache/kjit); ``force_rebuild`` compiles anyway and replaces the cached module.
    ``jax=True`` also compiles an XLA FFI handler per function, for ``mod.jax``
    (docs/jax.md); ``torch=True`` registers every function as a torch op,
    ``mod.torch`` (docs/torch.md); ``torch={"backward": {...}, "namespace": ...}``
    registers with those options of ``kjit.torch.register``.

    ``backward={"fn": "fn_backward"}`` pairs functions with the functions of the
    module that compute their gradients (``mod.backward``): ``mod.torch`` makes the
    pair its autograd formula, ``mod.jax`` a ``jax.custom_vjp`` (docs/torch.md
    "Autograd", docs/jax.md "Gradients").

    ``cuda_sources`` hold device code, compiled by nvcc (side by side with the host
    compiler) into the same module; functions defined there take ``@cuda`` tensors
    by default, initialise CUDA on their first call, and run with the tensors'
    device current (restored after). ``cuda_arch`` ("sm_80,sm_90,compute_90" or
    "8.0;9.0+PTX") overrides KJIT_CUDA_ARCH and the default (docs/cuda.md).

    ``sources`` are files, as torch's ``load`` takes: C++ files join ``cpp_sources``
    and ``.cu``/``.cuh`` files ``cuda_sources``; each file's folder goes on the
    include path, its text into the cache key, and messages and compiler errors
    name it by its path.

    ``relocatable=True`` links without a RUNPATH into this machine's tvm-ffi (the
    library then finds libtvm_ffi already loaded, as tvm-ffi's packaged libraries
    do): what ``kjit.build`` ships.

    ``isa`` is the instruction set to compile for: ``"native"`` (this CPU's, at
    -O3; the default, and the level the elementwise loops use), ``"baseline"`` (any
    x86-64, the default of a relocatable build), ``"x86-64-v3"`` (AVX2, FMA) or
    ``"x86-64-v4"`` (AVX-512). ``kjit.load`` refuses a library built for a level its
    CPU lacks, by name, instead of stopping at an instruction (SIGILL).

    Raises SpecError, CompileError (with ``.command`` and ``.log``), ToolchainError
    or CacheError.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    _pairing.checked_form(backward, "kjit.load_inline")  # before the compile: a typo costs no build
    # Named fields of the C++ kjit.load_inline (load_inline_entry in global_functions.cc).
    options = {
        "name": name,
        "cpp_sources": _string_list(cpp_sources, "cpp_sources"),
        "functions": _declarations(functions),
        "extra_cflags": _string_list(extra_cflags, "extra_cflags"),
        "extra_ldflags": _string_list(extra_ldflags, "extra_ldflags"),
        "extra_include_paths": _string_list(extra_include_paths, "extra_include_paths"),
        "build_directory": "" if build_directory is None else _path_text(build_directory, "build_directory"),
        "verbose": bool(verbose),
        "cuda_sources": _string_list(cuda_sources, "cuda_sources"),
        "extra_cuda_cflags": _string_list(extra_cuda_cflags, "extra_cuda_cflags"),
        "cuda_arch": _cuda_arch_text(cuda_arch),
        "relocatable": bool(relocatable),
        "isa": "" if isa is None else _isa_text(isa),
    }
    _read_source_files(sources, options)
    _add_brainevent_headers(options)
    mod = _load(options, force_rebuild=bool(force_rebuild), xla_include_dir=_xla_include_dir() if jax else "")
    mod._add_pairings(mod._new_pairings(backward, "kjit.load_inline"))
    _register_torch(mod, torch)
    return mod


def _register_torch(mod: Module, option) -> None:
    """load_inline's ``torch=``: True registers the ops now (``mod.torch``), a dict
    passes ``backward=`` and ``namespace=`` to kjit.torch.register."""
    if option is False or option is None:
        return
    if option is True:
        mod.torch  # noqa: B018 (registers the ops now, not on first use)
        return
    if not isinstance(option, Mapping):
        raise TypeError(f"load_inline(torch=...) takes True, False or a dict of kjit.torch.register's options "
                        f"({{'backward': {{...}}, 'namespace': ...}}), got {type(option).__name__}")
    unknown = sorted(set(option) - {"backward", "namespace"})
    if unknown:
        raise TypeError(f"load_inline(torch=...): unknown option {unknown[0]!r} (kjit.torch.register takes "
                        "'backward' and 'namespace')")
    import importlib  # noqa: PLC0415 (kjit.torch imports torch)

    importlib.import_module("kjit.torch").register(mod, **option)


def _read_source_files(sources, options: dict) -> None:
    """Adds the files of ``sources`` to ``options``: their texts after the inline
    sources of their kind, their paths as those sources' names, their folders on
    the include path."""
    paths = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    if not paths:
        return
    for kind in ("cpp", "cuda"):
        options[f"{kind}_source_files"] = [""] * len(options[f"{kind}_sources"])
    for p in paths:
        path = os.path.abspath(_path_text(p, "sources"))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"kjit.load_inline: no source file {path!r} (sources= takes file paths; pass "
                                    "source text as cpp_sources=)") from None
        except IsADirectoryError:
            raise ValueError(f"kjit.load_inline: the source {path!r} is a folder; name the files in it") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"kjit.load_inline: the source file {path!r} is not UTF-8 text ({err.reason} at byte "
                             f"{err.start})") from None
        kind = "cuda" if path.endswith((".cu", ".cuh")) else "cpp"
        options[f"{kind}_sources"].append(text)
        options[f"{kind}_source_files"].append(path)
        folder = os.path.dirname(path)
        if folder not in options["extra_include_paths"]:
            options["extra_include_paths"].append(folder)


def build(name: str, *, output, jax: bool = False, **options) -> str:
    """Builds a module ahead of time into ``output`` (a path; its folder must exist)
    and returns that path: a shared library with the same checked ``__tvm_ffi_<fn>``
    entry points as ``load_inline``'s (and XLA handlers with ``jax=True``) that
    carries its specs, so ``kjit.load(output)`` gives back a full ``kjit.Module``
    where no compiler and no source are, and ``tvm_ffi.load_module(output)`` loads
    it too. It has no RUNPATH into this machine's tvm-ffi: the process that loads
    it imports tvm_ffi (kjit does) or links libtvm_ffi. ``options`` are
    ``load_inline``'s (``cpp_sources``, ``cuda_sources``, ``functions``, flags); the
    build goes through the cache like any other (docs/shipping.md). It is compiled
    for any x86-64 unless ``isa`` names a level (``"x86-64-v3"``, ``"x86-64-v4"``,
    ``"native"``), which ``kjit.load`` then requires of the CPU it runs on."""
    if "backward" in options:
        raise TypeError("kjit.build: backward= is not stored in the built library; pass it to kjit.load(path, "
                        "backward=...) where the library is loaded")
    out = _path_text(output, "output")
    if os.path.isdir(out):
        raise ValueError(f"kjit.build: output {out!r} is a folder; name the library file (e.g. {name}.so)")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"kjit.build: the folder of output {out!r} does not exist")
    mod = load_inline(name, jax=jax, relocatable=True, **options)
    # Copied beside the target, then renamed: a reader never sees half a library.
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as dst, open(mod.path, "rb") as src:
            shutil.copyfileobj(src, dst)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def load(path, *, backward: Optional[Mapping[str, str]] = None) -> Module:
    """A module built by ``kjit.build`` (or any kjit library), loaded from ``path``
    with no compiler and no source: its functions, keywords, defaults, returned
    outputs and checks are the built module's, read from the manifest it exports;
    ``mod.jax`` works when it was built with ``jax=True``, ``mod.torch`` always.
    ``get_host_source`` is empty. ``backward=`` pairs functions with their gradients'
    functions, as ``load_inline``'s. Raises FileNotFoundError, and ValueError for a
    library that is not a kjit module."""
    text = _path_text(path, "path")
    _pairing.checked_form(backward, "kjit.load")
    if not os.path.isfile(text):
        raise FileNotFoundError(f"kjit.load: no file {text!r} (kjit.build writes the library there)")
    res = api.load_module(os.path.abspath(text))
    mod = Module(res, {"loaded_from": os.path.abspath(text)})
    mod._add_pairings(mod._new_pairings(backward, "kjit.load"))
    return mod


def brainevent_include_dir() -> str:
    """The include folder of the installed brainevent package, found as brainevent
    finds it (``<package>/include``) without importing it; ``KJIT_BRAINEVENT_INCLUDE``
    overrides it (a folder, or empty for kjit's own compatibility header). "" when
    brainevent is not installed."""
    if "KJIT_BRAINEVENT_INCLUDE" in os.environ:
        return os.environ["KJIT_BRAINEVENT_INCLUDE"]
    import importlib.util  # noqa: PLC0415

    try:
        spec = importlib.util.find_spec("brainevent")
    except (ImportError, ValueError):
        return ""
    if spec is None or spec.origin is None:
        return ""
    folder = os.path.join(os.path.dirname(spec.origin), "include")
    return folder if os.path.isfile(os.path.join(folder, "brainevent", "tensor.h")) else ""


def brainevent_sources() -> list[str]:
    """The CUDA sources (``_*/*.cu``) of the installed brainevent package, sorted,
    as absolute paths; [] when brainevent is not installed. The conformance test
    and ``scripts/brainevent_build_all.py`` load each of them verbatim."""
    include = brainevent_include_dir()
    if not include:
        return []
    root = os.path.dirname(include)
    out = []
    for sub in sorted(os.listdir(root)):
        folder = os.path.join(root, sub)
        if sub.startswith("_") and os.path.isdir(folder):
            out += [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".cu")]
    return out


# brainevent headers and spellings that pull in XLA's FFI headers (jax.ffi.include_dir()).
_NEEDS_XLA_HEADERS = ("xla/ffi/", "brainevent/dtypes.h", "brainevent/ffi_compat.h")


def _add_brainevent_headers(options: dict) -> None:
    """Sources in brainevent's spelling compile against brainevent's installed
    headers, plus XLA's for those that include them (as brainevent's own builds do)."""
    texts = options["cpp_sources"] + options["cuda_sources"]
    if not any("BE::Tensor" in t or "@BE" in t for t in texts):
        return
    folder = brainevent_include_dir()
    options["brainevent_include_dir"] = folder
    if folder and any(marker in t for t in texts for marker in _NEEDS_XLA_HEADERS):
        xla = _xla_include_dir()
        if xla not in options["extra_include_paths"]:
            options["extra_include_paths"] = options["extra_include_paths"] + [xla]


def _path_text(value, what: str) -> str:
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError(f"{what} must be a str or os.PathLike of str, got {type(path).__name__}")
    return path


def _isa_text(isa) -> str:
    if not isinstance(isa, str):
        raise TypeError(f"isa must be a str (native, baseline, x86-64-v3 or x86-64-v4), got {type(isa).__name__}")
    return isa


def _cuda_arch_text(cuda_arch) -> str:
    if cuda_arch is None:
        return ""
    if isinstance(cuda_arch, str):
        return cuda_arch
    return ",".join(_string_list(cuda_arch, "cuda_arch"))


def _xla_include_dir() -> str:
    from ._optional import import_optional  # noqa: PLC0415

    # jax is optional and slow to import: only here, when XLA handlers are asked for.
    return import_optional("jax.ffi", "jax", "load_inline(jax=True)").include_dir()


def _load(options: dict, *, force_rebuild: bool, xla_include_dir: str) -> Module:
    res = api.load_inline({**options, "force_rebuild": force_rebuild, "xla_include_dir": xla_include_dir})
    return Module(res, options)


def with_xla_handlers(mod: Module) -> Module:
    """``mod`` itself if it has XLA FFI handlers, else the same module built with them."""
    if mod.has_xla_handlers:
        return mod
    if "loaded_from" in mod._options:
        raise ValueError(f"module '{mod.name}' ({mod._options['loaded_from']}) was built without XLA handlers; "
                         "build it with kjit.build(..., jax=True) for mod.jax")
    return _load(mod._options, force_rebuild=False, xla_include_dir=_xla_include_dir())
