// Single-problem kernels on BLAS, and the OpenMP drivers of the batched kernels.
#include "eagle_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "blas.hpp"
#include "omp_threads.hpp"
#include "small_kernels.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace eagle {

namespace blas {
Routines routines;
}  // namespace blas

namespace {

using blas::blasint;

inline blasint bi(index_t v) { return static_cast<blasint>(v); }

// BLAS wants leading dimensions >= 1 even when the other extent is 0.
inline blasint ld(index_t v) { return static_cast<blasint>(std::max<index_t>(v, 1)); }

using detail::default_threads;
using detail::padded;
using detail::thread_id;

// ---------------------------------------------------------------- ISA selection

struct IsaVariant {
    const char* name;
    const detail::SmallKernelTable<float>* f32;
    const detail::SmallKernelTable<double>* f64;
    bool (*supported)();
};

bool always() { return true; }
#if defined(EAGLE_HAVE_AVX2_KERNELS)
bool has_avx2() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif
#if defined(EAGLE_HAVE_AVX512_KERNELS)
bool has_avx512() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

// In increasing order of preference.
const IsaVariant kVariants[] = {
    {"generic", &detail::small_kernels_f32_generic, &detail::small_kernels_f64_generic, always},
#if defined(EAGLE_HAVE_AVX2_KERNELS)
    {"avx2", &detail::small_kernels_f32_avx2, &detail::small_kernels_f64_avx2, has_avx2},
#endif
#if defined(EAGLE_HAVE_AVX512_KERNELS)
    {"avx512", &detail::small_kernels_f32_avx512, &detail::small_kernels_f64_avx512,
     has_avx512},
#endif
};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

int best_variant() {
    for (int i = kNumVariants - 1; i > 0; --i)
        if (kVariants[i].supported()) return i;
    return 0;
}

std::atomic<int> g_variant{-1};

const IsaVariant& current_variant() {
    int v = g_variant.load(std::memory_order_relaxed);
    if (v < 0) {
        v = best_variant();
        g_variant.store(v, std::memory_order_relaxed);
    }
    return kVariants[v];
}

template <typename T>
const detail::SmallKernelTable<T>& small_kernels();
template <>
const detail::SmallKernelTable<float>& small_kernels<float>() {
    return *current_variant().f32;
}
template <>
const detail::SmallKernelTable<double>& small_kernels<double>() {
    return *current_variant().f64;
}

}  // namespace

namespace detail {
template <>
const SmallKernelTable<float>& active_kernels<float>() {
    return small_kernels<float>();
}
template <>
const SmallKernelTable<double>& active_kernels<double>() {
    return small_kernels<double>();
}
}  // namespace detail

