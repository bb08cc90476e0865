// Every collective the trainer uses. Tensor collectives on float32 tensors of one device: MPI for CPU
// tensors, NCCL for CUDA tensors (the NCCL id is broadcast over MPI and communication runs on its own CUDA
// stream, ordered after the compute stream). Host-side collectives of small values (losses, norms) and
// barriers always go over MPI. Every wait has a deadline: a dead or hung peer aborts the job instead of
// hanging it. A new transport is a subclass here plus a case in make_communicator().
#pragma once
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "train/distributed/distributed_context.h"

namespace sinklm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  int rank() const { return context_.rank(); }
  int world_size() const { return context_.world_size(); }
  bool is_root() const { return context_.is_root(); }

  // In-place sum of small host values over ranks; `what` names it if a peer never arrives.
  void allreduce_sum_host(std::vector<double>& values, const char* what) const {
    context_.allreduce_sum(values, what, timeout_s_);
  }
  void barrier(const char* what) const { context_.barrier(what, timeout_s_); }

  // Starts an in-place sum of `buffer` (contiguous float32) over ranks and returns at once.
  virtual void start_allreduce_sum(const torch::Tensor& buffer) = 0;
  // Completes every started operation (on CUDA: the compute stream waits for them).
  virtual void wait_all(const char* what) = 0;
  // Sum of `input` over ranks; this rank's slice [rank * n, (rank + 1) * n) lands in `output` (n elements).
  virtual void reduce_scatter_sum(const torch::Tensor& input, const torch::Tensor& output) = 0;
  // Concatenation of every rank's `shard` into `output` (world_size * shard.numel() elements).
  virtual void all_gather(const torch::Tensor& shard, const torch::Tensor& output) = 0;

 protected:
  Communicator(const DistributedContext& context, double timeout_s) : context_(context), timeout_s_(timeout_s) {}
  const DistributedContext& context_;
  double timeout_s_;
};

// `choice` is train.communicator: auto | mpi | nccl (the schema has checked it).
std::unique_ptr<Communicator> make_communicator(const DistributedContext& context, torch::Device device,
                                                double timeout_s, const std::string& choice);

}  // namespace sinklm
