#include "weights/torch_file.hpp"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/printable.hpp"

namespace gt {
namespace {

namespace tp = torch_pickle;

// libtorch's zip reader over the mapped bytes, so the file is opened once.
class MappedReadAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MappedReadAdapter(std::shared_ptr<const MappedFile> map) : map_(std::move(map)) {}
  size_t size() const override { return map_->size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= map_->size()) return 0;
    n = std::min<uint64_t>(n, map_->size() - pos);
    std::memcpy(buf, map_->bytes() + pos, n);
    return n;
  }

 private:
  std::shared_ptr<const MappedFile> map_;
};

torch::ScalarType scalar_type_of(const std::string& dtype) {
  static const std::pair<const char*, torch::ScalarType> types[] = {
      {"float32", torch::kFloat32}, {"float64", torch::kFloat64},        {"float16", torch::kFloat16},
      {"bfloat16", torch::kBFloat16}, {"int64", torch::kInt64},          {"int32", torch::kInt32},
      {"int16", torch::kInt16},     {"int8", torch::kInt8},              {"uint8", torch::kUInt8},
      {"bool", torch::kBool},       {"complex64", torch::kComplexFloat}, {"complex128", torch::kComplexDouble}};
  for (const auto& [name, type] : types)
    if (dtype == name) return type;
  throw std::logic_error("torch_file: no scalar type for storage dtype " + dtype);
}

// The first sentence of a libtorch error: the rest is its stack, or miniz's advice at length.
std::string first_line(const c10::Error& e) {
  std::string what = e.what_without_backtrace();
  what = what.substr(0, what.find('\n'));
  return what.substr(0, what.find(". "));
}

}  // namespace

TorchFile TorchFile::open(const std::string& path) {
  TorchFile f;
  f.path_ = path;
  f.map_ = MappedFile::open(path);
  const char* bytes = f.map_->bytes();
  const uint64_t size = f.map_->size();
  if (size < 4 || std::memcmp(bytes, "PK\x03\x04", 4) != 0) {
    if (size >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80)
      fail(path, "a legacy torch.save file (torch before 1.6, or _use_new_zipfile_serialization=False), which graphtune "
                 "does not read: load and save it again with a current torch");
    fail(path, "not a torch.save file (it is not a zip archive)");
  }
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip;
  std::string pickle_bytes;
  try {
    zip = std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<MappedReadAdapter>(f.map_));
    if (!zip->hasRecord("data.pkl")) fail(path, "a zip without the data.pkl of a torch.save file");
    auto [data, n] = zip->getRecord("data.pkl");
    pickle_bytes.assign(static_cast<const char*>(data.get()), n);
    if (zip->hasRecord("byteorder")) {
      auto [order, m] = zip->getRecord("byteorder");
      if (std::string(static_cast<const char*>(order.get()), m) != "little")
        fail(path, "was written on a big-endian machine (byteorder is not \"little\")");
    }
  } catch (const c10::Error& e) {
    fail(path, "not a readable torch.save zip: " + first_line(e));
  }
  try {
    f.pickle_ = tp::parse(pickle_bytes.data(), pickle_bytes.size());
  } catch (const tp::PickleError& e) {
    fail(path, std::string("data.pkl: ") + e.what());
  }
  // Every storage a record of exactly its size, stored: its bytes are read in place.
  for (const tp::Storage& s : f.pickle_.storages) {
    const std::string record = "data/" + s.key;
    const std::string key = printable(s.key.substr(0, 64)), shown = "data/" + key;  // for messages
    uint64_t at = 0, n = 0;
    try {
      if (!zip->hasRecord(record)) fail(path, "storage '" + key + "' has no record " + shown + " in the zip");
      n = zip->getRecordSize(record);
      const uint64_t header = zip->getRecordHeaderOffset(record);
      // The local file header's compression method (bytes 8-9): torch.save stores, never deflates.
      if (header + 30 > size || (bytes[header + 8] | bytes[header + 9]) != 0)
        fail(path, "record " + shown + " is compressed (torch.save stores its records uncompressed)");
      at = zip->getRecordOffset(record);
    } catch (const c10::Error& e) {
      fail(path, "record " + shown + ": " + first_line(e));
    }
    const uint64_t want = static_cast<uint64_t>(s.numel) * tp::dtype_size(s.dtype);
    if (n != want)
      fail(path, "storage '" + key + "' holds " + std::to_string(s.numel) + " " + s.dtype + " elements (" +
                     std::to_string(want) + " bytes) but its record has " + std::to_string(n));
    if (at > size || n > size - at) fail(path, "record " + shown + " runs past the end of the file");
    f.storage_at_.push_back(at);
  }
  return f;
}

torch::ScalarType TorchFile::dtype(const tp::TensorRef& t) const {
  return scalar_type_of(pickle_.storages.at(t.storage).dtype);
}

torch::Tensor TorchFile::tensor(const tp::TensorRef& t) const {
  const tp::Storage& s = pickle_.storages.at(t.storage);
  const torch::ScalarType type = scalar_type_of(s.dtype);
  const uint64_t bytes = static_cast<uint64_t>(s.numel) * tp::dtype_size(s.dtype);
  const torch::Tensor storage = map_->view(storage_at_.at(t.storage), bytes, {s.numel}, type);
  // The unpickler checked that every element the view reaches lies in the storage.
  return storage.as_strided(t.sizes, t.strides, t.offset);
}

std::vector<std::pair<std::string, tp::TensorRef>> state_dict_entries(const TorchFile& file) {
  const tp::Value& root = *file.pickle().root;
  if (root.kind != tp::Kind::kDict)
    fail(file.path(), "holds " + tp::describe(root) + ", not a state dict (a dict of names to tensors)");
  std::vector<std::pair<std::string, tp::TensorRef>> out;
  std::set<std::string> seen;
  for (const auto& [k, v] : root.entries) {
    if (k->kind != tp::Kind::kString) fail(file.path(), "a key of the state dict is " + tp::describe(*k) + ", not a name");
    const std::string name = printable(k->text.substr(0, 200));  // for messages
    if (v->kind != tp::Kind::kTensor)
      fail(file.path(), "entry '" + name + "' is " + tp::describe(*v) + ", not a tensor (graphtune reads state dicts: "
                                                                          "names to tensors)");
    if (!seen.insert(k->text).second) fail(file.path(), "entry '" + name + "' appears twice");
    out.emplace_back(k->text, v->tensor);
  }
  return out;
}

std::map<std::string, torch::Tensor> load_torch_state_dict(const std::string& path) {
  const TorchFile f = TorchFile::open(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, ref] : state_dict_entries(f)) out[name] = f.tensor(ref);
  return out;
}

void save_torch_state_dict(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().to(torch::kCPU).contiguous());
  // torch::pickle_save, except that the dict is written untagged: pickle_save's type tag
  // (torch.jit._pickle.restore_type_tag) is a global that torch.load(weights_only=True), the
  // default since PyTorch 2.6, refuses. Untagged, the file holds only what torch.save writes for
  // a dict of tensors.
  std::vector<char> pickle_data;
  torch::jit::Pickler pickler([&](const char* buf, size_t n) { pickle_data.insert(pickle_data.end(), buf, buf + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(torch::IValue(dict));
  pickler.stop();
  std::vector<char> container;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) -> size_t {
      const char* b = static_cast<const char*>(p);
      container.insert(container.end(), b, b + n);
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickle_data.data(), pickle_data.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  AtomicFile f(path);
  f.write(container.data(), container.size());
  f.commit();
}

}  // namespace gt