namespace {

// ---------------------------------------------------------------- start vector

// splitmix64: a tiny, well-mixed generator; the start vector only needs to be
// deterministic and not (nearly) orthogonal to the top singular vector.
inline std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline double uniform01_open(std::uint64_t& state) {
    // 53 random bits, shifted into (0, 1) so that log() below is finite.
    return (static_cast<double>(splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

template <typename T>
void power_iteration_start(index_t n, std::uint64_t seed, T* v) {
    // Standard normal entries (Box-Muller), normalised in double precision.
    std::uint64_t state = seed;
    std::vector<double> w(static_cast<size_t>(n));
    const double two_pi = 6.283185307179586476925286766559;
    for (index_t i = 0; i < n; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(uniform01_open(state)));
        const double t = two_pi * uniform01_open(state);
        w[i] = r * std::cos(t);
        if (i + 1 < n) w[i + 1] = r * std::sin(t);
    }
    double nrm = 0.0;
    for (double x : w) nrm += x * x;
    nrm = std::sqrt(nrm);
    for (index_t i = 0; i < n; ++i) v[i] = static_cast<T>(w[i] / nrm);
}

// ---------------------------------------------------------------- single problem (BLAS)

namespace {

// G = A^T A for A (d, n): the upper triangle by SYRK (zero when d == 0); callers mirror.
template <typename T>
void gram_upper(index_t d, index_t n, const T* A, T* G) {
    if (d == 0)
        std::fill(G, G + n * n, T(0));
    else
        blas::syrk<T>(blas::Upper, blas::Transpose, bi(n), bi(d), T(1), A, ld(n), T(0), G, ld(n));
}

// W = A^T C for A (d, n), C (d, q): q == 1 as a GEMV, zero when d == 0.
template <typename T>
void at_apply(index_t d, index_t n, index_t q, const T* A, const T* C, T* W) {
    if (q == 0) return;
    if (d == 0)
        std::fill(W, W + n * q, T(0));
    else if (q == 1)
        blas::gemv<T>(blas::Transpose, bi(d), bi(n), T(1), A, ld(n), C, 1, T(0), W, 1);
    else
        blas::gemm<T>(blas::Transpose, blas::NoTrans, bi(n), bi(q), bi(d), T(1), A, ld(n), C,
                      ld(q), T(0), W, ld(q));
}

// Y = X M for X (rows, n) and M (n, n), all row-major; rows may be 0.
template <typename T>
void right_mult(index_t rows, index_t n, const T* X, const T* M, T* Y) {
    if (rows > 0)
        blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(rows), bi(n), bi(n), T(1), X, ld(n), M,
                      ld(n), T(0), Y, ld(n));
}

// The lower triangle of the row-major (n, n) M from its upper one.
template <typename T>
void mirror_upper(index_t n, T* M) {
    for (index_t i = 1; i < n; ++i)
        for (index_t j = 0; j < i; ++j) M[i * n + j] = M[j * n + i];
}

// Below this order one block of rows would be the whole product.
constexpr index_t kSymmetricProductMin = 96;

// C = alpha X Y + beta C for (n, n) X and Y whose product is symmetric (both polynomials
// in one symmetric matrix) and a symmetric C: from kSymmetricProductMin on, the upper
// triangle by blocks of rows, one GEMM each from the diagonal on (5/8 of a GEMM's
// multiply-adds in four blocks), mirrored, so C is exactly symmetric; below it one plain
// GEMM (C as computed).
template <typename T>
void symmetric_product(index_t n, const T* X, const T* Y, T* C, T alpha = T(1),
                       T beta = T(0)) {
    if (n < kSymmetricProductMin) {
        if (n > 0)
            blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(n), bi(n), bi(n), alpha, X, ld(n), Y,
                          ld(n), beta, C, ld(n));
        return;
    }
    const index_t blocks = n >= 256 ? 4 : 2;
    const index_t rows = (n + blocks - 1) / blocks;
    for (index_t i0 = 0; i0 < n; i0 += rows) {
        const index_t r = std::min(rows, n - i0);
        blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(r), bi(n - i0), bi(n), alpha, X + i0 * n,
                      ld(n), Y + i0, ld(n), beta, C + i0 * n + i0, ld(n));
    }
    mirror_upper<T>(n, C);
}

// P += coef G G for the symmetric (n, n) G and P, by symmetric_product (nothing when
// coef == 0: a cubic step).  (A SYRK into the upper triangle sums in another order,
// which moved rank-deficient minimum-norm answers of ../shared/data past their test
// bound: cat_ears_3_1 5.6e-14 against 4.9e-14, 3.8e-14 with GEMM entries.)
template <typename T>
void add_square(index_t n, const T* G, double coef, T* P) {
    if (coef == 0.0 || n == 0) return;
    symmetric_product<T>(n, G, G, P, static_cast<T>(coef), T(1));
}

// Z = op(M) X for M (n, n) and X (n, q): q == 1 as a GEMV.
template <typename T>
void small_apply(bool trans, index_t n, index_t q, const T* M, const T* X, T* Z) {
    if (q == 1)
        blas::gemv<T>(trans ? blas::Transpose : blas::NoTrans, bi(n), bi(n), T(1), M, ld(n), X, 1,
                      T(0), Z, 1);
    else if (q > 1)
        blas::gemm<T>(trans ? blas::Transpose : blas::NoTrans, blas::NoTrans, bi(n), bi(q), bi(n),
                      T(1), M, ld(n), X, ld(q), T(0), Z, ld(q));
}

// C -= gr A U (A: d x n) and D += gr B U (B: p x n), U (n, q), in place.
template <typename T>
void cd_apply(index_t d, index_t n, index_t p, index_t q, const T* A, const T* B, const T* U,
              T gr, T* C, T* D) {
    if (q == 1) {
        if (d > 0) blas::gemv<T>(blas::NoTrans, bi(d), bi(n), -gr, A, ld(n), U, 1, T(1), C, 1);
        if (p > 0) blas::gemv<T>(blas::NoTrans, bi(p), bi(n), gr, B, ld(n), U, 1, T(1), D, 1);
    } else if (q > 1) {
        if (d > 0)
            blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(d), bi(q), bi(n), -gr, A, ld(n), U,
                          ld(q), T(1), C, ld(q));
        if (p > 0)
            blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(p), bi(q), bi(n), gr, B, ld(n), U,
                          ld(q), T(1), D, ld(q));
    }
}

}  // namespace

