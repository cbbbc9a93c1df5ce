#include "comm/world.hpp"

#include <mpi.h>

#include <cstdlib>

namespace gt {

World::World(int* argc, char*** argv) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE")) return;
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) MPI_Init(argc, argv);
  mpi_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

void World::barrier() const {
  if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
}

void World::abort(int code) const {
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

World::~World() {
  if (!mpi_) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

}  // namespace gt
