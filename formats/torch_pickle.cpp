#include "formats/torch_pickle.hpp"

#include "common/printable.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

namespace gt::torch_pickle {
namespace {

constexpr int kMaxDepth = 100;       // a state dict nests 3 deep; the limit bounds recursion
constexpr size_t kMaxDims = 64;      // torch's own limit on a tensor's dimensions
constexpr size_t kMaxNameBytes = 256;  // a GLOBAL's module or name line

// What a global is to this reader: something it interprets (never calls), or a storage class,
// which only a persistent id may name.
enum class Global { kOrderedDict, kRebuildTensorV2, kRebuildTensor, kRebuildParameter, kRebuildParameterWithState,
                    kRestoreTypeTag, kStorage, kClass, kNumpyReconstruct, kNumpyScalar, kCodecsEncode };

struct KnownGlobal {
  const char* module;
  const char* name;
  Global what;
  const char* dtype;  // a storage class's element type
};

// torch.save's storage classes (TypedStorage.pickle_storage_type()) and UntypedStorage.
const KnownGlobal kGlobals[] = {
    {"collections", "OrderedDict", Global::kOrderedDict, nullptr},
    {"torch._utils", "_rebuild_tensor_v2", Global::kRebuildTensorV2, nullptr},
    {"torch._utils", "_rebuild_tensor", Global::kRebuildTensor, nullptr},
    {"torch._utils", "_rebuild_parameter", Global::kRebuildParameter, nullptr},
    {"torch._utils", "_rebuild_parameter_with_state", Global::kRebuildParameterWithState, nullptr},
    {"torch.jit._pickle", "restore_type_tag", Global::kRestoreTypeTag, nullptr},
    {"torch", "FloatStorage", Global::kStorage, "float32"},
    {"torch", "DoubleStorage", Global::kStorage, "float64"},
    {"torch", "HalfStorage", Global::kStorage, "float16"},
    {"torch", "BFloat16Storage", Global::kStorage, "bfloat16"},
    {"torch", "LongStorage", Global::kStorage, "int64"},
    {"torch", "IntStorage", Global::kStorage, "int32"},
    {"torch", "ShortStorage", Global::kStorage, "int16"},
    {"torch", "CharStorage", Global::kStorage, "int8"},
    {"torch", "ByteStorage", Global::kStorage, "uint8"},
    {"torch", "BoolStorage", Global::kStorage, "bool"},
    {"torch", "ComplexFloatStorage", Global::kStorage, "complex64"},
    {"torch", "ComplexDoubleStorage", Global::kStorage, "complex128"},
    {"torch", "UntypedStorage", Global::kStorage, "uint8"},
    // graph_data_all.pt: PyG's Data (2.x keeps its attributes in a GlobalStorage), torch_sparse,
    // numpy (numpy 1's module names and numpy 2's), and the bytes numpy arrays are pickled with.
    {"torch_geometric.data.data", "Data", Global::kClass, nullptr},
    {"torch_geometric.data.data", "DataEdgeAttr", Global::kClass, nullptr},
    {"torch_geometric.data.data", "DataTensorAttr", Global::kClass, nullptr},
    {"torch_geometric.data.storage", "GlobalStorage", Global::kClass, nullptr},
    {"torch_geometric.data.storage", "NodeStorage", Global::kClass, nullptr},
    {"torch_geometric.data.storage", "EdgeStorage", Global::kClass, nullptr},
    {"torch_sparse.tensor", "SparseTensor", Global::kClass, nullptr},
    {"torch_sparse.storage", "SparseStorage", Global::kClass, nullptr},
    {"numpy", "ndarray", Global::kClass, nullptr},
    {"numpy", "dtype", Global::kClass, nullptr},
    {"numpy.core.multiarray", "_reconstruct", Global::kNumpyReconstruct, nullptr},
    {"numpy._core.multiarray", "_reconstruct", Global::kNumpyReconstruct, nullptr},
    {"numpy.core.multiarray", "scalar", Global::kNumpyScalar, nullptr},
    {"numpy._core.multiarray", "scalar", Global::kNumpyScalar, nullptr},
    {"_codecs", "encode", Global::kCodecsEncode, nullptr},
};

const KnownGlobal* find_global(const std::string& dotted) {
  for (const auto& g : kGlobals)
    if (dotted == std::string(g.module) + "." + g.name) return &g;
  return nullptr;
}

// Text from the pickle in a message: control characters escaped, at most 64 bytes of it.
std::string shown(const std::string& text) { return printable(text.substr(0, 64)); }

ValuePtr make(Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

class Parser {
 public:
  Parser(const char* data, size_t size)
      : begin_(reinterpret_cast<const unsigned char*>(data)), p_(begin_), end_(begin_ + size) {}

  Pickle run() {
    while (true) {
      at_ = static_cast<size_t>(p_ - begin_);
      if (p_ == end_) fail("the pickle ends before its STOP opcode (truncated)");
      const unsigned char op = *p_++;
      if (op == '.') break;
      step(op);
    }
    out_.root = pop("STOP");
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw PickleError("byte " + std::to_string(at_) + ": " + why);
  }

  const unsigned char* take(size_t n, const char* what) {
    if (static_cast<size_t>(end_ - p_) < n) fail(std::string(what) + " runs past the end of the pickle (truncated)");
    const unsigned char* at = p_;
    p_ += n;
    return at;
  }
  uint64_t little(size_t n, const char* what) {
    const unsigned char* b = take(n, what);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
    return v;
  }
  std::string bytes(uint64_t n, const char* what) {
    if (n > static_cast<uint64_t>(end_ - p_)) fail(std::string(what) + " of " + std::to_string(n) + " bytes runs past the end of the pickle");
    const unsigned char* b = take(static_cast<size_t>(n), what);
    return std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(n));
  }
  std::string line(const char* what) {
    const unsigned char* nl = static_cast<const unsigned char*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
    if (!nl) fail(std::string(what) + " has no end of line (truncated)");
    if (static_cast<size_t>(nl - p_) > kMaxNameBytes) fail(std::string(what) + " is longer than 256 bytes");
    std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(nl - p_));
    p_ = nl + 1;
    return s;
  }

  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  ValuePtr pop(const char* op) {
    if (stack_.size() <= base()) fail(std::string(op) + " needs a value, and the stack is empty");
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top(const char* op) {
    if (stack_.size() <= base()) fail(std::string(op) + " needs a value, and the stack is empty");
    return *stack_.back();
  }
  std::vector<ValuePtr> pop_mark(const char* op) {
    if (marks_.empty()) fail(std::string(op) + " without a MARK");
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  // `child` goes inside `parent`: it is frozen from now on, and the parent's depth follows (a
  // parent that is not frozen is inside nothing, so its depth is exact). Returns what to store.
  // An object still waiting for its BUILD is referred to from inside its own state: a cycle,
  // which pickle allows (PyG's storages point back at their Data) and this reader breaks, by
  // storing a stub of the same class in its place.
  ValuePtr adopt(Value& parent, ValuePtr child) {
    if (child->open) {
      ValuePtr stub = make(Kind::kObject);
      stub->text = child->text;
      stub->frozen = true;
      return stub;
    }
    if (child.get() == &parent) fail("a " + describe(parent).substr(2) + " that holds itself");
    child->frozen = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) fail("values nested deeper than " + std::to_string(kMaxDepth) + " levels");
    return child;
  }
  Value& mutable_top(const char* op, Kind kind) {
    Value& t = top(op);
    if (t.kind != kind) fail(std::string(op) + " on " + describe(t));
    if (t.frozen) fail(std::string(op) + " changes " + describe(t) + " that is already inside another value");
    return t;
  }
  ValuePtr sequence(Kind kind, std::vector<ValuePtr> items) {
    ValuePtr v = make(kind);
    for (ValuePtr& i : items) i = adopt(*v, std::move(i));
    v->items = std::move(items);
    return v;
  }
  void set_items(Value& dict, std::vector<ValuePtr>& kv, const char* op) {
    if (kv.size() % 2) fail(std::string(op) + " with an odd number of values (" + std::to_string(kv.size()) + ")");
    for (size_t i = 0; i < kv.size(); i += 2) {
      ValuePtr key = adopt(dict, std::move(kv[i]));
      ValuePtr value = adopt(dict, std::move(kv[i + 1]));
      dict.entries.emplace_back(std::move(key), std::move(value));
    }
  }
  void memo_put(uint64_t index) {
    top("PUT");  // the value memoised: fails on an empty stack
    memo_[index] = stack_.back();
  }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("GET of memo " + std::to_string(index) + ", which was never PUT");
    push(it->second);
  }