template <typename T>
void eagle_step(const StepShape& s, const T* A, const T* B, T* C, T* D, T* A_out, T* B_out, T* G,
                T* W, T* P, double eta_rho, double gamma_rho, double scale, double zeta_rho2) {
    const index_t d = s.d, n = s.n, p = s.p, q = s.q;
    // n == 0: every output is empty and A W = 0 leaves C and D as they are.
    if (n == 0) return;
    // G = A^T A (upper triangle; mirrored below), W = A^T C; C -= gr A W, D += gr B W.
    gram_upper<T>(d, n, A, G);
    at_apply<T>(d, n, q, A, C, W);
    cd_apply<T>(d, n, p, q, A, B, W, static_cast<T>(gamma_rho), C, D);

    // Mirror G and form P = scale (I - eta_rho G) in one pass over the rows.
    const T coef = static_cast<T>(-scale * eta_rho);
    const T diag = static_cast<T>(scale);
    for (index_t i = 0; i < n; ++i) {
        T* gi = G + i * n;
        for (index_t j = 0; j < i; ++j) gi[j] = G[j * n + i];
        T* pi = P + i * n;
        for (index_t j = 0; j < n; ++j) pi[j] = coef * gi[j];
        pi[i] += diag;
    }
    add_square<T>(n, G, scale * zeta_rho2, P);

    // A_out = A P, B_out = B P.
    right_mult<T>(d, n, A, P, A_out);
    right_mult<T>(p, n, B, P, B_out);
}

template <typename T>
NormEstimate spectral_norm_estimate(index_t d, index_t n, const T* A, int maxiter, double rtol,
                                    std::uint64_t seed) {
    if (d == 0 || n == 0 || maxiter <= 0) return {0.0, 0};
    std::vector<T> v(static_cast<size_t>(n)), z(static_cast<size_t>(n)), u(static_cast<size_t>(d));
    power_iteration_start<T>(n, seed, v.data());
    double lam = 0.0, lam_old = 0.0;
    int it = 0;
    for (it = 1; it <= maxiter; ++it) {
        blas::gemv<T>(blas::NoTrans, bi(d), bi(n), T(1), A, ld(n), v.data(), 1, T(0), u.data(), 1);
        blas::gemv<T>(blas::Transpose, bi(d), bi(n), T(1), A, ld(n), u.data(), 1, T(0), z.data(),
                      1);
        double vz = 0.0, zz = 0.0;
        for (index_t i = 0; i < n; ++i) {
            vz += static_cast<double>(v[i]) * static_cast<double>(z[i]);
            zz += static_cast<double>(z[i]) * static_cast<double>(z[i]);
        }
        lam = vz;  // Rayleigh quotient of A^T A, <= ||A||^2
        const double nz = std::sqrt(zz);
        if (nz == 0.0) return {0.0, it};
        const T tnz = static_cast<T>(nz);
        for (index_t i = 0; i < n; ++i) v[i] = z[i] / tnz;
        if (std::abs(lam - lam_old) <= rtol * lam) break;
        lam_old = lam;
    }
    return {std::sqrt(std::max(lam, 0.0)), std::min(it, maxiter)};
}

