#pragma once
// A sharded checkpoint's index (index.json): the commit point of a checkpoint, and the map from
// every saved tensor to the bytes that hold it. Torch-free, so the launcher can read it.
//
// A tensor is saved as one or more chunks, each a box of the global tensor (offset + shape per
// dimension) stored contiguously in one shard file at an absolute byte range. A tensor-parallel
// slice is a chunk; a replicated tensor is one chunk covering the whole. Loading at another
// layout reads, for each box a rank needs, the chunks that overlap it (checkpoint/slices.hpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "config/names.hpp"

namespace gt::ckpt {

struct Chunk {
  std::string file;             // shard file name within the checkpoint folder
  uint64_t begin = 0, end = 0;  // absolute byte range [begin, end) in that file
  std::vector<int64_t> offset;  // where the box starts in the global tensor, per dimension
  std::vector<int64_t> shape;   // the box's extent per dimension
};

struct TensorEntry {
  std::string dtype;                 // safetensors spelling: "F32", "BF16", "I64", "U8", ...
  std::vector<int64_t> shape;        // global shape
  std::vector<Chunk> chunks;         // together they cover the global tensor exactly once
};

struct FileEntry {
  int rank = -1;         // world rank that wrote it
  uint64_t bytes = 0;    // file size
  uint32_t crc32 = 0;    // zlib crc32 of the whole file
};

// The parallel layout a checkpoint was saved at: resuming at the same layout restores every
// rank's state as it was; at another one, the tensors are resharded.
struct Layout {
  int dp = 1, pp = 1, tp = 1;
  std::vector<int> partition;  // first decoder layer of each pipeline stage
  bool operator==(const Layout& o) const {
    return dp == o.dp && pp == o.pp && tp == o.tp && partition == o.partition;
  }
  std::string str() const;  // "dp=2 pp=1 tp=1 partition=[0]"
};

struct Index {
  static constexpr int kVersion = 1;
  int64_t step = 0;         // optimizer steps completed; the resumed run starts at this step
  int64_t total_steps = 0;  // of the run that saved it
  Phase stage = Phase::kLm;  // [training].stage of the run that saved it
  Layout layout;
  // Model identity: a hash of the architecture and of every saved and frozen tensor's name and
  // global shape (the saver computes it; see the worker). A different model is refused.
  std::string model_fingerprint;
  // The settings a resume must share with the saved run ("training.batch_size" -> "8", ...),
  // compared key by key so a refusal can name the key that differs.
  std::map<std::string, std::string> config;
  std::map<std::string, FileEntry> files;
  std::map<std::string, TensorEntry> tensors;
};

// Compact but stable JSON (keys sorted): the same Index always gives the same bytes.
std::string index_to_json(const Index& index);

// Parses and validates: version, every field's type, dtypes known, chunk boxes inside the
// global shape with byte ranges matching box size x element size, every chunk's file listed in
// `files`, and the chunks of each tensor covering it exactly once. Anything wrong: InputError
// naming `path` and the field ("index.json: tensors.\"model/x\".chunks[1].offset: ...").
Index parse_index(const std::string& json_text, const std::string& path);

using gt::shape_text;  // common/text.hpp

// Bytes per element of a safetensors dtype; InputError(where, ...) for an unknown one.
int64_t dtype_size(const std::string& dtype, const std::string& where);

}  // namespace gt::ckpt
