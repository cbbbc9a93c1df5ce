// The pickle of a torch.save file from anywhere (a downloaded checkpoint, a GraphGPT release): the
// restricted unpickler must end in its PickleError, one line, or in a value graph that is
// finite and acyclic, no deeper than its limit, whose every tensor lies inside its storage.
#include <cstdint>
#include <cstring>
#include <set>

#include "formats/torch_pickle.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace tp = gt::torch_pickle;

namespace {

void walk(const tp::Pickle& p, const tp::Value& v, int level, std::set<const tp::Value*>& path) {
  FUZZ_CHECK(level <= 101, "a value nested deeper than the limit");
  FUZZ_CHECK(path.insert(&v).second, "a value that contains itself");
  if (v.kind == tp::Kind::kTensor) {
    const tp::TensorRef& t = v.tensor;
    FUZZ_CHECK(t.storage < p.storages.size(), "a tensor of a storage that does not exist");
    FUZZ_CHECK(t.sizes.size() == t.strides.size(), "sizes and strides differ in length");
    __int128 last = t.offset;
    bool empty = false;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      FUZZ_CHECK(t.sizes[d] >= 0 && t.strides[d] >= 0, "a negative size or stride");
      empty = empty || t.sizes[d] == 0;
      if (t.sizes[d] > 0) last += static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
    }
    FUZZ_CHECK(empty || last < p.storages[t.storage].numel, "a tensor reaches past its storage");
  }
  if (v.kind == tp::Kind::kStorage)
    FUZZ_CHECK(v.integer >= 0 && static_cast<size_t>(v.integer) < p.storages.size(), "a storage that does not exist");
  for (const auto& c : v.items) walk(p, *c, level + 1, path);
  if (v.state) walk(p, *v.state, level + 1, path);
  FUZZ_CHECK(!v.state || v.kind == tp::Kind::kObject, "a state on a value that is not an object");
  for (const auto& [k, c] : v.entries) {
    walk(p, *k, level + 1, path);
    walk(p, *c, level + 1, path);
  }
  path.erase(&v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tp::Pickle p;
  try {
    p = tp::parse(reinterpret_cast<const char*>(data), size);
  } catch (const tp::PickleError& e) {
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    return 0;
  }
  FUZZ_CHECK(p.root != nullptr, "no root value");
  for (const auto& s : p.storages) {
    FUZZ_CHECK(tp::dtype_size(s.dtype) > 0, "a storage of an unknown dtype");
    FUZZ_CHECK(s.numel >= 0, "a storage of negative size");
  }
  std::set<const tp::Value*> path;
  walk(p, *p.root, 0, path);
  return 0;
}
