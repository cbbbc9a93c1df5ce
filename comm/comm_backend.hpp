#pragma once
// Picks the Communicator for [parallelism].backend over MPI_COMM_WORLD:
//   mpi   MpiCommunicator (CPU tensors), always built;
//   nccl  the NCCL backend (CUDA tensors), a shared library loaded here with dlopen, so
//         graphtune itself never links CUDA or NCCL and runs where neither is installed.
// The NCCL library is looked for at $GRAPHTUNE_NCCL_LIBRARY if set (and only there), else
// next to the executable, else at the path it was built to, else by plain name (the loader's
// search path). When it is absent, cannot be loaded (no CUDA runtime) or finds no GPU, this
// fails with one line, "[parallelism].backend: nccl: <why>" (gt::InputError, exit 2). MPI must
// already be initialised (gt::World).
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "config/names.hpp"

namespace gt {

std::unique_ptr<Communicator> make_world_communicator(Backend backend, double timeout_seconds);

}  // namespace gt
