#pragma once
// The pickle inside a torch.save file (its data.pkl), read without Python and without running
// anything it names. torch.save writes a state dict as pickle protocol 2: a
// collections.OrderedDict (or a dict) of name -> torch._utils._rebuild_tensor_v2(storage,
// offset, size, stride, requires_grad, hooks), where each storage is a persistent id
// ("storage", torch.HalfStorage, key, location, numel) naming the zip record data/<key>.
//
// libtorch's own unpickler turns an OrderedDict into None, so it cannot read what
// model.state_dict() and Hugging Face's save_pretrained(safe_serialization=False) write; this
// is a restricted one written for exactly that subset (as safetensors was invented to avoid
// pickle's arbitrary calls, this reader makes none): the opcodes of protocols 2 to 5 that such
// files use, and an allowlist of globals, each interpreted here instead of being called. Any
// other global, a call of anything but those, or a structure that does not fit is a PickleError
// with a one-line reason. Torch-free, so that the fuzzer (tests/fuzz) runs it bare.
//
// The allowlist also holds the classes GraphGPT's graph_data_all.pt is made of (PyG's Data and
// its storages, torch_sparse's SparseTensor and SparseStorage, numpy's arrays and dtypes): an
// object of one of them is not constructed but kept as what the pickle says of it (its class,
// its constructor's arguments, the state BUILD gives it), for a reader to take the tensors
// it needs from (loader/feature_table_io.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gt::torch_pickle {

struct PickleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One storage a persistent id named: the zip record data/<key> holds numel elements of dtype
// ("float16", "bfloat16", "float32", ...: the storage class's element type).
struct Storage {
  std::string key, dtype, location;
  int64_t numel = 0;
};

// A tensor as _rebuild_tensor_v2 describes it: a strided view of storages[storage], checked to
// lie inside it (every element it can reach).
struct TensorRef {
  size_t storage = 0;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  bool requires_grad = false;
};

enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kTuple, kList, kDict, kTensor, kStorage, kGlobal, kObject };

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;   // kInt; kStorage: the index into Pickle::storages
  double real = 0;
  std::string text;      // kString, kBytes; kGlobal, kObject: the class, "module.name"
  std::vector<ValuePtr> items;                         // kTuple, kList; kObject: its constructor's arguments
  ValuePtr state;                                      // kObject: what BUILD gave it (its __dict__), or null
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // kDict, in insertion order
  TensorRef tensor;                                    // kTensor
  // Set once the value is inside another (a tuple, list, dict or a call's arguments): it is
  // never changed after, which also keeps the value graph free of cycles.
  bool frozen = false;
  bool open = false;  // an object before its BUILD: a reference to it inside anything is a stub
  int depth = 0;      // nesting below this value
};

struct Pickle {
  ValuePtr root;
  std::vector<Storage> storages;
};

// Element size in bytes of a Storage::dtype, 0 for a name that is not one.
size_t dtype_size(const std::string& dtype);

// The object the pickle in [data, data + size) builds. PickleError on anything else.
Pickle parse(const char* data, size_t size);

// "a dict", "a tensor", ...: for messages.
std::string describe(const Value& v);

}  // namespace gt::torch_pickle
