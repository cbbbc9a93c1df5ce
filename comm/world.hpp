#pragma once
// Which rank this process is. Under mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE) MPI is
// initialised and the rank comes from MPI; started alone, the process is rank 0 of 1 and
// never touches MPI, so single-process commands start fast and run anywhere.
namespace gt {

class World {
 public:
  World(int* argc, char*** argv);
  ~World();  // finalises MPI if this object initialised it
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool under_mpi() const { return mpi_; }
  // Every rank waits here for the others (nothing without MPI): for work one rank does for all
  // before the ranks have formed their groups.
  void barrier() const;
  // Ends every rank of the job now (MPI_Abort) with `code`; without MPI, exits this process.
  // For a failure on some ranks only, where the others would wait in a collective.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
};

}  // namespace gt
