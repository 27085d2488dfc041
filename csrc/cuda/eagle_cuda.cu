// CUDA kernels of eagle_sparse (see eagle_cuda.hpp for the contracts).
#include "eagle_cuda.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef EAGLE_CUDA_ARCHS
#define EAGLE_CUDA_ARCHS "unknown"
#endif

namespace eagle::cuda {

void check(cudaError_t err, const char* what) {
    if (err != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

void check(cublasStatus_t st, const char* what) {
    if (st != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string(what) + ": cuBLAS status " +
                                 std::to_string(static_cast<int>(st)));
}

namespace {

constexpr int kThreads = 256;

inline int blocks_for(index_t n) {
    const index_t b = (n + kThreads - 1) / kThreads;
    return static_cast<int>(std::min<index_t>(std::max<index_t>(b, 1), 65535 * 32));
}

inline int ld(index_t v) { return static_cast<int>(std::max<index_t>(v, 1)); }
inline int ii(index_t v) { return static_cast<int>(v); }

// ------------------------------------------------------------------ cuBLAS by type

template <typename T>
struct Blas;

template <>
struct Blas<float> {
    static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                               int m, int n, int k, float a, const float* A, int lda,
                               const float* B, int ldb, float b, float* C, int ldc) {
        return cublasSgemm(h, ta, tb, m, n, k, &a, A, lda, B, ldb, &b, C, ldc);
    }
    static cublasStatus_t gemm_sb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, float a, const float* A, int lda,
                                  long long sa, const float* B, int ldb, long long sb, float b,
                                  float* C, int ldc, long long sc, int batch) {
        return cublasSgemmStridedBatched(h, ta, tb, m, n, k, &a, A, lda, sa, B, ldb, sb, &b, C,
                                         ldc, sc, batch);
    }
    static cublasStatus_t syrk(cublasHandle_t h, int n, int k, float a, const float* A, int lda,
                               float b, float* C, int ldc) {
        return cublasSsyrk(h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, k, &a, A, lda, &b, C, ldc);
    }
    static cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t t, int m, int n, float a,
                               const float* A, int lda, const float* x, float b, float* y) {
        return cublasSgemv(h, t, m, n, &a, A, lda, x, 1, &b, y, 1);
    }
};

template <>
struct Blas<double> {
    static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                               int m, int n, int k, double a, const double* A, int lda,
                               const double* B, int ldb, double b, double* C, int ldc) {
        return cublasDgemm(h, ta, tb, m, n, k, &a, A, lda, B, ldb, &b, C, ldc);
    }
    static cublasStatus_t gemm_sb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, double a, const double* A, int lda,
                                  long long sa, const double* B, int ldb, long long sb,
                                  double b, double* C, int ldc, long long sc, int batch) {
        return cublasDgemmStridedBatched(h, ta, tb, m, n, k, &a, A, lda, sa, B, ldb, sb, &b, C,
                                         ldc, sc, batch);
    }
    static cublasStatus_t syrk(cublasHandle_t h, int n, int k, double a, const double* A,
                               int lda, double b, double* C, int ldc) {
        return cublasDsyrk(h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, k, &a, A, lda, &b, C, ldc);
    }
    static cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t t, int m, int n, double a,
                               const double* A, int lda, const double* x, double b, double* y) {
        return cublasDgemv(h, t, m, n, &a, A, lda, x, 1, &b, y, 1);
    }
};

// ------------------------------------------------------------------ fused kernels

// P = diag I + coef G with G's lower half mirrored from the upper one that SYRK wrote
// (column-major upper: (r, c) with r <= c at r + c n); G is completed in place.
template <typename T>
__global__ void form_p_single(index_t n, T* G, T* P, T coef, T diag) {
    const index_t total = n * n;
    for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const index_t r = e % n, c = e / n;
        const T g = (r <= c) ? G[e] : G[c + r * n];
        if (r > c) G[e] = g;
        P[e] = coef * g + (r == c ? diag : T(0));
    }
}