// G <- P G P for symmetric (n, n) G and P that commute (P a polynomial in G, or both
// polynomials in one symmetric matrix), Tm scratch: G P and P (G P) as symmetric
// products (below kSymmetricProductMin a plain GEMM, symmetrised by averaging).
template <typename T>
void conjugate_gram(index_t n, const T* P, T* G, T* Tm) {
    symmetric_product<T>(n, G, P, Tm);
    symmetric_product<T>(n, P, Tm, G);
    if (n < kSymmetricProductMin) {
        for (index_t r = 0; r < n; ++r)
            for (index_t c = 0; c < r; ++c) {
                const T v = (G[r * n + c] + G[c * n + r]) / T(2);
                G[r * n + c] = v;
                G[c * n + r] = v;
            }
    }
}

template <typename T>
void eagle_steps(const StepShape& s, int k, const T* A, const T* B, T* C, T* D, T* Dsnap,
                 T* A_out, T* B_out, T* G, double* traces, T* W, T* W2, T* P, T* Q, T* Tm,
                 const double* eta_rho, const double* gamma_rho, const double* scale,
                 const double* zeta_rho2, bool resume, bool defer) {
    const index_t d = s.d, n = s.n, p = s.p, q = s.q;
    if (k <= 0) return;
    if (n == 0) {  // nothing moves: every step leaves C and D as they are
        std::fill(traces, traces + k, 0.0);
        for (int j = 0; j + 1 < k; ++j) std::copy(D, D + p * q, Dsnap + j * p * q);
        return;
    }
    const index_t nn = n * n;
    // G = A^T A (upper triangle by SYRK, mirrored); a resumed call continues from the
    // G, P and Q its deferred predecessor left, as a step j > 0 of one call does.
    if (!resume) {
        gram_upper<T>(d, n, A, G);
        mirror_upper<T>(n, G);
    }
    for (int j = 0; j < k; ++j) {
        const bool chained = j > 0 || resume;  // the iterate is A Q, not A
        // G <- P G P (P = P_{j-1}; every matrix here is a polynomial in the chain's
        // first Gram, so G, P, Q and their products are symmetric and commute).
        if (chained) conjugate_gram<T>(n, P, G, Tm);
        double tr = 0.0;
        for (index_t i = 0; i < n; ++i) tr += static_cast<double>(G[i * n + i]);
        traces[j] = tr;
        // C/D update of step j: W = A_j^T C = Q^T (A^T C), U = Q W.
        if (q > 0) {
            at_apply<T>(d, n, q, A, C, W);
            if (chained) {
                small_apply<T>(true, n, q, Q, W, W2);   // W2 = Q^T (A^T C)
                small_apply<T>(false, n, q, Q, W2, W);  // W = Q W2
            }
            cd_apply<T>(d, n, p, q, A, B, W, static_cast<T>(gamma_rho[j]), C, D);
            if (j + 1 < k) std::copy(D, D + p * q, Dsnap + j * p * q);
        }
        // P_j = scale (I - eta G_j + zeta G_j^2); Q <- Q P_j.
        const T coef = static_cast<T>(-scale[j] * eta_rho[j]);
        const T diag = static_cast<T>(scale[j]);
        for (index_t i = 0; i < nn; ++i) P[i] = coef * G[i];
        for (index_t i = 0; i < n; ++i) P[i * n + i] += diag;
        if (zeta_rho2) add_square<T>(n, G, scale[j] * zeta_rho2[j], P);
        if (!chained) {
            std::copy(P, P + nn, Q);
        } else {
            symmetric_product<T>(n, Q, P, Tm);
            std::copy(Tm, Tm + nn, Q);
        }
    }
    if (defer) return;  // the iterate stays A Q (G, P and Q are where resume reads them)
    // A_out = A Q, B_out = B Q.
    right_mult<T>(d, n, A, Q, A_out);
    right_mult<T>(p, n, B, Q, B_out);
}

// ---------------------------------------------------------------- batched (OpenMP)

