// What a GPU run depends on outside sinklm: the CUDA runtime this build links (LibTorch's), the newest CUDA the
// installed NVIDIA driver supports and the driver's release, and NCCL's version. `sinklm info` prints them; a run
// on CUDA checks them first, so a driver too old for the runtime is named instead of "no CUDA device".
//
// A CUDA runtime of major version M needs a driver that supports M (minor versions are compatible within a
// major): CUDA 13.x a driver >= 580, 12.x >= 525, 11.x >= 450. The pinned PyPI wheel is CUDA 13.0; a cluster on
// an older driver builds against a CUDA 12.x LibTorch (SINKLM_LIBTORCH in scripts/setup.sh, docs/training.md).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace sinklm {

struct CudaVersions {
  int runtime = 0;             // cudaRuntimeGetVersion, 1000 * major + 10 * minor (13000 = 13.0); 0: CPU-only build
  int driver = 0;              // cudaDriverGetVersion, the same encoding; 0: no NVIDIA driver loaded
  std::string driver_release;  // e.g. "580.65.06" (/proc/driver/nvidia/version); "" when unknown
  int nccl = 0;                // ncclGetVersion (22703 = 2.27.3); 0: built without NCCL
};

CudaVersions cuda_versions();

std::string cuda_version_text(int version);  // 13000 -> "13.0", 0 -> "none"
std::string nccl_version_text(int version);  // 22703 -> "2.27.3", 0 -> "none"
// The oldest driver release that runs a runtime's major version (13: 580, 12: 525, 11: 450); 0 when unknown.
int minimum_driver_release(int runtime);
// Empty when the driver runs this runtime (or there is no runtime or no driver); else what is wrong, naming the
// driver's and the runtime's versions, and what to do about it.
std::string driver_mismatch(const CudaVersions& v);

nlohmann::json to_json(const CudaVersions& v);

}  // namespace sinklm