// Batched: P_b = scale_b (I - eta_b G_b + zeta_b G_b^2), or I for inactive problems;
// W_b *= gamma_b (0 when inactive, so C and D stay unchanged).  With zeta (nullable: every
// step cubic) P holds G_b^2 on entry.
template <typename T>
__global__ void form_p_batched(index_t batch, index_t n, index_t q, const T* G, T* P, T* W,
                               const double* eta, const double* gamma, const double* scale,
                               const std::uint8_t* active, const double* zeta) {
    const index_t nn = n * n, nq = n * q, per = nn + nq;
    const index_t total = batch * per;
    for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const index_t b = e / per, off = e % per;
        const bool on = active[b] != 0;
        if (off < nn) {
            const index_t r = off % n, c = off / n;
            const T s = static_cast<T>(scale[b]);
            T val = on ? (-s * static_cast<T>(eta[b]) * G[b * nn + off] + (r == c ? s : T(0)))
                       : (r == c ? T(1) : T(0));
            if (on && zeta != nullptr) val += s * static_cast<T>(zeta[b]) * P[b * nn + off];
            P[b * nn + off] = val;
        } else {
            const index_t w = b * nq + (off - nn);
            W[w] = on ? static_cast<T>(gamma[b]) * W[w] : T(0);
        }
    }
}

// lam_b = v_b . z_b; v_b = z_b / ||z_b|| (one block per problem, shared-memory reduction).
template <typename T>
__global__ void rayleigh_normalize(index_t n, T* V, const T* Z, double* lam) {
    const index_t b = blockIdx.x;
    const T* z = Z + b * n;
    T* v = V + b * n;
    __shared__ double s_vz[kThreads];
    __shared__ double s_zz[kThreads];
    double vz = 0.0, zz = 0.0;
    for (index_t i = threadIdx.x; i < n; i += blockDim.x) {
        vz += static_cast<double>(v[i]) * static_cast<double>(z[i]);
        zz += static_cast<double>(z[i]) * static_cast<double>(z[i]);
    }
    s_vz[threadIdx.x] = vz;
    s_zz[threadIdx.x] = zz;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            s_vz[threadIdx.x] += s_vz[threadIdx.x + w];
            s_zz[threadIdx.x] += s_zz[threadIdx.x + w];
        }
        __syncthreads();
    }
    const double nz = sqrt(s_zz[0]);
    if (threadIdx.x == 0) lam[b] = s_vz[0];
    __syncthreads();
    if (nz > 0.0)
        for (index_t i = threadIdx.x; i < n; i += blockDim.x) v[i] = static_cast<T>(z[i] / nz);
}

__global__ void sqrt_clip(index_t batch, double* x) {
    const index_t b = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (b < batch) x[b] = sqrt(fmax(x[b], 0.0));
}

template <typename T>
__global__ void broadcast_start(index_t batch, index_t n, const T* v0, T* V) {
    const index_t total = batch * n;
    for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<index_t>(gridDim.x) * blockDim.x)
        V[e] = v0[e % n];
}

template <typename T>
__global__ void sparse_sign_dense_kernel(index_t m, index_t n, int k, const std::int32_t* rows,
                                         const std::int8_t* signs, T scale, const T* A, T* out) {
    const index_t total = m * n;
    for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const index_t i = e / n, j = e % n;
        const T a = A[e] * scale;
        if (a == T(0)) continue;
        for (int t = 0; t < k; ++t) {
            const index_t h = rows[i * k + t];
            atomicAdd(out + h * n + j, signs[i * k + t] > 0 ? a : -a);
        }
    }
}

template <typename T>
__global__ void sparse_sign_csr_kernel(index_t m, index_t n, int k, const std::int64_t* indptr,
                                       const std::int32_t* indices, const T* data,
                                       const std::int32_t* rows, const std::int8_t* signs,
                                       T scale, T* out) {
    // one warp-strided loop per input row
    for (index_t i = blockIdx.x; i < m; i += gridDim.x) {
        for (index_t p = indptr[i] + threadIdx.x; p < indptr[i + 1]; p += blockDim.x) {
            const index_t j = indices[p];
            const T a = data[p] * scale;
            for (int t = 0; t < k; ++t) {
                const index_t h = rows[i * k + t];
                atomicAdd(out + h * n + j, signs[i * k + t] > 0 ? a : -a);
            }
        }
    }
}

