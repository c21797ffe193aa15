// Everything above the driver section is plain arithmetic on the loop, so the
// tests check it without a GPU; the driver is dlopen-ed so libkjit loads anywhere.
#include "cuda/cuda_launch.h"

#include <dlfcn.h>

#include <algorithm>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cuda/cuda_cache.h"
#include "cuda/nvrtc.h"
#include "iterator/promotion.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"

namespace kjit {
namespace cuda {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

size_t operand_count(const EwKernelTypes& t) { return t.outputs.size() + t.inputs.size(); }

/// The operands' data pointers, outputs first (the kernel's kjit_ptrs).
std::vector<char*> data_of(const detail::LoopLayout& loop) {
  std::vector<char*> out;
  for (const OperandInfo& op : loop.operands) out.push_back(op.data);
  return out;
}

/// TensorIterator::get_dim_to_split, over dims that can still be halved.
int dim_to_split(const detail::LoopLayout& loop) {
  int best = -1;
  int64_t max_extent = -1;
  for (int d = static_cast<int>(loop.shape.size()) - 1; d >= 0; --d) {
    if (loop.shape[d] <= 1) continue;
    for (const OperandInfo& op : loop.operands) {
      int64_t extent = (loop.shape[d] - 1) * std::abs(op.strides[d]);
      if (extent > max_extent) {
        max_extent = extent;
        best = d;
      }
    }
  }
  return best;
}

/// The loop restricted to [begin, begin + size) along dim d.
detail::LoopLayout narrow(const detail::LoopLayout& loop, int d, int64_t begin, int64_t size) {
  detail::LoopLayout out = loop;
  out.shape[d] = size;
  for (OperandInfo& op : out.operands) op.data += begin * op.strides[d];
  return out;
}

void split_into(const detail::LoopLayout& loop, std::vector<detail::LoopLayout>* out) {
  if (fits_32bit_indexing(loop)) {
    out->push_back(loop);
    return;
  }
  int d = dim_to_split(loop);
  internal_check(d >= 0, "a loop too large for 32-bit indexing with no dim to split");
  int64_t first = loop.shape[d] / 2;
  split_into(narrow(loop, d, 0, first), out);
  split_into(narrow(loop, d, first, loop.shape[d] - first), out);
}

uint32_t bits_of(int64_t stride) { return static_cast<uint32_t>(static_cast<int32_t>(stride)); }

template <typename T>
void append(std::vector<unsigned char>* out, T v) {
  size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

/// The real part of a scalar as an integer type: exact for integer scalars.
template <typename I>
I integer_of(const EwOperand& op) {
  if (op.scalar == EwOperand::Scalar::kFloat || op.scalar == EwOperand::Scalar::kComplex) {
    return static_cast<I>(op.real);
  }
  return static_cast<I>(op.int_value);
}

void append_scalar(std::vector<unsigned char>* out, const EwOperand& op, EwType t) {
  const bool floating = op.scalar == EwOperand::Scalar::kFloat || op.scalar == EwOperand::Scalar::kComplex;
  const double re = floating ? op.real : static_cast<double>(op.int_value);
  const double im = op.scalar == EwOperand::Scalar::kComplex ? op.imag : 0.0;
  switch (t) {
    case EwType::kBool:
      return append(out, static_cast<bool>(re != 0 || im != 0));
    case EwType::kInt8:
      return append(out, integer_of<int8_t>(op));
    case EwType::kInt16:
      return append(out, integer_of<int16_t>(op));
    case EwType::kInt32:
      return append(out, integer_of<int32_t>(op));
    case EwType::kInt64:
      return append(out, integer_of<int64_t>(op));
    case EwType::kUInt8:
      return append(out, integer_of<uint8_t>(op));
    case EwType::kUInt16:
      return append(out, integer_of<uint16_t>(op));
    case EwType::kUInt32:
      return append(out, integer_of<uint32_t>(op));
    case EwType::kUInt64:
      return append(out, integer_of<uint64_t>(op));
    case EwType::kFloat32:
      return append(out, static_cast<float>(re));
    case EwType::kFloat64:
      return append(out, re);
    case EwType::kComplex64:
      return append(out, std::complex<float>(static_cast<float>(re), static_cast<float>(im)));
    case EwType::kComplex128:
      return append(out, std::complex<double>(re, im));
    default:
      internal_check(false, "float16/bfloat16 as a CUDA compute type");
  }
}

}  // namespace

CudaGeometry cuda_geometry(int64_t n, int work_per_thread) {
  internal_check(n >= 0 && n <= kInt32Max, "a CUDA launch beyond 32-bit indexing (split the loop first)");
  internal_check(work_per_thread > 0, "a CUDA launch with no work per thread");
  CudaGeometry g;
  g.work = work_per_thread;
  const int64_t block_work = static_cast<int64_t>(g.block) * work_per_thread;
  g.grid = static_cast<uint32_t>((n + block_work - 1) / block_work);
  return g;
}

int cuda_vector_width(const std::vector<char*>& data, int element_size) {
  for (int vec : {4, 2}) {
    if (!ew_cuda_vec_width_allowed(vec, element_size)) continue;
    const uintptr_t bytes = static_cast<uintptr_t>(vec) * element_size;
    bool aligned =
        std::all_of(data.begin(), data.end(), [&](char* p) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; });
    if (aligned) return vec;
  }
  return 1;
}

bool fits_32bit_indexing(const detail::LoopLayout& loop) {
  if (loop.numel() > kInt32Max) return false;
  for (const OperandInfo& op : loop.operands) {
    int64_t max_offset = 1;
    for (size_t d = 0; d < loop.shape.size(); ++d) max_offset += (loop.shape[d] - 1) * std::abs(op.strides[d]);
    if (max_offset > kInt32Max) return false;
  }
  return true;
}

std::vector<detail::LoopLayout> split_for_32bit_indexing(const detail::LoopLayout& loop) {
  std::vector<detail::LoopLayout> out;
  if (loop.numel() > 0) split_into(loop, &out);
  return out;
}

bool is_contiguous_loop(const detail::LoopLayout& loop, const EwKernelTypes& types) {
  if (loop.numel() <= 1) return true;
  if (loop.shape.size() != 1) return false;
  const size_t n_out = types.outputs.size();
  for (size_t op = 0; op < loop.operands.size(); ++op) {
    if (op >= n_out && ew_cuda_by_value(types, op - n_out)) continue;
    if (loop.operands[op].strides[0] != ew_cuda_operand_size(types, op)) return false;
  }
  return true;
}

EwCudaVariant choose_cuda_variant(const detail::LoopLayout& loop, const EwKernelTypes& types) {
  const bool contiguous = is_contiguous_loop(loop, types);
  if (ew_cuda_needs_cast(types)) return contiguous ? EwCudaVariant::kCastContiguous : EwCudaVariant::kCastStrided;
  return contiguous ? EwCudaVariant::kVectorized : EwCudaVariant::kStrided;
}

CudaDivider CudaDivider::of(uint32_t divisor) {
  internal_check(divisor >= 1 && divisor <= static_cast<uint32_t>(kInt32Max), "a CUDA divider outside [1, 2^31)");
  CudaDivider d;
  d.divisor = divisor;
  while ((uint64_t{1} << d.shift) < divisor) ++d.shift;
  d.magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << d.shift) - divisor)) / divisor + 1);
  return d;
}