  void global(const std::string& module, const std::string& name) {
    const std::string dotted = module + "." + name;
    if (!find_global(dotted))
      fail("unknown global '" + shown(dotted) +
           "' (graphtune reads tensors in dicts, as torch.save writes a state dict, and calls nothing)");
    ValuePtr g = make(Kind::kGlobal);
    g->text = dotted;
    push(std::move(g));
  }

  static bool is_int(const ValuePtr& v) { return v->kind == Kind::kInt; }
  std::vector<int64_t> ints(const ValuePtr& v, const char* what) {
    if (v->kind != Kind::kTuple) fail(std::string(what) + " is " + describe(*v) + ", not a tuple of ints");
    if (v->items.size() > kMaxDims) fail(std::string(what) + " has " + std::to_string(v->items.size()) + " dimensions");
    std::vector<int64_t> out;
    for (const ValuePtr& i : v->items) {
      if (!is_int(i) || i->integer < 0) fail(std::string(what) + " holds " + (is_int(i) ? "a negative int" : describe(*i)));
      out.push_back(i->integer);
    }
    return out;
  }

  // ("storage", torch.HalfStorage, key, location, numel): the storage, once per key.
  ValuePtr persistent(const ValuePtr& pid) {
    const auto& it = pid->items;
    if (pid->kind != Kind::kTuple || it.size() != 5 || it[0]->kind != Kind::kString || it[0]->text != "storage")
      fail("a persistent id that is not (\"storage\", type, key, location, numel)");
    const KnownGlobal* g = it[1]->kind == Kind::kGlobal ? find_global(it[1]->text) : nullptr;
    if (!g || g->what != Global::kStorage) fail("a persistent id whose storage type is " + describe(*it[1]));
    if (it[2]->kind != Kind::kString || it[3]->kind != Kind::kString || !is_int(it[4]) || it[4]->integer < 0)
      fail("a persistent id whose key, location or size is malformed");
    Storage s{it[2]->text, g->dtype, it[3]->text, it[4]->integer};
    if (s.numel > (int64_t{1} << 56))
      fail("storage '" + shown(s.key) + "' claims " + std::to_string(s.numel) + " elements");
    auto [pos, fresh] = storage_of_key_.emplace(s.key, out_.storages.size());
    if (fresh) {
      out_.storages.push_back(s);
    } else {
      const Storage& seen = out_.storages[pos->second];
      if (seen.dtype != s.dtype || seen.numel != s.numel)
        fail("storage '" + shown(s.key) + "' is named twice with different types or sizes");
    }
    ValuePtr v = make(Kind::kStorage);
    v->integer = static_cast<int64_t>(pos->second);
    return v;
  }

