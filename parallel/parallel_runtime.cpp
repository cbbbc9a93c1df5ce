#include "parallel/parallel_runtime.hpp"

#include "comm/comm_backend.hpp"
#include "comm/local_communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/world.hpp"
#include "layout/partition.hpp"

namespace gt {

namespace {
bool formed = false;
}  // namespace

bool parallel_runtime_formed() { return formed; }

ParallelRuntime make_parallel_runtime(const ParallelismSection& parallelism, const World& world,
                                      const StageWeights& weights) {
  ParallelRuntime rt;
  rt.shape = {static_cast<int>(parallelism.dp), static_cast<int>(parallelism.pp), static_cast<int>(parallelism.tp)};
  rt.world_rank = world.rank();
  rt.coord = coord_of(rt.shape, world.rank());
  if (world.under_mpi()) {
    rt.host.world = MpiCommunicator::world();
    rt.world = make_world_communicator(parallelism.backend, parallelism.timeout_s);
  } else {
    rt.host.world = std::make_unique<LocalCommunicator>();
    rt.world = std::make_unique<LocalCommunicator>();
  }
  rt.host.world->set_timeout_seconds(parallelism.timeout_s);
  rt.world->set_timeout_seconds(parallelism.timeout_s);
  const SplitArgs d = dp_split(rt.shape, rt.world_rank), p = pp_split(rt.shape, rt.world_rank),
                  t = tp_split(rt.shape, rt.world_rank);
  rt.dp = rt.world->split(d.color, d.key);
  rt.pp = rt.world->split(p.color, p.key);
  rt.tp = rt.world->split(t.color, t.key);
  rt.host.dp = rt.host.world->split(d.color, d.key);
  rt.host.pp = rt.host.world->split(p.color, p.key);
  rt.host.tp = rt.host.world->split(t.color, t.key);
  // The ends of each pipeline form a group of two (one when pp = 1); middle stages a group each.
  const bool end = rt.first_stage() || rt.last_stage();
  rt.ends = rt.world->split(end ? p.color : rt.world->size() + rt.world_rank, rt.coord.pp);

  rt.partition = parallelism.partition.empty() ? balanced_partition(weights, rt.shape.pp) : parallelism.partition;
  rt.first_layer = rt.partition[rt.coord.pp];
  rt.last_layer = rt.last_stage() ? static_cast<int64_t>(weights.layers.size()) : rt.partition[rt.coord.pp + 1];
  formed = true;
  return rt;
}

ParallelRuntime single_process_runtime(int64_t n_layers) {
  ParallelRuntime rt;
  rt.world = std::make_unique<LocalCommunicator>();
  rt.dp = std::make_unique<LocalCommunicator>();
  rt.pp = std::make_unique<LocalCommunicator>();
  rt.tp = std::make_unique<LocalCommunicator>();
  rt.ends = std::make_unique<LocalCommunicator>();
  rt.host.world = std::make_unique<LocalCommunicator>();
  rt.host.dp = std::make_unique<LocalCommunicator>();
  rt.host.pp = std::make_unique<LocalCommunicator>();
  rt.host.tp = std::make_unique<LocalCommunicator>();
  rt.partition = {0};
  rt.last_layer = n_layers;
  return rt;
}

}  // namespace gt