uint32_t CudaDivider::div(uint32_t n) const {
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
  return (hi + n) >> shift;
}

std::vector<uint32_t> pack_offsets(const detail::LoopLayout& loop) {
  internal_check(fits_32bit_indexing(loop), "packing offsets of a loop beyond 32-bit indexing");
  std::vector<size_t> dims;
  for (size_t d = 0; d < loop.shape.size(); ++d) {
    if (loop.shape[d] != 1) dims.push_back(d);
  }
  if (dims.size() > static_cast<size_t>(kEwCudaMaxDims)) {
    throw NotImplementedError("kjit.elementwise: the CUDA kernels handle up to " + std::to_string(kEwCudaMaxDims) +
                              " dims after coalescing; this loop has " + std::to_string(dims.size()));
  }
  const size_t n_ops = loop.operands.size();
  std::vector<uint32_t> words(ew_cuda_offsets_bytes(n_ops) / 4, 0);
  words[0] = static_cast<uint32_t>(dims.size());
  for (int k = 0; k < kEwCudaMaxDims; ++k) {
    CudaDivider div = static_cast<size_t>(k) < dims.size() ? CudaDivider::of(static_cast<uint32_t>(loop.shape[dims[k]]))
                                                           : CudaDivider::of(1);
    words[1 + 3 * k] = div.divisor;
    words[2 + 3 * k] = div.magic;
    words[3 + 3 * k] = div.shift;
  }
  const size_t strides_at = 1 + 3 * kEwCudaMaxDims;
  for (size_t k = 0; k < dims.size(); ++k) {
    for (size_t op = 0; op < n_ops; ++op)
      words[strides_at + k * n_ops + op] = bits_of(loop.operands[op].strides[dims[k]]);
  }
  return words;
}

