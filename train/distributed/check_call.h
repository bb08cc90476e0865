// The one checking macro for every MPI, NCCL and CUDA call: SINKLM_CHECK(call). A failure throws
// InternalError with file:line, the call's text and the library's own error string.
#pragma once
#include <mpi.h>

#include <string>

#if defined(SINKLM_WITH_CUDA) || defined(SINKLM_WITH_NCCL)
#include <cuda_runtime_api.h>
#endif
#ifdef SINKLM_WITH_NCCL
#include <nccl.h>
#endif

namespace sinklm {

[[noreturn]] void throw_call_failure(const char* library, const std::string& detail, const char* call, const char* file,
                                     int line);

inline void check_call_result(int mpi_status, const char* call, const char* file, int line) {
  if (mpi_status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(mpi_status, text, &length);
  throw_call_failure("MPI", std::string(text, length), call, file, line);
}

#ifdef SINKLM_WITH_NCCL
inline void check_call_result(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess) throw_call_failure("NCCL", ncclGetErrorString(status), call, file, line);
}
#endif
#if defined(SINKLM_WITH_CUDA) || defined(SINKLM_WITH_NCCL)
inline void check_call_result(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_call_failure("CUDA", cudaGetErrorString(status), call, file, line);
}
#endif

}  // namespace sinklm

#define SINKLM_CHECK(call) ::sinklm::check_call_result((call), #call, __FILE__, __LINE__)