  ValuePtr rebuild_tensor(const std::vector<ValuePtr>& a, bool v2) {
    if (a.size() < 4 || (v2 && a.size() != 6 && a.size() != 7) || (!v2 && a.size() != 4))
      fail("a tensor rebuilt from " + std::to_string(a.size()) + " arguments");
    if (a[0]->kind != Kind::kStorage) fail("a tensor whose storage is " + describe(*a[0]));
    if (!is_int(a[1]) || a[1]->integer < 0) fail("a tensor whose storage offset is not an int >= 0");
    TensorRef t;
    t.storage = static_cast<size_t>(a[0]->integer);
    t.offset = a[1]->integer;
    t.sizes = ints(a[2], "a tensor's size");
    t.strides = ints(a[3], "a tensor's stride");
    if (t.sizes.size() != t.strides.size())
      fail("a tensor with " + std::to_string(t.sizes.size()) + " sizes and " + std::to_string(t.strides.size()) + " strides");
    if (v2) {
      if (a[4]->kind != Kind::kBool) fail("a tensor whose requires_grad is " + describe(*a[4]));
      t.requires_grad = a[4]->boolean;
      if (a[5]->kind != Kind::kDict && a[5]->kind != Kind::kNone) fail("a tensor whose hooks are " + describe(*a[5]));
    }
    // Every element the view can reach lies in the storage (in 128 bits: no overflow).
    const Storage& s = out_.storages[t.storage];
    bool empty = false;
    __int128 last = t.offset;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      empty = empty || t.sizes[d] == 0;
      if (t.sizes[d] > 0) last += static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
    }
    if (!empty && last >= s.numel)
      fail("a tensor reaches element " + std::to_string(static_cast<long long>(std::min<__int128>(last, INT64_MAX))) +
           " of storage '" + shown(s.key) + "', which has " + std::to_string(s.numel));
    ValuePtr v = make(Kind::kTensor);
    v->tensor = std::move(t);
    return v;
  }

