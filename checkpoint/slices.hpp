#pragma once
// Resharding arithmetic: which parts of which saved chunks make up a box a rank wants. Pure
// functions on boxes, torch-free, so that the layouts a test cannot run are still covered.
#include <cstdint>
#include <vector>

#include "checkpoint/index.hpp"

namespace gt::ckpt {

struct Box {
  std::vector<int64_t> offset, shape;
};

// One piece of a wanted box: the intersection of a saved chunk with it, in three coordinates.
struct Piece {
  size_t chunk = 0;         // index into TensorEntry::chunks
  Box global;               // the intersection, in global coordinates
  std::vector<int64_t> in_chunk;  // its offset within the chunk's box
  std::vector<int64_t> in_want;   // its offset within the wanted box
};

// The pieces of `want` (inside entry.shape) that the entry's chunks hold, in chunk order. They
// cover `want` exactly once when the entry is valid (parse_index checks the chunks tile the
// tensor); `want` outside the tensor is a std::logic_error (a bug, not bad input).
std::vector<Piece> pieces_of(const TensorEntry& entry, const Box& want);

// The box a tensor-parallel rank holds of a tensor of `shape` split evenly along `dim` into
// `parts` (dim < 0: not split, the whole tensor). std::logic_error when it does not divide.
Box tp_box(const std::vector<int64_t>& shape, int dim, int part, int parts);

}  // namespace gt::ckpt
