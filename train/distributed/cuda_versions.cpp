#include "train/distributed/cuda_versions.h"

#include <fstream>
#include <regex>

#include "core/error.h"
#include "train/distributed/check_call.h"

namespace sinklm {
namespace {

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..." -> "580.65.06".
std::string driver_release_from_proc() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  std::smatch match;
  return std::regex_search(line, match, std::regex(R"(Kernel Module\s+([0-9]+(\.[0-9]+)+))")) ? match[1].str() : "";
}

}  // namespace

CudaVersions cuda_versions() {
  CudaVersions v;
#if defined(SINKLM_WITH_CUDA) || defined(SINKLM_WITH_NCCL)
  SINKLM_CHECK(cudaRuntimeGetVersion(&v.runtime));
  SINKLM_CHECK(cudaDriverGetVersion(&v.driver));  // 0 and success when no driver is loaded
#endif
#ifdef SINKLM_WITH_NCCL
  SINKLM_CHECK(ncclGetVersion(&v.nccl));
#endif
  v.driver_release = driver_release_from_proc();
  return v;
}

std::string cuda_version_text(int version) {
  return version == 0 ? "none" : str(version / 1000, ".", version % 1000 / 10);
}

std::string nccl_version_text(int version) {
  // NCCL >= 2.9 encodes 10000 * major + 100 * minor + patch; older releases 1000 * major + 100 * minor + patch.
  if (version == 0) return "none";
  if (version >= 10000) return str(version / 10000, ".", version % 10000 / 100, ".", version % 100);
  return str(version / 1000, ".", version % 1000 / 100, ".", version % 100);
}

int minimum_driver_release(int runtime) {
  switch (runtime / 1000) {
    case 13: return 580;
    case 12: return 525;
    case 11: return 450;
    default: return 0;
  }
}

std::string driver_mismatch(const CudaVersions& v) {
  if (v.runtime == 0 || v.driver == 0 || v.driver / 1000 >= v.runtime / 1000) return "";
  const std::string release = v.driver_release.empty() ? "" : " (release " + v.driver_release + ")";
  const int needed = minimum_driver_release(v.runtime);
  return str("the NVIDIA driver", release, " supports CUDA up to ", cuda_version_text(v.driver),
             ", but this build's CUDA runtime is ", cuda_version_text(v.runtime),
             needed ? str(", which needs a driver >= ", needed) : std::string(),
             "; install a newer driver, or rebuild against a LibTorch for CUDA ", v.driver / 1000,
             ".x (SINKLM_LIBTORCH=... scripts/setup.sh; docs/training.md, \"The cluster's own CUDA\")");
}

nlohmann::json to_json(const CudaVersions& v) {
  return {{"cuda_runtime", cuda_version_text(v.runtime)}, {"cuda_driver", cuda_version_text(v.driver)},
          {"driver_release", v.driver_release.empty() ? nlohmann::json() : nlohmann::json(v.driver_release)},
          {"nccl", nccl_version_text(v.nccl)}, {"driver_fits", driver_mismatch(v).empty()}};
}

}  // namespace sinklm