__device__ inline std::uint64_t splitmix64(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

template <typename T>
__global__ void gaussian_fill(index_t count, std::uint64_t seed, T scale, T* out) {
    for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < count;
         e += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const std::uint64_t h1 = splitmix64(seed ^ (2 * static_cast<std::uint64_t>(e)));
        const std::uint64_t h2 = splitmix64(seed ^ (2 * static_cast<std::uint64_t>(e) + 1));
        const double u1 = (static_cast<double>(h1 >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        const double u2 = (static_cast<double>(h2 >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        const double g = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        out[e] = static_cast<T>(g) * scale;
    }
}

template <typename T>
__global__ void sample_rows_kernel(index_t n, index_t r, const std::int64_t* idx, T scale,
                                   const T* A, T* out) {
    const index_t total = n * r;
    for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const index_t row = e / n, j = e % n;
        out[e] = scale * A[idx[row] * n + j];
    }
}

// Host copy of the CPU core's start vector (splitmix64 + Box-Muller, normalised), so
// the GPU and CPU power iterations start from the same vector.
std::vector<double> start_vector(index_t n, std::uint64_t seed) {
    auto next = [](std::uint64_t& state) {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    auto uni = [&](std::uint64_t& st) {
        return (static_cast<double>(next(st) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    };
    std::uint64_t state = seed;
    std::vector<double> w(static_cast<size_t>(n));
    for (index_t i = 0; i < n; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(uni(state)));
        const double t = 6.283185307179586476925286766559 * uni(state);
        w[i] = r * std::cos(t);
        if (i + 1 < n) w[i + 1] = r * std::sin(t);
    }
    double nrm = 0.0;
    for (double x : w) nrm += x * x;
    nrm = std::sqrt(nrm);
    for (auto& x : w) x /= nrm;
    return w;
}

template <typename T>
struct DeviceBuffer {
    T* ptr = nullptr;
    explicit DeviceBuffer(size_t count, cudaStream_t stream) {
        if (count) check(cudaMallocAsync(reinterpret_cast<void**>(&ptr), count * sizeof(T), stream),
                         "cudaMallocAsync");
        stream_ = stream;
    }
    ~DeviceBuffer() {
        if (ptr) cudaFreeAsync(ptr, stream_);
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  private:
    cudaStream_t stream_ = nullptr;
};

}  // namespace

// ------------------------------------------------------------------ handles

cublasHandle_t handle_for(cudaStream_t stream, bool tf32) {
    thread_local std::map<int, cublasHandle_t> handles;
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    auto it = handles.find(dev);
    if (it == handles.end()) {
        cublasHandle_t h = nullptr;
        check(cublasCreate(&h), "cublasCreate");
        it = handles.emplace(dev, h).first;
    }
    check(cublasSetStream(it->second, stream), "cublasSetStream");
    check(cublasSetPointerMode(it->second, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    check(cublasSetMathMode(it->second, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "cublasSetMathMode");
    return it->second;
}

// ------------------------------------------------------------------ the EAGLE step

template <typename T>
void eagle_step(const StepShape& s, const T* A, const T* B, T* C, T* D, T* A_out, T* B_out,
                T* G, T* W, T* P, double eta_rho, double gamma_rho, double scale,
                cudaStream_t stream, bool tf32, double zeta_rho2) {
    const index_t d = s.d, n = s.n, p = s.p, q = s.q;
    if (n == 0) return;
    cublasHandle_t h = handle_for(stream, tf32);
    using B_ = Blas<T>;
    const T gr = static_cast<T>(gamma_rho);
    // G = A^T A (column-major upper of Acm Acm^T), W = A^T C (Wcm = Ccm Acm^T).
    check(B_::syrk(h, ii(n), ii(d), T(1), A, ld(n), T(0), G, ld(n)), "syrk G");
    if (q > 0) {
        check(B_::gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, ii(q), ii(n), ii(d), T(1), C, ld(q), A, ld(n),
                       T(0), W, ld(q)),
              "gemm W");
        if (d > 0)
            check(B_::gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(q), ii(d), ii(n), -gr, W, ld(q), A, ld(n),
                           T(1), C, ld(q)),
                  "gemm C");
        if (p > 0)
            check(B_::gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(q), ii(p), ii(n), gr, W, ld(q), B, ld(n),
                           T(1), D, ld(q)),
                  "gemm D");
    }
    form_p_single<T><<<blocks_for(n * n), kThreads, 0, stream>>>(
        n, G, P, static_cast<T>(-scale * eta_rho), static_cast<T>(scale));
    check(cudaGetLastError(), "form_p_single");
    if (zeta_rho2 != 0.0)  // a quintic step: P += scale zeta G G (G whole now)
        check(B_::gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(n), ii(n),
                       static_cast<T>(scale * zeta_rho2), G, ld(n), G, ld(n), T(1), P, ld(n)),
              "gemm G^2");
    // A_out = A P (P symmetric: Aout_cm = P Acm), B_out = B P.
    if (d > 0)
        check(B_::gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(d), ii(n), T(1), P, ld(n), A, ld(n),
                       T(0), A_out, ld(n)),
              "gemm A_out");
    if (p > 0)
        check(B_::gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(p), ii(n), T(1), P, ld(n), B, ld(n),
                       T(0), B_out, ld(n)),
              "gemm B_out");
}

template <typename T>
void eagle_step_batched(index_t batch, const StepShape& s, const T* A, const T* B, T* C, T* D,
                        T* A_out, T* B_out, T* G, T* W, T* P, const double* eta_rho,
                        const double* gamma_rho, const double* scale,
                        const std::uint8_t* active, cudaStream_t stream, bool tf32,
                        const double* zeta_rho2) {
    const index_t d = s.d, n = s.n, p = s.p, q = s.q;
    if (batch == 0 || n == 0) return;
    cublasHandle_t h = handle_for(stream, tf32);
    using B_ = Blas<T>;
    const long long sA = d * n, sB = p * n, sC = d * q, sD = p * q, sG = n * n, sW = n * q;
    const int nb = ii(batch);
    check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_T, ii(n), ii(n), ii(d), T(1), A, ld(n), sA, A,
                      ld(n), sA, T(0), G, ld(n), sG, nb),
          "gemm G (batched)");
    if (q > 0)
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_T, ii(q), ii(n), ii(d), T(1), C, ld(q), sC, A,
                          ld(n), sA, T(0), W, ld(q), sW, nb),
              "gemm W (batched)");
    if (zeta_rho2 != nullptr)  // quintic steps: P_b = G_b G_b first, form_p_batched reads it
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(n), ii(n), T(1), G, ld(n), sG,
                          G, ld(n), sG, T(0), P, ld(n), sG, nb),
              "gemm G^2 (batched)");
    form_p_batched<T><<<blocks_for(batch * (sG + sW)), kThreads, 0, stream>>>(
        batch, n, q, G, P, W, eta_rho, gamma_rho, scale, active, zeta_rho2);
    check(cudaGetLastError(), "form_p_batched");
    if (q > 0 && d > 0)
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(q), ii(d), ii(n), T(-1), W, ld(q), sW, A,
                          ld(n), sA, T(1), C, ld(q), sC, nb),
              "gemm C (batched)");
    if (q > 0 && p > 0)
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(q), ii(p), ii(n), T(1), W, ld(q), sW, B,
                          ld(n), sB, T(1), D, ld(q), sD, nb),
              "gemm D (batched)");
    if (d > 0)
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(d), ii(n), T(1), P, ld(n), sG, A,
                          ld(n), sA, T(0), A_out, ld(n), sA, nb),
              "gemm A_out (batched)");
    if (p > 0)
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(p), ii(n), T(1), P, ld(n), sG, B,
                          ld(n), sB, T(0), B_out, ld(n), sB, nb),
              "gemm B_out (batched)");
}

