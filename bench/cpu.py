"""The CPU a benchmark ran on, for its report: model name, vector extensions, and lector's cap.

Every speed figure in BENCHMARKS.md names the CPU it came from; the benches print `line()` and put
`describe()` in their JSON. `LECTOR_SIMD=avx2` caps lector's kernels at AVX2 on a wider CPU, so the line
says when it is set; benches that call `cap_peers()` then cap their PyTorch peers at AVX2 too (ATen's
kernels, MKL and oneDNN, by their own environment variables), so both sides run what an AVX2-only CPU runs.
"""

import os

# What caps PyTorch's CPU kernels at AVX2: ATen's dispatch, MKL's (its BLAS), oneDNN's.
PEER_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def cap_peers():
    """Under LECTOR_SIMD=avx2, caps the PyTorch peers this process starts at AVX2 as well; returns the
    variables set (empty otherwise)."""
    if (os.environ.get("LECTOR_SIMD") or "").strip().lower() not in ("avx2", "x86-64-v3"):
        return {}
    os.environ.update(PEER_AVX2)
    return dict(PEER_AVX2)

# The extensions that change which kernels run, by /proc/cpuinfo flag.
FLAGS = {
    "avx2": "AVX2",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX-512 VNNI",
    "avx_vnni": "AVX-VNNI",
    "avx512_bf16": "AVX-512 BF16",
    "amx_bf16": "AMX",
}


def describe():
    """{'model', 'cpus', 'flags': {flag: bool}, 'lector_simd'} for this machine."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {
        "model": model,
        "cpus": os.cpu_count(),
        "flags": {flag: flag in flags for flag in FLAGS},
        "lector_simd": os.environ.get("LECTOR_SIMD") or None,
    }


def line(info=None):
    """One readable line: 'Intel(R) Xeon(R) Processor, 2 CPUs: AVX2 yes, AVX-512 yes, ...'."""
    info = info or describe()
    have = ", ".join(f"{name} {'yes' if info['flags'][flag] else 'no'}" for flag, name in FLAGS.items())
    cap = f"; lector capped by LECTOR_SIMD={info['lector_simd']}" if info["lector_simd"] else ""
    if cap and all(os.environ.get(k) == v for k, v in PEER_AVX2.items()):
        cap += " (PyTorch peers capped at AVX2 too)"
    return f"{info['model']}, {info['cpus']} CPUs: {have}{cap}"


if __name__ == "__main__":
    print(line())
