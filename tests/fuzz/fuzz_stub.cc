// Fuzzes generated stubs: random TVMFFIAny argument arrays and random DLTensors.
//
// The stubs come from stub_kernels.cc through kjit's own codegen (kjit_fuzz_stubgen
// at build time), so they are compiled with this fuzzer's instrumentation. The input
// picks a stub and an argument count, then decodes each argument: ints with edge
// values (INT64_MIN, -1, 0, 2^62, ...), floats (NaN, inf, half-way values), every
// on-stack kind tvm-ffi has, and DLTensors (raw pointers or Tensor objects) with
// random ndim, shape, strides, dtype, device, data and byte_offset. A rejected call
// is fine; a crash, a sanitizer report, an InternalError, a return code other than
// 0/-1, or a call the kernel's oracle finds breaking its spec is a bug. The call
// model (src/call) runs on the same arguments and must answer as the stub did: the
// same pass, or the same error.
#include <fuzzer/FuzzedDataProvider.h>
#include <tvm/ffi/c_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "call/call_model.h"
#include "fuzz_common.h"
#include "stub_table.h"

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kEdgeInts[] = {0,
                                 1,
                                 -1,
                                 2,
                                 3,
                                 4,
                                 7,
                                 8,
                                 16,
                                 24,
                                 25,
                                 99,
                                 100,
                                 127,
                                 128,
                                 255,
                                 256,
                                 -128,
                                 -129,
                                 65535,
                                 65536,
                                 INT32_MAX,
                                 INT32_MIN,
                                 1LL << 31,
                                 1LL << 32,
                                 1LL << 62,
                                 (1LL << 62) + 1,
                                 -(1LL << 62),
                                 kMax,
                                 kMin,
                                 kMin + 1,
                                 kMax / 4 + 1};
constexpr double kEdgeFloats[] = {0.0,
                                  -0.0,
                                  1.0,
                                  -1.0,
                                  0.5,
                                  65504.0,
                                  65520.0,
                                  1e300,
                                  -1e300,
                                  1e-310,
                                  2.5,
                                  3.5,
                                  1e38,
                                  3.5e38,
                                  5.960464477539063e-08,
                                  9.2233720368547758e18};

/// Everything an argument array points into; lives for one call.
struct Arena {
  struct FakeTensorObject {
    TVMFFIObject header;
    DLTensor tensor;
  };
  struct FakeObject {
    TVMFFIObject header;
    unsigned char body[256];
  };
  std::deque<std::vector<int64_t>> int_arrays;
  std::deque<DLTensor> tensors;
  std::deque<FakeTensorObject> tensor_objects;
  std::deque<FakeObject> objects;
  std::deque<TVMFFIObject*> object_refs;

  int64_t* ints(size_t n) {
    int_arrays.emplace_back(n == 0 ? 1 : n, 0);
    return int_arrays.back().data();
  }
  TVMFFIObject* object(int32_t type_index) {
    objects.emplace_back();
    FakeObject& o = objects.back();
    std::memset(&o, 0, sizeof(o));
    o.header.combined_ref_count = 1;
    o.header.type_index = type_index;
    return &o.header;
  }
};

int64_t edge_int(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return kEdgeInts[in.ConsumeIntegralInRange<size_t>(0, std::size(kEdgeInts) - 1)];
  return in.ConsumeIntegral<int64_t>();
}

int64_t dim(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange(0, 3) != 0) return in.ConsumeIntegralInRange<int64_t>(0, 9);
  return edge_int(in);
}

double edge_float(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return in.ConsumeBool() ? INFINITY : -INFINITY;
    case 2:
      return static_cast<double>(edge_int(in));
    case 3: {
      double raw = 0;
      uint64_t bits = in.ConsumeIntegral<uint64_t>();
      std::memcpy(&raw, &bits, sizeof(raw));
      return raw;
    }
    default:
      return kEdgeFloats[in.ConsumeIntegralInRange<size_t>(0, std::size(kEdgeFloats) - 1)];
  }
}

int32_t tensor_ndim(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return -1;
    case 1:
      return in.ConsumeBool() ? INT32_MIN : in.ConsumeIntegralInRange<int32_t>(5, 64);
    default:
      return in.ConsumeIntegralInRange<int32_t>(0, 4);
  }
}

DLDataType tensor_dtype(FuzzedDataProvider& in) {
  constexpr uint8_t kCodes[] = {kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool, kDLFloat, kDLFloat};
  constexpr uint8_t kBits[] = {32, 16, 8, 64, 1, 0, 32, 128};
  DLDataType t;
  t.code = in.ConsumeBool() ? kCodes[in.ConsumeIntegralInRange<size_t>(0, std::size(kCodes) - 1)]
                            : in.ConsumeIntegral<uint8_t>();
  t.bits = in.ConsumeBool() ? kBits[in.ConsumeIntegralInRange<size_t>(0, std::size(kBits) - 1)]
                            : in.ConsumeIntegral<uint8_t>();
  t.lanes = in.ConsumeIntegralInRange(0, 3) != 0 ? 1 : in.ConsumeIntegral<uint16_t>();
  return t;
}

