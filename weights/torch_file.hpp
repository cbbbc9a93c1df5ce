#pragma once
// torch.save files as Python writes them: a zip (torch 1.6 and later) of archive/data.pkl, the
// pickle, and archive/data/<key>, one record a storage, stored uncompressed. The pickle is read
// by graphtune's restricted unpickler (formats/torch_pickle.hpp), which calls nothing; each
// tensor is a view of the mapped file (weights/mapped_file.hpp), read only when copied, so a
// 10 GB pytorch_model-00001-of-00002.bin is never read into memory whole. Everything wrong with
// a file is an InputError naming it.
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/torch_pickle.hpp"
#include "weights/mapped_file.hpp"

namespace gt {

class TorchFile {
 public:
  // Maps the file, reads the zip's directory and the pickle, and checks that every storage the
  // pickle names is a record of its size: no tensor data is touched.
  static TorchFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const torch_pickle::Pickle& pickle() const { return pickle_; }

  torch::ScalarType dtype(const torch_pickle::TensorRef& t) const;
  // The tensor, a strided view of its storage's bytes in the mapping (zero-copy, MappedFile::view).
  torch::Tensor tensor(const torch_pickle::TensorRef& t) const;

 private:
  std::string path_;
  std::shared_ptr<const MappedFile> map_;
  torch_pickle::Pickle pickle_;
  std::vector<uint64_t> storage_at_;  // each storage's data offset in the file
};

// A state dict's entries, in the file's order: the top-level dict (an OrderedDict, as
// state_dict() is, or a plain dict) of names to tensors. Anything else (a key that is not a
// string, a value that is not a tensor, a name twice) is an InputError naming the file and key.
std::vector<std::pair<std::string, torch_pickle::TensorRef>> state_dict_entries(const TorchFile& file);

// A torch.save'd dict of tensors (a state dict, GraphGPT's graph_projector.bin) by name, as
// views of the mapped file.
std::map<std::string, torch::Tensor> load_torch_state_dict(const std::string& path);
// The inverse, through AtomicFile: Python's torch.load reads it back as a dict of tensors
// (weights_only too). Tensors go to the CPU, contiguous, in their dtype.
void save_torch_state_dict(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

}  // namespace gt