  ValuePtr call(const ValuePtr& fn, const ValuePtr& args) {
    if (fn->kind != Kind::kGlobal) fail("a call of " + describe(*fn));
    if (args->kind != Kind::kTuple) fail("a call of " + fn->text + " with " + describe(*args) + " as its arguments");
    const KnownGlobal* g = find_global(fn->text);
    const std::vector<ValuePtr>& a = args->items;
    switch (g->what) {
      case Global::kOrderedDict:
        if (!a.empty()) fail("collections.OrderedDict called with arguments");
        return make(Kind::kDict);
      case Global::kRebuildTensorV2: return rebuild_tensor(a, true);
      case Global::kRebuildTensor: return rebuild_tensor(a, false);
      case Global::kRebuildParameter:
      case Global::kRebuildParameterWithState: {
        const size_t want = g->what == Global::kRebuildParameter ? 3 : 4;
        if (a.size() != want || a[0]->kind != Kind::kTensor || a[1]->kind != Kind::kBool)
          fail(fn->text + " called with arguments other than (tensor, requires_grad, hooks" +
               (want == 4 ? std::string(", state)") : std::string(")")));
        ValuePtr v = make(Kind::kTensor);
        v->tensor = a[0]->tensor;
        v->tensor.requires_grad = a[1]->boolean;
        return v;
      }
      case Global::kRestoreTypeTag:
        if (a.size() != 2) fail("torch.jit._pickle.restore_type_tag called with " + std::to_string(a.size()) + " arguments");
        return a[0];
      case Global::kClass:
      case Global::kNumpyReconstruct:
      case Global::kNumpyScalar: {
        // Kept as the pickle describes it: _reconstruct(cls, ...) stands for an object of cls.
        const bool reconstruct = g->what == Global::kNumpyReconstruct;
        if (reconstruct && (a.empty() || a[0]->kind != Kind::kGlobal)) fail(fn->text + " of something that is not a class");
        return object(reconstruct ? a[0]->text : fn->text, a);
      }
      case Global::kCodecsEncode: {
        // _codecs.encode(text, "latin1"): how protocol 2 pickles bytes (numpy's raw data).
        if (a.size() != 2 || a[0]->kind != Kind::kString || a[1]->kind != Kind::kString || a[1]->text != "latin1")
          fail("_codecs.encode called with arguments other than (text, \"latin1\")");
        ValuePtr v = make(Kind::kBytes);
        v->text = latin1(a[0]->text);
        return v;
      }
      case Global::kStorage: break;
    }
    fail(fn->text + " is a storage type, which only a persistent id may name, not something to call");
  }

  ValuePtr object(const std::string& cls, const std::vector<ValuePtr>& args) {
    ValuePtr v = make(Kind::kObject);
    v->text = cls;
    for (const ValuePtr& a : args) v->items.push_back(adopt(*v, a));
    v->open = true;  // until its BUILD, if one comes
    return v;
  }

  // NEWOBJ: cls.__new__(cls, *args), for the allowlisted classes only.
  ValuePtr new_object(const ValuePtr& cls, const ValuePtr& args) {
    const KnownGlobal* g = cls->kind == Kind::kGlobal ? find_global(cls->text) : nullptr;
    if (!g || g->what != Global::kClass) fail("NEWOBJ of " + describe(*cls) + ", which is not a class graphtune reads");
    if (args->kind != Kind::kTuple) fail("NEWOBJ of " + cls->text + " with " + describe(*args) + " as its arguments");
    return object(cls->text, args->items);
  }