std::vector<unsigned char> pack_extra(const std::vector<EwOperand>& extra, const EwKernelTypes& types) {
  internal_check(extra.size() == types.extra.size(), "extra scalars that do not match the kernel");
  std::vector<unsigned char> out;
  for (size_t e = 0; e < extra.size(); ++e) {
    if (extra[e].tensor != nullptr || extra[e].scalar == EwOperand::Scalar::kNone) {
      throw TypeError("kjit.elementwise: extra argument #" + std::to_string(e) + " must be a scalar");
    }
    const size_t at = out.size();
    append_scalar(&out, extra[e], types.extra[e]);
    out.resize(at + kEwExtraSlotBytes, 0);
  }
  return out;
}

std::vector<unsigned char> pack_scalars(const EwKernelTypes& types, const std::vector<const void*>& values) {
  internal_check(values.size() == types.inputs.size(), "scalar values that do not match the kernel's inputs");
  const std::vector<size_t> layout = ew_cuda_scalars_layout(types);
  std::vector<unsigned char> out(layout.back(), 0);
  for (size_t i = 0; i < types.inputs.size(); ++i) {
    if (!ew_cuda_by_value(types, i)) continue;
    internal_check(values[i] != nullptr, "a by-value input without a value");
    std::memcpy(out.data() + layout[i], values[i], iterator::size_of(types.inputs[i]));
  }
  return out;
}

std::vector<void*> CudaKernelArgs::pointers() {
  std::vector<void*> p = {&n, data.data()};
  if (!offsets.empty()) p.push_back(offsets.data());
  if (!scalars.empty()) p.push_back(scalars.data());
  if (!extra.empty()) p.push_back(extra.data());
  return p;
}

CudaKernelArgs pack_cuda_args(const detail::LoopLayout& loop, EwCudaVariant variant, std::vector<unsigned char> extra,
                              std::vector<unsigned char> scalars) {
  internal_check(fits_32bit_indexing(loop), "packing CUDA arguments of a loop beyond 32-bit indexing");
  CudaKernelArgs a;
  a.n = static_cast<int32_t>(loop.numel());
  a.data = data_of(loop);
  if (variant == EwCudaVariant::kStrided || variant == EwCudaVariant::kCastStrided) a.offsets = pack_offsets(loop);
  a.scalars = std::move(scalars);
  a.extra = std::move(extra);
  return a;
}

void check_cuda_alignment(const detail::LoopLayout& loop, const EwKernelTypes& types) {
  for (size_t op = 0; op < loop.operands.size(); ++op) {
    const int64_t size = ew_cuda_operand_size(types, op);
    bool ok = reinterpret_cast<uintptr_t>(loop.operands[op].data) % size == 0;
    for (size_t d = 0; d < loop.shape.size(); ++d)
      ok = ok && (loop.shape[d] <= 1 || loop.operands[op].strides[d] % size == 0);
    if (!ok) {
      throw ValueError("kjit.elementwise: CUDA operand #" + std::to_string(op) +
                       " (outputs first) is not aligned to its " + std::to_string(size) +
                       "-byte elements (data pointer or byte strides); CUDA kernels need "
                       "aligned tensors");
    }
  }
}

