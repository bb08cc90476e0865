#include "train/distributed/distributed_context.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "train/distributed/check_call.h"

namespace sinklm {

void throw_call_failure(const char* library, const std::string& detail, const char* call, const char* file, int line) {
  throw InternalError(str(file, ":", line, ": ", library, " call failed: ", call, ": ", detail));
}

DistributedContext::DistributedContext(std::string command) : command_(std::move(command)) {
  int provided = 0;
  SINKLM_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_SERIALIZED)
    fail("the MPI library provides thread level ", provided, "; sinklm needs at least MPI_THREAD_SERIALIZED");
  SINKLM_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  SINKLM_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  MPI_Comm node;
  SINKLM_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  SINKLM_CHECK(MPI_Comm_rank(node, &local_rank_));
  SINKLM_CHECK(MPI_Comm_size(node, &local_size_));
  SINKLM_CHECK(MPI_Comm_free(&node));
}

DistributedContext::~DistributedContext() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void wait_request(const DistributedContext& context, void* request, const char* what, double timeout_s) {
  auto* req = static_cast<MPI_Request*>(request);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    int done = 0;
    SINKLM_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline)
      context.abort_job(str("rank ", context.rank(), " waited ", timeout_s, " s for ", what,
                            "; a peer rank has died or hangs (see train.collective_timeout_s)"));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

void DistributedContext::allreduce_sum(std::vector<double>& values, const char* what, double timeout_s) const {
  if (world_size_ == 1) return;
  MPI_Request request;
  SINKLM_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                              MPI_COMM_WORLD, &request));
  wait_request(*this, &request, what, timeout_s);
}

void DistributedContext::barrier(const char* what, double timeout_s) const {
  if (world_size_ == 1) return;
  MPI_Request request;
  SINKLM_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &request));
  wait_request(*this, &request, what, timeout_s);
}

void DistributedContext::broadcast_bytes(void* data, size_t size, int root) const {
  if (world_size_ == 1) return;
  SINKLM_CHECK(MPI_Bcast(data, static_cast<int>(size), MPI_BYTE, root, MPI_COMM_WORLD));
}

void DistributedContext::abort_job(const std::string& message) const {
  std::fprintf(stderr, "sinklm %s: error: %s\n", command_.c_str(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  _exit(3);
}

}  // namespace sinklm
