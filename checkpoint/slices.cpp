#include "checkpoint/slices.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gt::ckpt {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::vector<Piece> pieces_of(const TensorEntry& entry, const Box& want) {
  const size_t dims = entry.shape.size();
  bool inside = want.offset.size() == dims && want.shape.size() == dims;
  for (size_t d = 0; inside && d < dims; ++d)
    inside = want.offset[d] >= 0 && want.shape[d] >= 0 && want.offset[d] + want.shape[d] <= entry.shape[d];
  if (!inside)
    throw std::logic_error("pieces_of: box at " + ints_str(want.offset) + " of shape " + ints_str(want.shape) +
                           " is not inside a tensor of shape " + ints_str(entry.shape));

  std::vector<Piece> pieces;
  for (size_t i = 0; i < entry.chunks.size(); ++i) {
    const Chunk& c = entry.chunks[i];
    Piece p;
    p.chunk = i;
    bool empty = false;
    for (size_t d = 0; d < dims && !empty; ++d) {
      const int64_t lo = std::max(c.offset[d], want.offset[d]);
      const int64_t hi = std::min(c.offset[d] + c.shape[d], want.offset[d] + want.shape[d]);
      empty = lo >= hi;
      p.global.offset.push_back(lo);
      p.global.shape.push_back(hi - lo);
      p.in_chunk.push_back(lo - c.offset[d]);
      p.in_want.push_back(lo - want.offset[d]);
    }
    // A 0-d tensor has no dimensions to miss in: its one chunk always holds the element.
    if (!empty) pieces.push_back(std::move(p));
  }
  return pieces;
}

Box tp_box(const std::vector<int64_t>& shape, int dim, int part, int parts) {
  Box box{std::vector<int64_t>(shape.size(), 0), shape};
  if (dim < 0) return box;
  if (size_t(dim) >= shape.size() || parts < 1 || part < 0 || part >= parts || shape[size_t(dim)] % parts != 0)
    throw std::logic_error("tp_box: cannot take part " + std::to_string(part) + " of " + std::to_string(parts) +
                           " along dim " + std::to_string(dim) + " of shape " + ints_str(shape));
  const int64_t step = shape[size_t(dim)] / parts;
  box.offset[size_t(dim)] = step * part;
  box.shape[size_t(dim)] = step;
  return box;
}

}  // namespace gt::ckpt
