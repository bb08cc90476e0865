// The process group of a training job, from MPI: rank, world size, and the local rank on this node (which
// picks the GPU). Launched as `mpirun -np N sinklm train ...` or `srun`; a plain `sinklm train` is a
// world of one. Host-side collectives of small values (losses, norms, flags) always go through MPI.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

class DistributedContext {
 public:
  // MPI_Init_thread (MPI_THREAD_MULTIPLE); `command` ("train", "prepare shards") names the job in errors.
  explicit DistributedContext(std::string command);
  ~DistributedContext();  // MPI_Finalize
  DistributedContext(const DistributedContext&) = delete;
  DistributedContext& operator=(const DistributedContext&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_root() const { return rank_ == 0; }

  // In-place sum over ranks, waiting at most `timeout_s` (then the job is aborted, naming `what`).
  void allreduce_sum(std::vector<double>& values, const char* what, double timeout_s) const;
  void barrier(const char* what, double timeout_s) const;
  void broadcast_bytes(void* data, size_t size, int root) const;
  // Ends every rank of the job with a message naming this rank (MPI_Abort); used when a peer is gone.
  [[noreturn]] void abort_job(const std::string& message) const;

 private:
  std::string command_;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
};

// Waits for an MPI request with a deadline; on timeout aborts the job naming this rank and `what`.
void wait_request(const DistributedContext& context, void* request, const char* what, double timeout_s);

}  // namespace sinklm