template <typename T>
void eagle_step_batched(index_t batch, const StepShape& s, const T* A, const T* B, T* C, T* D,
                        T* A_out, T* B_out, T* G, T* W, T* P, const double* eta_rho,
                        const double* gamma_rho, const double* scale, const bool* active,
                        int num_threads, const double* zeta_rho2) {
    std::vector<index_t> todo;
    todo.reserve(static_cast<size_t>(batch));
    for (index_t i = 0; i < batch; ++i)
        if (active[i]) todo.push_back(i);
    const index_t m = static_cast<index_t>(todo.size());
    if (m == 0) return;

    const auto& kern = small_kernels<T>();
    const index_t sA = s.d * s.n, sB = s.p * s.n, sC = s.d * s.q, sD = s.p * s.q;
    const index_t sG = s.n * s.n, sW = s.n * s.q;
    const int nt = static_cast<int>(std::min<index_t>(default_threads(num_threads), m));
    const index_t stride = padded<T>(detail::small_step_scratch(s));
    std::vector<T> scratch(static_cast<size_t>(stride * nt));  // allocated before the region

    // Chunks of roughly >= 64k multiply-adds keep the dynamic scheduler's atomics cheap
    // for tiny problems while still balancing large ones.
    const index_t work = std::max<index_t>(1, (s.d + s.p) * s.n * (s.n + s.q));
    const int chunk = static_cast<int>(std::clamp<index_t>(65536 / work, 1, 64));

    const index_t* idx = todo.data();
    T* scr = scratch.data();
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (index_t t = 0; t < m; ++t) {
        const index_t i = idx[t];
        kern.step(s, A + i * sA, B + i * sB, C + i * sC, D + i * sD, A_out + i * sA,
                  B_out + i * sB, G + i * sG, W + i * sW, P + i * sG, eta_rho[i], gamma_rho[i],
                  scale[i], zeta_rho2 ? zeta_rho2[i] : 0.0, scr + thread_id() * stride);
    }
}

template <typename T>
void spectral_norm_estimate_batched(index_t batch, index_t d, index_t n, const T* A, int maxiter,
                                    double rtol, std::uint64_t seed, double* sigma,
                                    int num_threads) {
    if (batch == 0) return;
    if (d == 0 || n == 0 || maxiter <= 0) {
        std::fill(sigma, sigma + batch, 0.0);
        return;
    }
    std::vector<T> v0(static_cast<size_t>(n));
    power_iteration_start<T>(n, seed, v0.data());

    const auto& kern = small_kernels<T>();
    const int nt = static_cast<int>(std::min<index_t>(default_threads(num_threads), batch));
    const index_t stride = padded<T>(detail::small_norm_scratch(d, n));
    std::vector<T> scratch(static_cast<size_t>(stride * nt));
    const index_t sA = d * n;
    const T* start = v0.data();
    T* scr = scratch.data();
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
    for (index_t i = 0; i < batch; ++i) {
        sigma[i] = kern.norm(d, n, A + i * sA, start, maxiter, rtol, scr + thread_id() * stride);
    }
}

template <typename T>
void residual_norms_batched(index_t batch, index_t m, index_t n, index_t k, const T* M,
                            const T* Y, const T* X, T* R, double* norms, int num_threads) {
    if (batch == 0 || k == 0) return;
    const auto& kern = small_kernels<T>();
    const int nt = static_cast<int>(std::min<index_t>(default_threads(num_threads), batch));
    const index_t stride = padded<T>(std::max<index_t>(1, detail::small_residual_scratch(n, k)));
    std::vector<T> scratch(static_cast<size_t>(stride * nt));
    const index_t sM = m * n, sY = m * k, sX = n * k;
    double* nr = norms;
    double* nx = norms + batch * k;
    double* ng = norms + 2 * batch * k;
    T* scr = scratch.data();
    const index_t work = std::max<index_t>(1, 2 * m * n * k);
    const int chunk = static_cast<int>(std::clamp<index_t>(65536 / work, 1, 64));
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (index_t i = 0; i < batch; ++i) {
        kern.residual(m, n, k, M + i * sM, Y + i * sY, X + i * sX, R + i * sY, nr + i * k,
                      nx + i * k, ng + i * k, scr + thread_id() * stride);
    }
}

