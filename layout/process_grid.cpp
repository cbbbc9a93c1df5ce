#include "layout/process_grid.hpp"

#include <stdexcept>


namespace gt {
namespace {

void check_shape(const GridShape& g) {
  if (g.dp < 1 || g.pp < 1 || g.tp < 1) throw std::logic_error("process grid: every axis needs at least 1 rank");
}

void check_rank(const GridShape& g, int rank) {
  check_shape(g);
  if (rank < 0 || rank >= g.world())
    throw std::logic_error("process grid: rank " + std::to_string(rank) + " outside a world of " +
                           std::to_string(g.world()));
}

}  // namespace

GridCoord coord_of(const GridShape& g, int rank) {
  check_rank(g, rank);
  return {rank / (g.pp * g.tp), (rank / g.tp) % g.pp, rank % g.tp};
}

int rank_of(const GridShape& g, const GridCoord& c) {
  check_shape(g);
  if (c.dp < 0 || c.dp >= g.dp || c.pp < 0 || c.pp >= g.pp || c.tp < 0 || c.tp >= g.tp)
    throw std::logic_error("process grid: coordinate outside the grid");
  return (c.dp * g.pp + c.pp) * g.tp + c.tp;
}

// The colour numbers the two fixed coordinates in the same mixed-radix way as the rank, so
// colours are dense (0 .. world/axis-1) and distinct groups never share one.
SplitArgs dp_split(const GridShape& g, int rank) {
  GridCoord c = coord_of(g, rank);
  return {c.pp * g.tp + c.tp, c.dp};
}

SplitArgs pp_split(const GridShape& g, int rank) {
  GridCoord c = coord_of(g, rank);
  return {c.dp * g.tp + c.tp, c.pp};
}

SplitArgs tp_split(const GridShape& g, int rank) {
  GridCoord c = coord_of(g, rank);
  return {c.dp * g.pp + c.pp, c.tp};
}

}  // namespace gt