// ------------------------------------------------------------------ norm estimates

template <typename T>
double spectral_norm_estimate(index_t d, index_t n, const T* A, int maxiter, double rtol,
                              std::uint64_t seed, int* iterations, cudaStream_t stream) {
    if (iterations) *iterations = 0;
    if (d == 0 || n == 0 || maxiter <= 0) return 0.0;
    cublasHandle_t h = handle_for(stream, false);
    using B_ = Blas<T>;
    const std::vector<double> w = start_vector(n, seed);
    std::vector<T> host(w.begin(), w.end());
    DeviceBuffer<T> v(static_cast<size_t>(n), stream), z(static_cast<size_t>(n), stream),
        u(static_cast<size_t>(d), stream);
    check(cudaMemcpyAsync(v.ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream),
          "copy start");
    DeviceBuffer<double> lam(1, stream);
    double lam_h = 0.0, lam_old = 0.0;
    int it = 0;
    for (it = 1; it <= maxiter; ++it) {
        // u = A v (Acm^T v), z = A^T u (Acm u)
        check(B_::gemv(h, CUBLAS_OP_T, ii(n), ii(d), T(1), A, ld(n), v.ptr, T(0), u.ptr), "gemv u");
        check(B_::gemv(h, CUBLAS_OP_N, ii(n), ii(d), T(1), A, ld(n), u.ptr, T(0), z.ptr), "gemv z");
        rayleigh_normalize<T><<<1, kThreads, 0, stream>>>(n, v.ptr, z.ptr, lam.ptr);
        check(cudaGetLastError(), "rayleigh_normalize");
        check(cudaMemcpyAsync(&lam_h, lam.ptr, sizeof(double), cudaMemcpyDeviceToHost, stream),
              "copy lambda");
        check(cudaStreamSynchronize(stream), "sync");
        if (std::abs(lam_h - lam_old) <= rtol * lam_h) break;
        lam_old = lam_h;
    }
    if (iterations) *iterations = std::min(it, maxiter);
    return std::sqrt(std::max(lam_h, 0.0));
}