// ---------------------------------------------------------------- schedule estimates

void inverse_trace_batched(index_t batch, index_t n, const double* G, double tau, double* est,
                           int num_threads) {
    if (batch <= 0) return;
    const int nt = static_cast<int>(std::min<index_t>(default_threads(num_threads), batch));
    const index_t nn = n * n;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        std::vector<double> L(static_cast<size_t>(nn)), x(static_cast<size_t>(n));
#pragma omp for schedule(dynamic, 16)
        for (index_t b = 0; b < batch; ++b) {
            const double* g = G + b * nn;
            // Cholesky G + tau I = L L^T (row-major lower triangle).
            bool ok = true;
            for (index_t j = 0; j < n && ok; ++j) {
                double dsum = g[j * n + j] + tau;
                for (index_t k = 0; k < j; ++k) dsum -= L[j * n + k] * L[j * n + k];
                if (!(dsum > 0.0)) {
                    ok = false;
                    break;
                }
                const double ljj = std::sqrt(dsum);
                L[j * n + j] = ljj;
                for (index_t i = j + 1; i < n; ++i) {
                    double v = g[i * n + j];
                    for (index_t k = 0; k < j; ++k) v -= L[i * n + k] * L[j * n + k];
                    L[i * n + j] = v / ljj;
                }
            }
            if (!ok) {
                est[b] = -1.0;
                continue;
            }
            // ||L^-1||_F^2 = trace((G + tau I)^-1), one column of L^-1 at a time.
            double total = 0.0;
            for (index_t c = 0; c < n; ++c) {
                x[c] = 1.0 / L[c * n + c];
                total += x[c] * x[c];
                for (index_t i = c + 1; i < n; ++i) {
                    double v = 0.0;
                    for (index_t k = c; k < i; ++k) v -= L[i * n + k] * x[k];
                    x[i] = v / L[i * n + i];
                    total += x[i] * x[i];
                }
            }
            est[b] = total > 0.0 ? 1.0 / total : 0.0;
        }
    }
}

// ---------------------------------------------------------------- ISA control

const char* kernel_isa() { return current_variant().name; }

std::vector<std::string> available_kernel_isas() {
    std::vector<std::string> out;
    for (const auto& v : kVariants)
        if (v.supported()) out.emplace_back(v.name);
    return out;
}