std::vector<CudaLaunch> plan_cuda_launches(const detail::LoopLayout& loop, const EwKernelTypes& types,
                                           const std::vector<unsigned char>& extra,
                                           const std::vector<unsigned char>& scalars) {
  internal_check(loop.operands.size() == operand_count(types),
                 "a CUDA loop whose operands do not match the kernel's types");
  internal_check(extra.size() == types.extra.size() * kEwExtraSlotBytes, "extra scalars that do not match the kernel");
  internal_check(scalars.size() == (types.by_value.empty() ? 0 : ew_cuda_scalars_layout(types).back()),
                 "by-value inputs that do not match the kernel");
  check_cuda_alignment(loop, types);
  std::vector<CudaLaunch> launches;
  for (const detail::LoopLayout& sub : split_for_32bit_indexing(loop)) {
    CudaLaunch l;
    l.variant = choose_cuda_variant(sub, types);
    if (l.variant == EwCudaVariant::kVectorized)
      l.vec = cuda_vector_width(data_of(sub), ew_cuda_max_operand_size(types));
    l.args = pack_cuda_args(sub, l.variant, extra, scalars);
    l.geometry = cuda_geometry(l.args.n, ew_cuda_work_per_thread(types));
    launches.push_back(std::move(l));
  }
  return launches;
}

std::string nvrtc_arch_for(int cc, const std::vector<int>& supported) {
  if (supported.empty() || std::find(supported.begin(), supported.end(), cc) != supported.end()) {
    return "sm_" + std::to_string(cc);
  }
  int below = -1;
  for (int s : supported) {
    if (s < cc) below = std::max(below, s);
  }
  if (below < 0) {
    throw RuntimeError("kjit.elementwise: this NVRTC cannot compile for sm_" + std::to_string(cc) +
                       " (its oldest architecture is sm_" +
                       std::to_string(*std::min_element(supported.begin(), supported.end())) + ")");
  }
  return "compute_" + std::to_string(below);
}

// ---------------------------------------------------------------------------
// The CUDA driver API.

namespace {

constexpr const char* kNoDriver = "kjit: CUDA driver not available: ";

template <typename Fn>
void resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
}

std::string error_text(const CudaDriver& d, int rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.error_name != nullptr) d.error_name(rc, &name);
  if (d.error_string != nullptr) d.error_string(rc, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(rc)) + " (" + (text ? text : "no description") + ")";
}

void resolve_all(void* lib, CudaDriver* d, std::string* missing) {
  resolve(lib, "cuInit", &d->init, missing);
  resolve(lib, "cuDeviceGet", &d->device_get, missing);
  resolve(lib, "cuDeviceGetAttribute", &d->device_attribute, missing);
  resolve(lib, "cuCtxGetCurrent", &d->ctx_get_current, missing);
  resolve(lib, "cuCtxSetCurrent", &d->ctx_set_current, missing);
  resolve(lib, "cuCtxGetDevice", &d->ctx_get_device, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", &d->primary_ctx_retain, missing);
  resolve(lib, "cuModuleLoadData", &d->module_load_data, missing);
  resolve(lib, "cuModuleGetFunction", &d->module_get_function, missing);
  resolve(lib, "cuLaunchKernel", &d->launch_kernel, missing);
  resolve(lib, "cuGetErrorName", &d->error_name, missing);
  resolve(lib, "cuGetErrorString", &d->error_string, missing);
}

CudaDriver load_driver() {
  CudaDriver d;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    d.error = std::string(kNoDriver) + "libcuda.so.1 could not be loaded (" + (why ? why : "no reason given") +
              "); running on CUDA tensors needs an NVIDIA driver";
    return d;
  }
  std::string missing;
  resolve_all(lib, &d, &missing);
  if (!missing.empty()) {
    d.error = std::string(kNoDriver) + "libcuda.so.1 lacks " + missing + "; update the NVIDIA driver";
    return d;
  }
  if (int rc = d.init(0)) d.error = std::string(kNoDriver) + "cuInit failed: " + error_text(d, rc);
  return d;  // libcuda stays loaded for the process
}

void check(const CudaDriver& d, int rc, const char* what) {
  if (rc != 0) throw RuntimeError(std::string("kjit: ") + what + " failed: " + error_text(d, rc));
}

/// The device's primary context, retained once per process (as the runtime does).
void* primary_context(const CudaDriver& d, int device) {
  static std::mutex mu;
  static std::map<int, void*> retained;
  std::lock_guard<std::mutex> lock(mu);
  void*& ctx = retained[device];
  if (ctx == nullptr) {
    int handle = 0;
    check(d, d.device_get(&handle, device), "cuDeviceGet");
    check(d, d.primary_ctx_retain(&ctx, handle), "cuDevicePrimaryCtxRetain");
  }
  return ctx;
}

}  // namespace

