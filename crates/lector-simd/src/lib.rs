//! lector-simd: the one place where lector asks the CPU which vector instructions it has.
//!
//! Every kernel (vector search, the encoders' GEMM and activations, quantized generation) picks
//! its code path from [`features`], detected once per process. `$LECTOR_SIMD` caps what the
//! kernels may use, so that an AVX-512 machine can run (and test, and benchmark) the code paths
//! an AVX2-only CPU takes:
//!
//! | `LECTOR_SIMD` | kernels may use |
//! | --- | --- |
//! | unset, `native` | everything the CPU has |
//! | `avx2` | AVX2, FMA, F16C and AVX-VNNI (x86-64-v3), no AVX-512 |
//! | `scalar` | no explicit vector instructions |

use std::sync::OnceLock;

/// The environment variable that caps the instruction sets the kernels use.
pub const SIMD_VAR: &str = "LECTOR_SIMD";

/// The vector instruction groups lector's kernels are written for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// AVX2 and FMA (x86-64-v3).
    pub avx2_fma: bool,
    /// F16C half-float conversions.
    pub f16c: bool,
    /// AVX-VNNI's 256-bit `vpdpbusd`.
    pub avx_vnni: bool,
    /// AVX-512 F, VL, DQ and BW (x86-64-v4).
    pub avx512: bool,
    /// AVX-512 VNNI.
    pub avx512_vnni: bool,
    /// AVX-512 BF16 dot products.
    pub avx512_bf16: bool,
}

/// What this CPU has, capped by `$LECTOR_SIMD` (detected once).
pub fn features() -> Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    *FEATURES.get_or_init(|| {
        let cap = std::env::var(SIMD_VAR).unwrap_or_default();
        cap_to(detect(), &cap)
    })
}

/// `found` limited to what `cap` allows (unknown values allow everything).
fn cap_to(found: Features, cap: &str) -> Features {
    match cap.trim().to_ascii_lowercase().as_str() {
        "scalar" | "none" => Features::default(),
        "avx2" | "x86-64-v3" => Features {
            avx512: false,
            avx512_vnni: false,
            avx512_bf16: false,
            ..found
        },
        _ => found,
    }
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Features {
    use std::arch::is_x86_feature_detected as has;
    let avx2_fma = has!("avx2") && has!("fma");
    let avx512 =
        avx2_fma && has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw");
    Features {
        avx2_fma,
        f16c: has!("f16c"),
        avx_vnni: avx2_fma && has!("avxvnni"),
        avx512,
        avx512_vnni: avx512 && has!("avx512vnni"),
        avx512_bf16: avx512 && has!("avx512bf16"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Features {
    Features::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Features = Features {
        avx2_fma: true,
        f16c: true,
        avx_vnni: true,
        avx512: true,
        avx512_vnni: true,
        avx512_bf16: true,
    };

    #[test]
    fn the_cap_removes_what_it_names_and_nothing_else() {
        assert_eq!(cap_to(ALL, ""), ALL);
        assert_eq!(cap_to(ALL, "native"), ALL);
        assert_eq!(cap_to(ALL, "scalar"), Features::default());
        let v3 = cap_to(ALL, "AVX2");
        assert!(v3.avx2_fma && v3.f16c && v3.avx_vnni);
        assert!(!v3.avx512 && !v3.avx512_vnni && !v3.avx512_bf16);
    }

    #[test]
    fn detection_is_consistent() {
        let f = detect();
        // Each wider group implies the narrower one it builds on.
        assert!(!f.avx512 || f.avx2_fma);
        assert!(!f.avx512_vnni || f.avx512);
        assert!(!f.avx512_bf16 || f.avx512);
        assert!(!f.avx_vnni || f.avx2_fma);
    }
}