template <typename T>
void spectral_norm_estimate_batched(index_t batch, index_t d, index_t n, const T* A,
                                    int maxiter, std::uint64_t seed, double* sigma,
                                    cudaStream_t stream) {
    if (batch == 0) return;
    if (d == 0 || n == 0 || maxiter <= 0) {
        check(cudaMemsetAsync(sigma, 0, batch * sizeof(double), stream), "memset sigma");
        return;
    }
    cublasHandle_t h = handle_for(stream, false);
    using B_ = Blas<T>;
    const std::vector<double> w = start_vector(n, seed);
    std::vector<T> host(w.begin(), w.end());
    DeviceBuffer<T> v0(static_cast<size_t>(n), stream), V(static_cast<size_t>(batch * n), stream),
        Z(static_cast<size_t>(batch * n), stream), U(static_cast<size_t>(batch * d), stream);
    check(cudaMemcpyAsync(v0.ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream),
          "copy start");
    broadcast_start<T><<<blocks_for(batch * n), kThreads, 0, stream>>>(batch, n, v0.ptr, V.ptr);
    const long long sA = d * n;
    const int nb = ii(batch);
    for (int it = 0; it < maxiter; ++it) {
        // U_b (1 x d) = v_b^T Acm_b  ->  column-major: U (d x 1) = Acm^T v
        check(B_::gemm_sb(h, CUBLAS_OP_T, CUBLAS_OP_N, ii(d), 1, ii(n), T(1), A, ld(n), sA, V.ptr,
                          ld(n), n, T(0), U.ptr, ld(d), d, nb),
              "gemm u (batched)");
        check(B_::gemm_sb(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), 1, ii(d), T(1), A, ld(n), sA, U.ptr,
                          ld(d), d, T(0), Z.ptr, ld(n), n, nb),
              "gemm z (batched)");
        rayleigh_normalize<T><<<nb, kThreads, 0, stream>>>(n, V.ptr, Z.ptr, sigma);
        check(cudaGetLastError(), "rayleigh_normalize (batched)");
    }
    sqrt_clip<<<blocks_for(batch), kThreads, 0, stream>>>(batch, sigma);
    check(cudaGetLastError(), "sqrt_clip");
}

// ------------------------------------------------------------------ sketches

template <typename T>
void sparse_sign_dense(index_t m, index_t n, index_t s, int k, const std::int32_t* rows,
                       const std::int8_t* signs, double scale, const T* A, T* out,
                       cudaStream_t stream) {
    check(cudaMemsetAsync(out, 0, s * n * sizeof(T), stream), "memset sketch");
    if (m == 0 || n == 0) return;
    sparse_sign_dense_kernel<T><<<blocks_for(m * n), kThreads, 0, stream>>>(
        m, n, k, rows, signs, static_cast<T>(scale), A, out);
    check(cudaGetLastError(), "sparse_sign_dense");
}

