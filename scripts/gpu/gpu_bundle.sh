#!/usr/bin/env bash
# Packs a CUDA-capable build (build/) into one relocatable tarball for a GPU machine that has the PyPI torch
# wheel (same version as ours) and the NVIDIA driver, but none of sinklm's other libraries and no network:
# a lent cloud GPU, a fresh node. scripts/gpu/gpu_train_check.sh --bundle FILE unpacks and uses it.
#
# Layout of the tarball (sinklm-gpu/):
#   bin/      sinklm, test_*_gpu (the gtest binaries of `ctest -L gpu`), orterun + orted (mpirun)
#   lib/      every shared library the binaries and Open MPI's plugins need that is neither LibTorch's, CUDA's
#             or NCCL's (the target's torch wheel brings those) nor the C/C++ runtime's
#   openmpi/  Open MPI's plugins (lib/openmpi3), help texts (share) and default parameters (etc): MPI_Init
#             loads plugins from disk, so a singleton run needs them too. env.sh points Open MPI at them.
#   pmix/     PMIx's plugins (Open MPI's process-management layer loads them from its own directory)
#   env.sh    sourced by the check script: LD_LIBRARY_PATH and Open MPI's relocation variables
# usage: scripts/gpu/gpu_bundle.sh [OUT.tar.gz]   (default gpu-bundle/sinklm-gpu.tar.gz)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/gpu-bundle/sinklm-gpu.tar.gz}"
build="$root/build"
[ -x "$build/sinklm" ] || { echo "gpu_bundle: $build/sinklm is missing: run scripts/setup.sh first" >&2; exit 2; }
grep -q SINKLM_WITH_NCCL "$build/build.ninja" ||
  { echo "gpu_bundle: $build was configured without CUDA/NCCL; the bundle would not train on GPUs" >&2; exit 2; }

ompi_pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
ompi_pkgdata=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
ompi_sysconf=$(ompi_info --path sysconfdir --parsable 2>/dev/null | sed -n 's/^path:sysconfdir://p')
pmix_plugins=$(dirname "$(ldconfig -p | awk '/libpmix.so.2 .*x86-64/ {print $NF; exit}')")/pmix2/lib/pmix
[ -d "$ompi_pkglib" ] || { echo "gpu_bundle: cannot find Open MPI's plugin directory (ompi_info)" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir="$stage/sinklm-gpu"
mkdir -p "$dir"/{bin,lib,openmpi/lib,openmpi/share,openmpi/etc,pmix}
cp "$build/sinklm" "$build"/tests/*/test_*_gpu "$(command -v orterun)" "$(command -v orted)" "$dir/bin/"
[ -d "$pmix_plugins" ] && cp -r "$pmix_plugins" "$dir/pmix/plugins"
cp -r "$ompi_pkglib" "$dir/openmpi/lib/openmpi3"
cp -r "$ompi_pkgdata/." "$dir/openmpi/share/"
cp -r "$ompi_sysconf/." "$dir/openmpi/etc/"

# The target brings its own LibTorch/CUDA/NCCL (torch wheel) and C runtime; everything else travels.
keep_library() {
  case "$1" in
    */torch/lib/*|*/nvidia/*|/usr/local/cuda*|*/libcuda.so*) return 1 ;;
    */libc.so*|*/libm.so*|*/libpthread.so*|*/libdl.so*|*/librt.so*|*/ld-linux*|*/libgcc_s.so*|*/libstdc++.so*) return 1 ;;
  esac
  return 0
}
for object in "$dir"/bin/* "$dir"/openmpi/lib/openmpi3/*.so "$dir"/pmix/plugins/*.so; do
  ldd "$object" 2>/dev/null | awk '/=> \// {print $3}'
done | sort -u | while read -r library; do
  if keep_library "$library"; then cp -L "$library" "$dir/lib/"; fi
done

cat >"$dir/env.sh" <<'ENV'
# Sourced with the bundle's directory as $SINKLM_BUNDLE and the target's torch lib directories in
# $SINKLM_TORCH_LIBS (colon-separated).
export PATH="$SINKLM_BUNDLE/bin:$PATH"
export LD_LIBRARY_PATH="$SINKLM_BUNDLE/lib:$SINKLM_TORCH_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Open MPI's installdirs "env" component: where plugins, help texts and default parameters are.
export OPAL_PREFIX="$SINKLM_BUNDLE/openmpi"
export OPAL_PKGLIBDIR="$SINKLM_BUNDLE/openmpi/lib/openmpi3"
export OPAL_LIBDIR="$SINKLM_BUNDLE/lib"
export OPAL_PKGDATADIR="$SINKLM_BUNDLE/openmpi/share"
export OPAL_SYSCONFDIR="$SINKLM_BUNDLE/openmpi/etc"
export OPAL_BINDIR="$SINKLM_BUNDLE/bin"
# PMIx looks for its plugins where it was installed; a machine with another PMIx there must not lend us its own.
export PMIX_MCA_mca_base_component_path="$SINKLM_BUNDLE/pmix/plugins"
export PMIX_MCA_pcompress_base_silence_warning=1
ENV

mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out" sinklm-gpu
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1); $(ls "$dir/lib" | wc -l) libraries)"