const CudaDriver& cuda_driver() {
  static const CudaDriver d = load_driver();
  if (!d.error.empty()) throw RuntimeError(d.error);
  return d;
}

CudaContextGuard::CudaContextGuard(int device) : d_(cuda_driver()) {
  check(d_, d_.ctx_get_current(&previous_), "cuCtxGetCurrent");
  int current = -1;
  if (previous_ != nullptr && d_.ctx_get_device(&current) == 0 && current == device) return;
  check(d_, d_.ctx_set_current(primary_context(d_, device)), "cuCtxSetCurrent");
  restore_ = true;
}

CudaContextGuard::~CudaContextGuard() {
  if (restore_) d_.ctx_set_current(previous_);
}

int cuda_compute_capability(int device) {
  const CudaDriver& d = cuda_driver();
  constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR
  int handle = 0, major = 0, minor = 0;
  check(d, d.device_get(&handle, device), "cuDeviceGet");
  check(d, d.device_attribute(&major, kMajor, handle), "cuDeviceGetAttribute");
  check(d, d.device_attribute(&minor, kMinor, handle), "cuDeviceGetAttribute");
  return major * 10 + minor;
}

void check_cuda(int rc, const char* what) { check(cuda_driver(), rc, what); }

CudaElementwiseKernel::CudaElementwiseKernel(std::string code, std::string entry, EwKernelTypes types,
                                             std::vector<std::string> nvrtc_options)
    : code_(std::move(code)), entry_(std::move(entry)), types_(std::move(types)), options_(std::move(nvrtc_options)) {}

void* CudaElementwiseKernel::function(EwCudaVariant variant, int vec, int cc) {
  const CudaDriver& d = cuda_driver();
  std::lock_guard<std::mutex> lock(mu_);  // one compile per kernel at a time, as PyTorch's jiterator
  void* ctx = nullptr;
  check(d, d.ctx_get_current(&ctx), "cuCtxGetCurrent");
  const std::string name = ew_cuda_kernel_name(variant, vec);
  auto found = functions_.find({ctx, name});
  if (found != functions_.end()) return found->second;
  void*& module = modules_[{ctx, static_cast<int>(variant)}];
  if (module == nullptr) {
    const std::string arch = nvrtc_arch_for(cc, nvrtc_supported_archs());
    const std::pair<int, std::string> key{static_cast<int>(variant), arch};
    auto failed = failed_.find(key);
    if (failed != failed_.end()) throw failed->second;  // a failing call does not recompile
    std::string& image = binaries_[key];
    try {
      if (image.empty()) image = cached_elementwise_cuda(code_, entry_, types_, variant, arch, options_, "").binary;
    } catch (const CompileError& e) {
      failed_.emplace(key, e);
      throw;
    }
    check(d, d.module_load_data(&module, image.c_str()), "cuModuleLoadData");
  }
  void* fn = nullptr;
  check(d, d.module_get_function(&fn, module, name.c_str()), "cuModuleGetFunction");
  return functions_[{ctx, name}] = fn;
}

void launch_elementwise_cuda(CudaElementwiseKernel& kernel, const detail::LoopLayout& loop,
                             const std::vector<EwOperand>& extra, const std::vector<unsigned char>& scalars, int device,
                             void* stream) {
  const CudaDriver& d = cuda_driver();  // first: no driver, no compile
  const EwKernelTypes& t = kernel.types();
  std::vector<CudaLaunch> launches = plan_cuda_launches(loop, t, pack_extra(extra, t), scalars);
  CudaContextGuard guard(device);
  const int cc = cuda_compute_capability(device);
  for (CudaLaunch& l : launches) {
    void* fn = kernel.function(l.variant, l.vec, cc);
    std::vector<void*> params = l.args.pointers();
    check(d, d.launch_kernel(fn, l.geometry.grid, 1, 1, l.geometry.block, 1, 1, 0, stream, params.data(), nullptr),
          "cuLaunchKernel");
  }
}

}  // namespace cuda
}  // namespace kjit
