#pragma once
// The MPI_COMM_WORLD rank of every member of a communicator, in its rank order: errors name the
// ranks mpirun and the logs use, even on a sub-communicator. Header-only, so the NCCL backend's
// own shared library shares it with the MPI backend.
#include <mpi.h>

#include <vector>

namespace gt {

inline std::vector<int> world_ranks_of(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  MPI_Group group, world_group;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> local(size), world(size);
  for (int i = 0; i < size; ++i) local[i] = i;
  MPI_Group_translate_ranks(group, size, local.data(), world_group, world.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  return world;
}

}  // namespace gt