DLDevice tensor_device(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return DLDevice{kDLCUDA, in.ConsumeIntegralInRange<int32_t>(0, 1)};
    case 1:
      return DLDevice{static_cast<DLDeviceType>(in.ConsumeIntegral<int32_t>()), in.ConsumeIntegral<int32_t>()};
    case 2:
      return DLDevice{kDLCPU, in.ConsumeIntegral<int32_t>()};
    default:
      return DLDevice{kDLCPU, 0};
  }
}

// Data pointers are never dereferenced (the kernels only read metadata), so any
// address will do; most are 64-byte aligned like real allocations.
void* tensor_data(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return nullptr;
    case 1:
      return reinterpret_cast<void*>(static_cast<uintptr_t>(0x10000 + in.ConsumeIntegralInRange(1, 63)));
    case 2:
      return reinterpret_cast<void*>(in.ConsumeIntegral<uintptr_t>());
    default:
      return reinterpret_cast<void*>(static_cast<uintptr_t>(0x10000));
  }
}

uint64_t tensor_byte_offset(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return in.ConsumeIntegralInRange<uint64_t>(1, 64);
    case 1:
      return static_cast<uint64_t>(edge_int(in));
    default:
      return 0;
  }
}

/// Compact strides of `shape` (wrapping like a careless producer would).
void compact_strides(const int64_t* shape, int32_t ndim, int64_t* strides) {
  uint64_t s = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    strides[i] = static_cast<int64_t>(s);
    s *= static_cast<uint64_t>(shape[i]);
  }
}

int64_t* tensor_strides(FuzzedDataProvider& in, Arena& arena, const int64_t* shape, int32_t ndim) {
  const int choice = in.ConsumeIntegralInRange(0, 3);
  if (choice == 0 || ndim < 0) return choice == 0 ? nullptr : arena.ints(1);
  int64_t* strides = arena.ints(static_cast<size_t>(ndim));
  compact_strides(shape, ndim, strides);
  if (choice == 1) return strides;  // explicit and compact
  for (int32_t i = 0; i < ndim; ++i) {
    if (in.ConsumeBool()) strides[i] = in.ConsumeBool() ? dim(in) : edge_int(in);
  }
  return strides;
}

DLTensor* tensor(FuzzedDataProvider& in, Arena& arena, DLTensor* slot) {
  const int32_t ndim = tensor_ndim(in);
  int64_t* shape = nullptr;
  if (ndim > 0) {
    shape = arena.ints(static_cast<size_t>(ndim));
    for (int32_t i = 0; i < ndim; ++i) shape[i] = dim(in);
  } else if (in.ConsumeBool()) {
    shape = arena.ints(1);
  }
  slot->ndim = ndim;
  slot->shape = shape;
  slot->strides = tensor_strides(in, arena, shape, ndim);
  slot->dtype = tensor_dtype(in);
  slot->device = tensor_device(in);
  slot->data = tensor_data(in);
  slot->byte_offset = tensor_byte_offset(in);
  return slot;
}

void small_str(FuzzedDataProvider& in, TVMFFIAny* a) {
  const std::string text = in.ConsumeRandomLengthString(7);
  a->small_str_len = static_cast<uint32_t>(text.size());
  std::memcpy(a->v_bytes, text.data(), text.size());
}