bool set_kernel_isa(const std::string& name) {
    if (name == "auto" || name.empty()) {
        g_variant.store(best_variant());
        return true;
    }
    for (int i = 0; i < kNumVariants; ++i) {
        if (name == kVariants[i].name) {
            if (!kVariants[i].supported()) return false;
            g_variant.store(i);
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------- envelope Cholesky

template <typename I>
index_t envelope_first(index_t n, const I* indptr, const I* indices, const std::int64_t* perm,
                       std::int64_t* first) {
    std::vector<std::int64_t> inv(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) inv[perm[i]] = i;
    index_t entries = 0;
    for (index_t i = 0; i < n; ++i) {
        const std::int64_t r = perm[i];
        std::int64_t f = i;
        for (index_t k = indptr[r]; k < indptr[r + 1]; ++k) {
            const std::int64_t j = inv[indices[k]];
            if (j < f) f = j;
        }
        first[i] = f;
        entries += i - f + 1;
    }
    return entries;
}

namespace {

// Rows [i0, i1) of the lower envelope of P A P^T into val (zeros, then A's entries summed).
template <typename T, typename I>
void envelope_fill_rows(index_t i0, index_t i1, const I* indptr, const I* indices,
                        const T* data, const std::int64_t* perm, const std::int64_t* inv_perm,
                        const std::int64_t* first, const std::int64_t* ptr, T* val) {
    for (std::int64_t e = ptr[i0]; e < ptr[i1]; ++e) val[e] = T(0);
    for (index_t i = i0; i < i1; ++i) {
        const std::int64_t r = perm[i];
        T* row = val + ptr[i] - first[i];
        for (index_t k = indptr[r]; k < indptr[r + 1]; ++k) {
            const std::int64_t j = inv_perm[indices[k]];
            if (j <= i) row[j] += data[k];
        }
    }
}

}  // namespace

// Rows go in blocks of 64: filled, then factorised (the factor kernel's row blocks of four
// stay aligned).
template <typename T, typename I>
index_t envelope_cholesky(index_t n, const I* indptr, const I* indices, const T* data,
                          const std::int64_t* perm, const std::int64_t* first,
                          const std::int64_t* ptr, T* val, double rel_pivot) {
    constexpr index_t kFillRows = 64;
    std::vector<std::int64_t> inv_perm(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) inv_perm[perm[i]] = i;
    std::vector<T> inv(static_cast<std::size_t>(n));
    const auto factor = small_kernels<T>().envelope_factor;
    for (index_t i0 = 0; i0 < n; i0 += kFillRows) {
        const index_t i1 = n - i0 < kFillRows ? n : i0 + kFillRows;
        envelope_fill_rows<T, I>(i0, i1, indptr, indices, data, perm, inv_perm.data(), first, ptr,
                                 val);
        const index_t info = factor(i0, i1, ptr, first, val, rel_pivot, inv.data());
        if (info) return info;
    }
    return 0;
}

template <typename T>
void envelope_solve(index_t n, const std::int64_t* ptr, const std::int64_t* first, const T* val,
                    index_t nrhs, T* x) {
    const auto solve = small_kernels<T>().envelope_solve;
    for (index_t c = 0; c < nrhs; ++c) solve(n, ptr, first, val, x + c * n);
}

// ---------------------------------------------------------------- instantiations

#define EAGLE_INSTANTIATE(T)                                                                     \
    template void power_iteration_start<T>(index_t, std::uint64_t, T*);                           \
    template void eagle_step<T>(const StepShape&, const T*, const T*, T*, T*, T*, T*, T*, T*, T*, \
                                double, double, double, double);                                  \
    template void eagle_steps<T>(const StepShape&, int, const T*, const T*, T*, T*, T*, T*, T*,    \
                                 T*, double*, T*, T*, T*, T*, T*, const double*, const double*,   \
                                 const double*, const double*, bool, bool);                       \
    template NormEstimate spectral_norm_estimate<T>(index_t, index_t, const T*, int, double,      \
                                                    std::uint64_t);                               \
    template void eagle_step_batched<T>(index_t, const StepShape&, const T*, const T*, T*, T*,    \
                                        T*, T*, T*, T*, T*, const double*, const double*,         \
                                        const double*, const bool*, int, const double*);          \
    template void spectral_norm_estimate_batched<T>(index_t, index_t, index_t, const T*, int,     \
                                                    double, std::uint64_t, double*, int);   \
    template void residual_norms_batched<T>(index_t, index_t, index_t, index_t, const T*,        \
                                            const T*, const T*, T*, double*, int);               \
    template index_t envelope_cholesky<T, std::int32_t>(                                          \
        index_t, const std::int32_t*, const std::int32_t*, const T*, const std::int64_t*,        \
        const std::int64_t*, const std::int64_t*, T*, double);                                   \
    template index_t envelope_cholesky<T, std::int64_t>(                                          \
        index_t, const std::int64_t*, const std::int64_t*, const T*, const std::int64_t*,        \
        const std::int64_t*, const std::int64_t*, T*, double);                                   \
    template void envelope_solve<T>(index_t, const std::int64_t*, const std::int64_t*, const T*,  \
                                    index_t, T*);

EAGLE_INSTANTIATE(float)
EAGLE_INSTANTIATE(double)
#undef EAGLE_INSTANTIATE
template index_t envelope_first<std::int32_t>(index_t, const std::int32_t*, const std::int32_t*,
                                              const std::int64_t*, std::int64_t*);
template index_t envelope_first<std::int64_t>(index_t, const std::int64_t*, const std::int64_t*,
                                              const std::int64_t*, std::int64_t*);

}  // namespace eagle
