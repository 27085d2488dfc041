// CUDA kernels of eagle_sparse: the EAGLE step (single and strided-batched), the
// spectral-norm estimate and the sketches, on device memory.
//
// Every entry point takes raw device pointers and a CUDA stream, so it runs on CuPy (or
// any other) memory without copies.  Arrays are C-contiguous (row-major) like the CPU
// kernels; cuBLAS is column-major, so a row-major (r x c) matrix is passed as the
// column-major (c x r) matrix with leading dimension c.  No pybind11 here (bindings live
// in bindings_cuda.cpp) and no host synchronisation except where a scalar result is
// returned (the norm estimate).
#pragma once

#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace eagle::cuda {

using index_t = std::int64_t;

struct StepShape {
    index_t d, n, p, q;  // A (d, n), B (p, n), C (d, q), D (p, q)
};

// Throws std::runtime_error naming the failed call.
void check(cudaError_t err, const char* what);
void check(cublasStatus_t st, const char* what);

// One cuBLAS handle per device and host thread, bound to `stream` for each call.
// `tf32`: allow TF32 tensor-core math for float32 products (the opt-in mixed
// precision mode: float32/TF32 conditioning, float64 refinement done by the caller).
cublasHandle_t handle_for(cudaStream_t stream, bool tf32);

// One EAGLE step (the kernel interface of eagle_sparse/backends/numpy_backend.py):
//   G = A^T A, W = A^T C, C -= gr A W, D += gr B W, P = scale (I - er G + zr G^2),
//   A_out = A P, B_out = B P (zr = zeta_rho2; 0: a cubic step, no G^2 formed).
template <typename T>
void eagle_step(const StepShape& s, const T* A, const T* B, T* C, T* D, T* A_out, T* B_out,
                T* G, T* W, T* P, double eta_rho, double gamma_rho, double scale,
                cudaStream_t stream, bool tf32, double zeta_rho2 = 0.0);

// The same on `batch` problems stored back to back (strided-batched GEMMs); the per-problem
// scalars are device arrays of length `batch` (zeta_rho2 nullptr: every step cubic);
// problems with active[i] == 0 are left unchanged (their A_out/B_out receive a copy of A/B).
template <typename T>
void eagle_step_batched(index_t batch, const StepShape& s, const T* A, const T* B, T* C, T* D,
                        T* A_out, T* B_out, T* G, T* W, T* P, const double* eta_rho,
                        const double* gamma_rho, const double* scale,
                        const std::uint8_t* active, cudaStream_t stream, bool tf32,
                        const double* zeta_rho2 = nullptr);

// Power iteration on A^T A (A: d x n) from a seeded start; returns the Rayleigh-quotient
// estimate of ||A||_2 (a lower bound) after it changes by less than rtol, or maxiter steps.
template <typename T>
double spectral_norm_estimate(index_t d, index_t n, const T* A, int maxiter, double rtol,
                              std::uint64_t seed, int* iterations, cudaStream_t stream);

// Batched: `maxiter` steps on every problem, sigma (device, length batch, float64).
template <typename T>
void spectral_norm_estimate_batched(index_t batch, index_t d, index_t n, const T* A,
                                    int maxiter, std::uint64_t seed, double* sigma,
                                    cudaStream_t stream);

// Sparse sign embedding of a row-major dense A (m x n) into out (s x n):
//   out[rows[i*k + t], :] += signs[i*k + t] * scale * A[i, :]   (k nonzeros per input row).
template <typename T>
void sparse_sign_dense(index_t m, index_t n, index_t s, int k, const std::int32_t* rows,
                       const std::int8_t* signs, double scale, const T* A, T* out,
                       cudaStream_t stream);

// The same for a CSR matrix (indptr m+1, indices, data) into dense out (s x n).
template <typename T>
void sparse_sign_csr(index_t m, index_t n, index_t s, int k, const std::int64_t* indptr,
                     const std::int32_t* indices, const T* data, const std::int32_t* rows,
                     const std::int8_t* signs, double scale, T* out, cudaStream_t stream);

// Gaussian sketch out (s x n) = scale * Omega A with Omega (s x m) standard normal drawn
// from a counter-based generator (seed, entry index): reproducible, no cuRAND needed.
// `omega` is caller-provided scratch of s*m entries.
template <typename T>
void gaussian_sketch(index_t m, index_t n, index_t s, std::uint64_t seed, double scale,
                     const T* A, T* omega, T* out, cudaStream_t stream, bool tf32);

// Row sampling: out[r, :] = scale * A[idx[r], :].
template <typename T>
void sample_rows(index_t n, index_t r, const std::int64_t* idx, double scale, const T* A,
                 T* out, cudaStream_t stream);

// Device count and a description of the build (for show_config).
int device_count();
std::string build_info();

}  // namespace eagle::cuda
