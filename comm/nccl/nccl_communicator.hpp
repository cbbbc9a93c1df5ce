#pragma once
// The Communicator over NCCL for CUDA tensors. It is built as a shared library of its own,
// libgraphtune_comm_nccl.so, and only where CMake found CUDA and NCCL. Nothing links it:
// make_world_communicator("nccl") (comm/comm_backend.hpp) dlopens it, so a CPU-only
// installation never needs CUDA's runtime or NCCL. This header is the whole contract between
// the two sides: one C-linkage factory, declared without CUDA, NCCL or MPI headers so that
// the loader can name its type.
//
// How it behaves, where it differs from the MPI backend:
// - Setup as llm.c does: rank 0 creates the NCCL id, MPI_Bcast shares it; each rank takes GPU
//   (local rank % device count), the local rank from OMPI_COMM_WORLD_LOCAL_RANK (or MPI's
//   shared-memory split elsewhere). Tensors must be contiguous and on that GPU.
// - Kernels run on a CUDA stream the communicator owns, not blocking: each launch waits for
//   an event recorded on the caller's current stream (the tensors are complete), and a Work's
//   wait() makes the caller's current stream wait for the launch's event. The host does not
//   wait (barrier() alone blocks it), so compute goes on while NCCL's kernels run, as with
//   torch.distributed's NCCL work. Each tensor is recorded on the stream with the caching
//   allocator, so its memory is not reused before NCCL is done with it.
// - Group communicators are split from their parent with ncclCommSplit.
// - NCCL has no tags; messages between a pair match in the order they are launched, and a
//   send finishes only once its receiver has posted the receive. isend and irecv launch at
//   once, each a group of its own; batch_isend_irecv launches its ops together in one
//   ncclGroupStart/ncclGroupEnd, so two ranks sending to each other do so in one group. The
//   pipeline schedules are built that way, and their simulator proves them against exactly
//   these semantics (layout/schedule_sim.hpp).
// - Deadlines: init, split and every enqueue poll NCCL under the job's deadline. A watchdog
//   thread follows every launch in flight, whether or not a host thread waits for it, and on
//   a launch past the deadline, an NCCL error (a peer that died) or a CUDA error prints one
//   line naming the rank, its host and GPU, the operation and the peer,
//     graphtune: error: rank R (HOST, cuda:D): OP with peer P timed out after T s (the peer never answered)
//   then ncclCommAbort and MPI_Abort end the job. Destroying the communicator first waits for
//   what is in flight, under the same deadline.
// - Sums: float32/64, float16, bfloat16 (unlike MPI), int8, uint8, int32, int64.
// - A Work refers to its communicator: wait for it before the communicator is destroyed.
#include <cstddef>

namespace gt {
class Communicator;
}

extern "C" {
// mpi_comm points at the MPI_Comm (MPI_COMM_WORLD) whose ranks the NCCL communicator mirrors:
// a pointer to it, because MPI_Comm is a pointer in OpenMPI and an int in MPICH. Collective
// over that communicator. Returns a new Communicator the caller owns, or null with a
// one-line reason in `error` (no GPU or driver, MPI not initialised, an NCCL error); it never
// throws across this boundary.
gt::Communicator* graphtune_nccl_world(const void* mpi_comm, double timeout_seconds, char* error,
                                       std::size_t error_size);
}

namespace gt {
using NcclWorldFactory = decltype(&graphtune_nccl_world);
inline constexpr const char* kNcclWorldSymbol = "graphtune_nccl_world";
inline constexpr const char* kNcclLibraryName = "libgraphtune_comm_nccl.so";
}  // namespace gt
