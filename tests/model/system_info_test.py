#!/usr/bin/env python3
"""`sinklm info` without a path reports what this build runs with (label e2e), checked against the libraries
themselves: the CUDA runtime and NCCL versions equal what the shared libraries the binary loads (ldd) answer
through ctypes (cudaRuntimeGetVersion, ncclGetVersion), LibTorch's version equals the torch package's whose
libtorch_cpu.so it loads, and on a machine without an NVIDIA driver the driver is reported as none and the
command succeeds. Exit 77 (skipped) for a CPU-only build (no CUDA runtime linked)."""
import ctypes
import json
import re
import subprocess

from sinklm_test import BIN, check, finish, run_sinklm, skip


def loaded_libraries():
    """name -> path of the shared libraries the binary loads (ldd)."""
    out = subprocess.run(["ldd", BIN], capture_output=True, text=True, check=True).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\S+) => (\S+)", out, re.M)}


def library_version(path, function):
    value = ctypes.c_int(0)
    status = getattr(ctypes.CDLL(path), function)(ctypes.byref(value))
    return value.value if status == 0 else None


def main():
    libraries = loaded_libraries()
    cudart = next((p for n, p in libraries.items() if n.startswith("libcudart.so")), None)
    if cudart is None:
        skip("a CPU-only build: no CUDA runtime linked")
    info = json.loads(run_sinklm("info", "--json").stdout)
    runtime = library_version(cudart, "cudaRuntimeGetVersion")
    want = f"{runtime // 1000}.{runtime % 1000 // 10}"
    check(info.get("cuda_runtime") == want, "the CUDA runtime is the one libcudart reports", f"{info} vs {want} ({cudart})")
    nccl = next((p for n, p in libraries.items() if n.startswith("libnccl.so")), None)
    if nccl:
        v = library_version(nccl, "ncclGetVersion")
        want = f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
        check(info.get("nccl") == want, "the NCCL version is the one libnccl reports", f"{info.get('nccl')} vs {want}")
    torch_cpu = next((p for n, p in libraries.items() if n.startswith("libtorch_cpu.so")), "")
    try:
        import torch
        if torch_cpu.startswith(torch.__path__[0]):
            check(info.get("libtorch") == torch.__version__.split("+")[0], "LibTorch's version is the loaded wheel's",
                  f"{info.get('libtorch')} vs {torch.__version__}")
    except ImportError:
        pass
    driver = library_version(cudart, "cudaDriverGetVersion")
    if driver == 0:
        check(info.get("cuda_driver") == "none" and info.get("driver_fits") is True,
              "no NVIDIA driver: reported as none, and nothing to refuse", str(info))
    text = run_sinklm("info", expect=None)
    check(text.returncode == (0 if info.get("driver_fits") else 1) and "cuda runtime" in text.stdout,
          "the text form prints the same and exits by whether the driver fits", text.stdout + text.stderr)
    finish()


if __name__ == "__main__":
    main()
