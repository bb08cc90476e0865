// Collectives on float32 tensors of one device: MPI for CPU tensors, NCCL for CUDA tensors (the NCCL id is
// broadcast over MPI and communication runs on its own CUDA stream, ordered after the compute stream).
// Every wait has a deadline: a dead or hung peer aborts the job instead of hanging it.
#pragma once
#include <torch/types.h>

#include <memory>

#include "train/distributed_context.h"

namespace sinklm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  // Starts an in-place sum of `buffer` (contiguous float32) over ranks and returns at once.
  virtual void start_allreduce_sum(const torch::Tensor& buffer) = 0;
  // Completes every started operation (on CUDA: the compute stream waits for them).
  virtual void wait_all(const char* what) = 0;
  // Sum of `input` over ranks; this rank's slice [rank * n, (rank + 1) * n) lands in `output` (n elements).
  virtual void reduce_scatter_sum(const torch::Tensor& input, const torch::Tensor& output) = 0;
  // Concatenation of every rank's `shard` into `output` (world_size * shard.numel() elements).
  virtual void all_gather(const torch::Tensor& shard, const torch::Tensor& output) = 0;
};

std::unique_ptr<Communicator> make_communicator(const DistributedContext& context, torch::Device device,
                                                double timeout_s);

}  // namespace sinklm