TVMFFIAny argument(FuzzedDataProvider& in, Arena& arena) {
  static const char kRawStr[] = "a raw string";
  static const TVMFFIByteArray kByteArray = {kRawStr, sizeof(kRawStr) - 1};
  constexpr int32_t kObjects[] = {kTVMFFIStr,   kTVMFFIBytes, kTVMFFIFunction, kTVMFFIShape,
                                  kTVMFFIArray, kTVMFFIMap,   kTVMFFIModule,   kTVMFFIBigInt};
  TVMFFIAny a;
  std::memset(&a, 0, sizeof(a));
  switch (in.ConsumeIntegralInRange(0, 15)) {
    case 0:
      a.type_index = kTVMFFINone;
      break;
    case 1:
    case 2:
    case 3:
      a.type_index = kTVMFFIInt;
      a.v_int64 = edge_int(in);
      break;
    case 4:
      a.type_index = kTVMFFIBool;
      a.v_int64 = in.ConsumeBool() ? in.ConsumeBool() : edge_int(in);
      break;
    case 5:
      a.type_index = kTVMFFIFloat;
      a.v_float64 = edge_float(in);
      break;
    case 6:
    case 7:
    case 8:
      a.type_index = kTVMFFIDLTensorPtr;
      a.v_ptr = in.ConsumeIntegralInRange(0, 9) == 0 ? nullptr : tensor(in, arena, &arena.tensors.emplace_back());
      break;
    case 9:
    case 10:
    case 11: {
      Arena::FakeTensorObject& o = arena.tensor_objects.emplace_back();
      std::memset(&o.header, 0, sizeof(o.header));
      o.header.combined_ref_count = 1;
      o.header.type_index = kTVMFFITensor;
      tensor(in, arena, &o.tensor);
      a.type_index = kTVMFFITensor;
      a.v_obj = &o.header;
      break;
    }
    case 12:
      a.type_index = in.ConsumeBool() ? kTVMFFIOpaquePtr : kTVMFFIRawStr;
      a.v_c_str = kRawStr;
      if (in.ConsumeBool()) {
        a.type_index = kTVMFFIByteArrayPtr;
        a.v_ptr = const_cast<TVMFFIByteArray*>(&kByteArray);
      }
      break;
    case 13:
      a.type_index = in.ConsumeBool() ? kTVMFFISmallStr : kTVMFFISmallBytes;
      small_str(in, &a);
      break;
    case 14:
      a.type_index = in.ConsumeBool() ? kTVMFFIDataType : kTVMFFIDevice;
      a.v_uint64 = in.ConsumeIntegral<uint64_t>();
      if (in.ConsumeBool()) a.type_index = in.ConsumeIntegralInRange<int32_t>(kTVMFFIObjectRValueRef + 3, 63);
      break;
    default: {
      const int32_t type_index = kObjects[in.ConsumeIntegralInRange<size_t>(0, std::size(kObjects) - 1)];
      a.type_index = type_index;
      a.v_obj = arena.object(type_index);
      if (in.ConsumeIntegralInRange(0, 7) == 0) {  // an rvalue reference to that object
        a.type_index = kTVMFFIObjectRValueRef;
        a.v_ptr = &arena.object_refs.emplace_back(arena.object(type_index));
      }
      break;
    }
  }
  return a;
}

/// Takes the error a failed call raised ("Kind: message"); its kind must be a user error.
std::string take_raised(const char* who) {
  TVMFFIObjectHandle error = nullptr;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == nullptr) kjit_fuzz::bug(std::string(who) + ": returned -1 without raising an error");
  const auto* cell = reinterpret_cast<const TVMFFIErrorCell*>(static_cast<char*>(error) + sizeof(TVMFFIObject));
  const std::string kind(cell->kind.data, cell->kind.size);
  const std::string message(cell->message.data, cell->message.size);
  TVMFFIObjectDecRef(error);
  if (kind == "InternalError") kjit_fuzz::bug(std::string(who) + ": InternalError: " + message);
  return kind + ": " + message;
}

/// The call model of a stub's spec (src/call), made once.
const kjit::CallModel& model_of(int index, const KjitFuzzStub& stub) {
  static std::map<int, std::unique_ptr<kjit::CallModel>> models;
  std::unique_ptr<kjit::CallModel>& m = models[index];
  if (!m) m = std::make_unique<kjit::CallModel>(kjit::parse_signature(stub.name, stub.signature));
  return *m;
}

/// The call model must answer a call as the stub did: pass when it passed, and raise
/// the stub's own error when it failed (the fuzzed specs return no tensors, so the
/// caller's arguments are the stub's).
void check_model_agrees(int index, const KjitFuzzStub& stub, const std::vector<TVMFFIAny>& args,
                        const std::string& stub_answer) {
  const kjit::CallModel& model = model_of(index, stub);
  if (!model.returned().empty() || static_cast<int>(args.size()) != stub.num_args) return;
  const int rc = model.infer(args.data(), /*data_checked=*/true, nullptr);
  const std::string answer = rc == 0 ? "" : take_raised("the call model");
  if (answer != stub_answer) {
    kjit_fuzz::bug(std::string(stub.name) + ": the call model answered '" + answer + "' where the stub answered '" +
                   stub_answer + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int index = in.ConsumeIntegralInRange(0, kjit_fuzz_stub_count - 1);
  const KjitFuzzStub& stub = kjit_fuzz_stubs[index];
  const int num_args = in.ConsumeIntegralInRange(0, 7) != 0 ? stub.num_args : in.ConsumeIntegralInRange(0, 10);
  Arena arena;
  std::vector<TVMFFIAny> args;
  for (int i = 0; i < num_args; ++i) args.push_back(argument(in, arena));
  TVMFFIAny result;
  std::memset(&result, 0, sizeof(result));
  const int rc = stub.call(nullptr, args.data(), static_cast<int32_t>(args.size()), &result);
  if (rc != 0 && rc != -1) {
    kjit_fuzz::bug(std::string(stub.name) + ": the safe call returned " + std::to_string(rc) + ", not 0 or -1");
  }
  const std::string answer = rc == 0 ? "" : take_raised(stub.name);
  if (rc == 0 && result.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(result.v_obj);
  check_model_agrees(index, stub, args, answer);
  return 0;
}
