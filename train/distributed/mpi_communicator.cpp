// Communicator for CPU tensors over MPI; make_communicator() picks it or the NCCL one.
#include <mpi.h>
#include <torch/torch.h>

#include <vector>

#include "core/error.h"
#include "train/distributed/check_call.h"
#include "train/distributed/communicator.h"

namespace sinklm {

std::unique_ptr<Communicator> make_nccl_communicator(const DistributedContext& context, torch::Device device,
                                                     double timeout_s);

namespace {

float* float_data(const torch::Tensor& t) {
  SINKLM_ASSERT(t.is_contiguous() && t.scalar_type() == torch::kFloat32 && t.device().is_cpu());
  return t.data_ptr<float>();
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(const DistributedContext& context, double timeout_s) : Communicator(context, timeout_s) {}

  void start_allreduce_sum(const torch::Tensor& buffer) override {
    pending_.emplace_back();
    SINKLM_CHECK(MPI_Iallreduce(MPI_IN_PLACE, float_data(buffer), static_cast<int>(buffer.numel()), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD, &pending_.back()));
    // OpenMPI progresses non-blocking collectives only inside MPI calls: nudge the earlier ones along.
    int ignored;
    SINKLM_CHECK(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &ignored, MPI_STATUSES_IGNORE));
  }

  void wait_all(const char* what) override {
    for (auto& request : pending_) wait_request(context_, &request, what, timeout_s_);
    pending_.clear();
  }

  void reduce_scatter_sum(const torch::Tensor& input, const torch::Tensor& output) override {
    SINKLM_ASSERT(input.numel() == output.numel() * context_.world_size());
    MPI_Request request;
    SINKLM_CHECK(MPI_Ireduce_scatter_block(float_data(input), float_data(output), static_cast<int>(output.numel()),
                                           MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request));
    wait_request(context_, &request, "gradient reduce-scatter", timeout_s_);
  }

  void all_gather(const torch::Tensor& shard, const torch::Tensor& output) override {
    SINKLM_ASSERT(output.numel() == shard.numel() * context_.world_size());
    MPI_Request request;
    SINKLM_CHECK(MPI_Iallgather(float_data(shard), static_cast<int>(shard.numel()), MPI_FLOAT, float_data(output),
                                static_cast<int>(shard.numel()), MPI_FLOAT, MPI_COMM_WORLD, &request));
    wait_request(context_, &request, "parameter all-gather", timeout_s_);
  }

 private:
  std::vector<MPI_Request> pending_;
};

}  // namespace

std::unique_ptr<Communicator> make_communicator(const DistributedContext& context, torch::Device device,
                                                double timeout_s, const std::string& choice) {
  if (choice == "nccl" && !device.is_cuda())
    fail("train.communicator = nccl needs CUDA tensors, but this rank trains on ", device.str(),
         "; use train.communicator = auto or mpi on CPUs");
  if (choice == "mpi" && device.is_cuda() && context.world_size() > 1)
    fail("train.communicator = mpi cannot reduce CUDA tensors across ranks; use auto or nccl on GPUs");
  // A world of one never moves a tensor (its host collectives are no-ops), so auto needs no NCCL there.
  const bool nccl = choice == "nccl" || (choice == "auto" && device.is_cuda() && context.world_size() > 1);
  if (nccl) return make_nccl_communicator(context, device, timeout_s);
  return std::make_unique<MpiCommunicator>(context, timeout_s);
}

}  // namespace sinklm