  // UTF-8 text of code points below 256 as the bytes they stand for.
  std::string latin1(const std::string& utf8) {
    std::string out;
    for (size_t i = 0; i < utf8.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(utf8[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
        out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3f)));
      } else {
        fail("_codecs.encode of text that is not latin-1");
      }
    }
    return out;
  }

  void build() {
    ValuePtr state = pop("BUILD");
    Value& obj = top("BUILD");
    if (obj.kind == Kind::kObject) {
      if (obj.frozen) fail("BUILD changes " + describe(obj) + " that is already inside another value");
      if (obj.state) fail("BUILD sets the state of " + describe(obj) + " twice");
      obj.state = adopt(obj, std::move(state));
      obj.open = false;
      return;
    }
    // An OrderedDict's attributes (a state dict's _metadata: versions, not tensors) are dropped.
    if (obj.kind != Kind::kDict) fail("BUILD sets the state of " + describe(obj) + " (only a dict's attributes are read)");
    if (obj.frozen) fail("BUILD changes a dict that is already inside another value");
    if (state->kind != Kind::kDict && state->kind != Kind::kNone && state->kind != Kind::kTuple)
      fail("BUILD with " + describe(*state) + " as the state");
  }

  void step(unsigned char op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t v = little(1, "PROTO");
        if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (torch.save writes 2; 2 to 5 are read)");
        return;
      }
      case 0x95: little(8, "FRAME"); return;  // framing only groups opcodes
      case '(': marks_.push_back(stack_.size()); return;
      case 'N': push(make(Kind::kNone)); return;
      case 0x88:
      case 0x89: {
        ValuePtr v = make(Kind::kBool);
        v->boolean = op == 0x88;
        push(std::move(v));
        return;
      }
      case 'J':
      case 'K':
      case 'M': {
        ValuePtr v = make(Kind::kInt);
        if (op == 'J') v->integer = static_cast<int32_t>(little(4, "BININT"));
        else v->integer = static_cast<int64_t>(little(op == 'K' ? 1 : 2, "BININT1/2"));
        push(std::move(v));
        return;
      }
      case 0x8a: {  // LONG1: n bytes, little-endian two's complement
        const size_t n = static_cast<size_t>(little(1, "LONG1"));
        if (n > 8) fail("an integer of " + std::to_string(n) + " bytes (over 64 bits)");
        uint64_t u = n ? little(n, "LONG1") : 0;
        if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign-extend
        ValuePtr v = make(Kind::kInt);
        v->integer = static_cast<int64_t>(u);
        push(std::move(v));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const unsigned char* b = take(8, "BINFLOAT");
        uint64_t u = 0;
        for (int i = 0; i < 8; ++i) u = (u << 8) | b[i];
        ValuePtr v = make(Kind::kFloat);
        std::memcpy(&v->real, &u, 8);
        push(std::move(v));
        return;
      }
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'U':
      case 'T': {  // text: BINUNICODE, SHORT_BINUNICODE, BINUNICODE8; Python 2 str
        const size_t n = op == 'X' || op == 'T' ? 4 : op == 0x8d ? 8 : 1;
        ValuePtr v = make(Kind::kString);
        v->text = bytes(little(n, "a string's length"), "a string");
        push(std::move(v));
        return;
      }
      case 'B':
      case 'C':
      case 0x8e: {  // BINBYTES, SHORT_BINBYTES, BINBYTES8
        const size_t n = op == 'B' ? 4 : op == 'C' ? 1 : 8;
        ValuePtr v = make(Kind::kBytes);
        v->text = bytes(little(n, "a bytes' length"), "bytes");
        push(std::move(v));
        return;
      }
      case '}': push(make(Kind::kDict)); return;
      case ']': push(make(Kind::kList)); return;
      case ')': push(make(Kind::kTuple)); return;
      case 't': push(sequence(Kind::kTuple, pop_mark("TUPLE"))); return;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<ValuePtr> items(static_cast<size_t>(op - 0x84));
        for (size_t i = items.size(); i-- > 0;) items[i] = pop("TUPLE1/2/3");
        push(sequence(Kind::kTuple, std::move(items)));
        return;
      }
      case 'l': push(sequence(Kind::kList, pop_mark("LIST"))); return;
      case 'd': {
        std::vector<ValuePtr> kv = pop_mark("DICT");
        ValuePtr d = make(Kind::kDict);
        set_items(*d, kv, "DICT");
        push(std::move(d));
        return;
      }
      case 'a': {
        ValuePtr v = pop("APPEND");
        Value& list = mutable_top("APPEND", Kind::kList);
        list.items.push_back(adopt(list, std::move(v)));
        return;
      }
      case 'e': {
        std::vector<ValuePtr> items = pop_mark("APPENDS");
        Value& list = mutable_top("APPENDS", Kind::kList);
        for (ValuePtr& v : items) list.items.push_back(adopt(list, std::move(v)));
        return;
      }
      case 's': {
        ValuePtr v = pop("SETITEM"), k = pop("SETITEM");
        std::vector<ValuePtr> kv{std::move(k), std::move(v)};
        set_items(mutable_top("SETITEM", Kind::kDict), kv, "SETITEM");
        return;
      }
      case 'u': {
        std::vector<ValuePtr> kv = pop_mark("SETITEMS");
        set_items(mutable_top("SETITEMS", Kind::kDict), kv, "SETITEMS");
        return;
      }
      case 'q': memo_put(little(1, "BINPUT")); return;
      case 'r': memo_put(little(4, "LONG_BINPUT")); return;
      case 0x94: memo_put(memo_.size()); return;  // MEMOIZE
      case 'h': memo_get(little(1, "BINGET")); return;
      case 'j': memo_get(little(4, "LONG_BINGET")); return;
      case 'c': {
        const std::string module = line("GLOBAL's module");
        global(module, line("GLOBAL's name"));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        ValuePtr name = pop("STACK_GLOBAL"), module = pop("STACK_GLOBAL");
        if (name->kind != Kind::kString || module->kind != Kind::kString) fail("STACK_GLOBAL of values that are not strings");
        global(module->text, name->text);
        return;
      }
      case 'R': {
        ValuePtr args = pop("REDUCE"), fn = pop("REDUCE");
        ValuePtr result = call(fn, args);
        push(std::move(result));
        return;
      }
      case 'b': build(); return;
      case 0x81: {  // NEWOBJ
        ValuePtr args = pop("NEWOBJ"), cls = pop("NEWOBJ");
        push(new_object(cls, args));
        return;
      }
      case 0x92: {  // NEWOBJ_EX: keyword arguments are not read
        ValuePtr kwargs = pop("NEWOBJ_EX"), args = pop("NEWOBJ_EX"), cls = pop("NEWOBJ_EX");
        if (kwargs->kind != Kind::kDict || !kwargs->entries.empty()) fail("NEWOBJ_EX with keyword arguments");
        push(new_object(cls, args));
        return;
      }
      case 'Q': push(persistent(pop("BINPERSID"))); return;
      case '0':
        if (stack_.size() > base()) stack_.pop_back();
        else pop_mark("POP");
        return;
      case '1': pop_mark("POP_MARK"); return;
      case '2':
        top("DUP");
        push(stack_.back());
        return;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("opcode ") + hex + " is not one torch.save writes for a state dict");
      }
    }
  }

  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  size_t at_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::map<std::string, size_t> storage_of_key_;
  Pickle out_;
};

}  // namespace

size_t dtype_size(const std::string& dtype) {
  static const std::pair<const char*, size_t> sizes[] = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},     {"int32", 4},
      {"int16", 2},   {"int8", 1},    {"uint8", 1},   {"bool", 1},     {"complex64", 8}, {"complex128", 16}};
  for (const auto& [name, size] : sizes)
    if (dtype == name) return size;
  return 0;
}

Pickle parse(const char* data, size_t size) { return Parser(data, size).run(); }

std::string describe(const Value& v) {
  switch (v.kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a string";
    case Kind::kBytes: return "bytes";
    case Kind::kTuple: return "a tuple";
    case Kind::kList: return "a list";
    case Kind::kDict: return "a dict";
    case Kind::kTensor: return "a tensor";
    case Kind::kStorage: return "a storage";
    case Kind::kGlobal: return "the global " + v.text;
    case Kind::kObject: return "a " + v.text + " object";
  }
  return "a value";
}

}  // namespace gt::torch_pickle
