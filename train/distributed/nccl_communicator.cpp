// Communicator for CUDA tensors over NCCL. Built when the CUDA toolkit and NCCL are found; otherwise asking
// for it is a clear error.
#include <torch/torch.h>

#include "core/error.h"
#include "train/distributed/communicator.h"

#ifdef SINKLM_WITH_NCCL
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <thread>

#include "train/distributed/check_call.h"
#endif

namespace sinklm {

#ifdef SINKLM_WITH_NCCL
namespace {

ncclDataType_t nccl_type(const torch::Tensor& t) {
  SINKLM_ASSERT(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32);
  return ncclFloat32;
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const DistributedContext& context, torch::Device device, double timeout_s)
      : Communicator(context, timeout_s), device_(device) {
    c10::cuda::CUDAGuard guard(device_);
    ncclUniqueId id;
    if (context.is_root()) SINKLM_CHECK(ncclGetUniqueId(&id));
    context.broadcast_bytes(&id, sizeof id, 0);
    SINKLM_CHECK(ncclCommInitRank(&comm_, context.world_size(), id, context.rank()));
    SINKLM_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SINKLM_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    SINKLM_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }

  // Reverse order of creation, and only once the stream is idle: the communicator may still have kernels
  // queued on stream_ (a job ending right after a collective), and NCCL frees its buffers in destroy.
  // Errors are ignored: a destructor runs during unwinding too, and the process is ending anyway.
  ~NcclCommunicator() override {
    c10::cuda::CUDAGuard guard(device_);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(done_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }

  void start_allreduce_sum(const torch::Tensor& buffer) override {
    follow_compute_stream();
    SINKLM_CHECK(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), buffer.numel(), nccl_type(buffer), ncclSum, comm_,
                               stream_));
  }

  void wait_all(const char* what) override {
    SINKLM_CHECK(cudaEventRecord(done_, stream_));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      cudaError_t state = cudaEventQuery(done_);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) SINKLM_CHECK(state);
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm_);
        context_.abort_job(str("rank ", context_.rank(), " waited ", timeout_s_, " s for ", what,
                               " (NCCL); a peer rank has died or hangs"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    SINKLM_CHECK(cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream(device_.index()).stream(), done_, 0));
  }

  void reduce_scatter_sum(const torch::Tensor& input, const torch::Tensor& output) override {
    follow_compute_stream();
    SINKLM_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), nccl_type(input), ncclSum,
                                   comm_, stream_));
    wait_all("gradient reduce-scatter");
  }

  void all_gather(const torch::Tensor& shard, const torch::Tensor& output) override {
    follow_compute_stream();
    SINKLM_CHECK(ncclAllGather(shard.data_ptr(), output.data_ptr(), shard.numel(), nccl_type(shard), comm_, stream_));
    wait_all("parameter all-gather");
  }

 private:
  // Communication must see every kernel the compute stream queued before it.
  void follow_compute_stream() {
    SINKLM_CHECK(cudaEventRecord(ready_, at::cuda::getCurrentCUDAStream(device_.index()).stream()));
    SINKLM_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  }

  torch::Device device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const DistributedContext& context, torch::Device device,
                                                     double timeout_s) {
  return std::make_unique<NcclCommunicator>(context, device, timeout_s);
}
#else
std::unique_ptr<Communicator> make_nccl_communicator(const DistributedContext&, torch::Device, double) {
  fail("this sinklm was built without NCCL; rebuild with the CUDA toolkit and NCCL to train on GPUs");
}
#endif

}  // namespace sinklm