template <typename T>
void sparse_sign_csr(index_t m, index_t n, index_t s, int k, const std::int64_t* indptr,
                     const std::int32_t* indices, const T* data, const std::int32_t* rows,
                     const std::int8_t* signs, double scale, T* out, cudaStream_t stream) {
    check(cudaMemsetAsync(out, 0, s * n * sizeof(T), stream), "memset sketch");
    if (m == 0 || n == 0) return;
    const int grid = static_cast<int>(std::min<index_t>(m, 65535));
    sparse_sign_csr_kernel<T><<<grid, 128, 0, stream>>>(m, n, k, indptr, indices, data, rows,
                                                         signs, static_cast<T>(scale), out);
    check(cudaGetLastError(), "sparse_sign_csr");
}

template <typename T>
void gaussian_sketch(index_t m, index_t n, index_t s, std::uint64_t seed, double scale,
                     const T* A, T* omega, T* out, cudaStream_t stream, bool tf32) {
    gaussian_fill<T><<<blocks_for(s * m), kThreads, 0, stream>>>(s * m, seed,
                                                                 static_cast<T>(scale), omega);
    check(cudaGetLastError(), "gaussian_fill");
    cublasHandle_t h = handle_for(stream, tf32);
    // out (s x n) = Omega (s x m) A (m x n); column-major: out_cm (n x s) = Acm Omega_cm
    check(Blas<T>::gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ii(n), ii(s), ii(m), T(1), A, ld(n), omega,
                        ld(m), T(0), out, ld(n)),
          "gemm gaussian sketch");
}

template <typename T>
void sample_rows(index_t n, index_t r, const std::int64_t* idx, double scale, const T* A,
                 T* out, cudaStream_t stream) {
    if (n == 0 || r == 0) return;
    sample_rows_kernel<T><<<blocks_for(n * r), kThreads, 0, stream>>>(
        n, r, idx, static_cast<T>(scale), A, out);
    check(cudaGetLastError(), "sample_rows");
}

int device_count() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device / no driver" error
        return 0;
    }
    return count;
}

std::string build_info() {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    return "CUDA runtime " + std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10) +
           ", cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
           std::to_string(CUBLAS_VER_MINOR) + ", archs " + EAGLE_CUDA_ARCHS;
}

// ------------------------------------------------------------------ instantiations

#define EAGLE_CUDA_INSTANTIATE(T)                                                              \
    template void eagle_step<T>(const StepShape&, const T*, const T*, T*, T*, T*, T*, T*, T*,   \
                                T*, double, double, double, cudaStream_t, bool, double);              \
    template void eagle_step_batched<T>(index_t, const StepShape&, const T*, const T*, T*, T*,  \
                                        T*, T*, T*, T*, T*, const double*, const double*,       \
                                        const double*, const std::uint8_t*, cudaStream_t,      \
                                        bool, const double*);                                                  \
    template double spectral_norm_estimate<T>(index_t, index_t, const T*, int, double,          \
                                              std::uint64_t, int*, cudaStream_t);               \
    template void spectral_norm_estimate_batched<T>(index_t, index_t, index_t, const T*, int,   \
                                                    std::uint64_t, double*, cudaStream_t);      \
    template void sparse_sign_dense<T>(index_t, index_t, index_t, int, const std::int32_t*,     \
                                       const std::int8_t*, double, const T*, T*, cudaStream_t); \
    template void sparse_sign_csr<T>(index_t, index_t, index_t, int, const std::int64_t*,       \
                                     const std::int32_t*, const T*, const std::int32_t*,        \
                                     const std::int8_t*, double, T*, cudaStream_t);             \
    template void gaussian_sketch<T>(index_t, index_t, index_t, std::uint64_t, double,          \
                                     const T*, T*, T*, cudaStream_t, bool);                     \
    template void sample_rows<T>(index_t, index_t, const std::int64_t*, double, const T*, T*,   \
                                 cudaStream_t);

EAGLE_CUDA_INSTANTIATE(float)
EAGLE_CUDA_INSTANTIATE(double)
#undef EAGLE_CUDA_INSTANTIATE

}  // namespace eagle::cuda
