#pragma once
// The process grid: world = dp x pp x tp ranks, each with a coordinate on the three axes.
// Pure arithmetic, no MPI: the runtime forms each group with one Communicator::split per
// axis, passing the {color, key} computed here, and the tests check the groups without mpirun.
//
// Rank order: tp fastest, then pp, then dp.
//   rank = (dp_i * pp + pp_i) * tp + tp_i
// Tensor-parallel peers exchange the most data (every layer, forward and backward), so they
// get adjacent ranks, which mpirun places on the same node first. For dp=2, pp=2, tp=2:
//
//   rank | dp pp tp
//   -----+---------
//     0  |  0  0  0
//     1  |  0  0  1
//     2  |  0  1  0
//     3  |  0  1  1
//     4  |  1  0  0
//     5  |  1  0  1
//     6  |  1  1  0
//     7  |  1  1  1
//
// Groups: the dp group of a rank is the ranks with its pp and tp (its replicas, which
// all-reduce gradients); the pp group those with its dp and tp (the stages of its pipeline,
// rank in group = stage); the tp group those with its dp and pp (the shards of its layers).

namespace gt {

struct GridShape {
  int dp = 1, pp = 1, tp = 1;
  int world() const { return dp * pp * tp; }
};

struct GridCoord {
  int dp = 0, pp = 0, tp = 0;
  bool operator==(const GridCoord& o) const { return dp == o.dp && pp == o.pp && tp == o.tp; }
};

// Rank <-> coordinate in the order above. Out-of-range arguments are bugs (std::logic_error).
GridCoord coord_of(const GridShape& g, int rank);
int rank_of(const GridShape& g, const GridCoord& c);

// What Communicator::split(color, key) takes: ranks with equal color form one group, ordered
// by key. Keys are the rank's position on the group's axis, so the rank within the dp group is
// the replica index, within the pp group the stage, within the tp group the shard.
struct SplitArgs {
  int color = 0, key = 0;
};
SplitArgs dp_split(const GridShape& g, int rank);  // color: (pp, tp); key: dp
SplitArgs pp_split(const GridShape& g, int rank);  // color: (dp, tp); key: pp
SplitArgs tp_split(const GridShape& g, int rank);  // color: (dp, pp); key: tp

}  // namespace gt
