// The compiled EAGLE kernels: one step and a power-iteration norm estimate, for one
// problem (BLAS) and for a stack of small problems (OpenMP over the stack, loop kernels).
//
// The formulas are those of the NumPy oracle, eagle_sparse/backends/numpy_backend.py,
// whose module docstring is the specification.  Everything here assumes validated input
// (the bindings check it): row-major C-contiguous arrays of the shapes below, and no
// overlap between arrays of different roles (outputs are written while inputs are read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace eagle {

using index_t = std::ptrdiff_t;

// A (d, n), B (p, n), C (d, q), D (p, q); G and P (n, n); W (n, q).
struct StepShape {
    index_t d, n, p, q;
};

// G = A^T A, W = A^T C, C -= gamma_rho A W, D += gamma_rho B W,
// P = scale (I - eta_rho G + zeta_rho2 G^2), A_out = A P, B_out = B P.  A cubic step
// (zeta_rho2 == 0) forms no G^2; a quintic one takes one more n x n product.
template <typename T>
void eagle_step(const StepShape& s, const T* A, const T* B, T* C, T* D, T* A_out, T* B_out, T* G,
                T* W, T* P, double eta_rho, double gamma_rho, double scale,
                double zeta_rho2 = 0.0);

// k consecutive steps fused (k >= 1), for tall problems where A's updates dominate: one
// SYRK and one A/B product for all k steps instead of k.  Every step applies a polynomial
// P_j = scale_j (I - eta_j G_j + zeta_j G_j^2) of its iterate's Gram on the right, so A_{l+j} = A Q_j with
// Q_j = P_0 ... P_{j-1}; the Grams follow in n-space, G_j = P_{j-1} G_{j-1} P_{j-1}, and the
// C/D updates use A_{l+j}^T C = Q_j^T (A^T C) and A_{l+j} U = A (Q_j U).  Same values as
// k calls of eagle_step, up to rounding (B A^+ is invariant under any common right factor,
// so a rounding error in Q only perturbs the polynomial).  Cost 3 d n^2 + 2 p n^2 +
// (k - 1) (6 n^3 + 4 n^2 q) flops against k (3 d n^2 + 2 p n^2), besides the C/D updates
// of every step: a saving when 3 d + 2 p > 6 n + 4 q.
// G (n, n): the Gram before the last step; traces (k): the trace of the Gram before each
// step; Dsnap (k - 1, p, q): D after each step but the last (D holds the final one);
// W, W2 (n, q), P, Q, T (n, n) scratch; A_out = A Q_k, B_out = B Q_k.
// Chains of calls (the iterate kept as A Q, never formed in between): `defer` leaves
// A_out and B_out unwritten, with Q = Q_k and P the last step's polynomial (G, traces
// and Dsnap as above); `resume` continues from such a call's A Q as its steps j > 0
// would (no SYRK: G <- P G P from the G and P it left), G, P, Q, A and B unchanged
// since.
template <typename T>
void eagle_steps(const StepShape& s, int k, const T* A, const T* B, T* C, T* D, T* Dsnap,
                 T* A_out, T* B_out, T* G, double* traces, T* W, T* W2, T* P, T* Q, T* Tm,
                 const double* eta_rho, const double* gamma_rho, const double* scale,
                 const double* zeta_rho2 = nullptr, bool resume = false, bool defer = false);

// The same on `batch` stacked problems of one shape (array i starts at i * its per-problem
// size) with per-problem scalars (zeta_rho2 nullptr: every step cubic); problems with
// active[i] == false are not touched.  num_threads <= 0 means the OpenMP default.
template <typename T>
void eagle_step_batched(index_t batch, const StepShape& s, const T* A, const T* B, T* C, T* D,
                        T* A_out, T* B_out, T* G, T* W, T* P, const double* eta_rho,
                        const double* gamma_rho, const double* scale, const bool* active,
                        int num_threads, const double* zeta_rho2 = nullptr);

struct NormEstimate {
    double sigma;
    int iterations;
};

// Power iteration on A^T A (A is d x n) from a start vector derived from `seed`; stops
// when the Rayleigh quotient changes by at most rtol (relative) or after maxiter steps.
// sigma = sqrt(Rayleigh quotient) is a lower bound of ||A||_2.
template <typename T>
NormEstimate spectral_norm_estimate(index_t d, index_t n, const T* A, int maxiter, double rtol,
                                    std::uint64_t seed);

// The same for `batch` stacked (d x n) matrices, all from the same start vector;
// writes sigma[batch].
template <typename T>
void spectral_norm_estimate_batched(index_t batch, index_t d, index_t n, const T* A, int maxiter,
                                    double rtol, std::uint64_t seed, double* sigma,
                                    int num_threads);

// The true residuals of `batch` stacked least-squares problems, R = Y - M X (M (m x n),
// Y and R (m x k), X (n x k) each), and their column norms in double: norms[0] (batch x k)
// = ||R[:, c]||, norms[1] = ||X[:, c]||, norms[2] = ||M^T R[:, c]|| (norms holds 3 batch k
// entries).  OpenMP across the stack.
template <typename T>
void residual_norms_batched(index_t batch, index_t m, index_t n, index_t k, const T* M,
                            const T* Y, const T* X, T* R, double* norms, int num_threads);

// For each of `batch` stacked symmetric (n x n) float64 Grams: est[b] =
// 1 / trace((G_b + tau I)^-1) by a Cholesky factorisation and the Frobenius norm of the
// inverse factor (lambda_min / n <= est <= lambda_min of the shifted Gram); est[b] = -1
// when the Cholesky factorisation breaks down (the Gram is numerically indefinite).
// OpenMP across the stack.
void inverse_trace_batched(index_t batch, index_t n, const double* G, double tau, double* est,
                           int num_threads);

// The deterministic start vector (unit 2-norm, n entries) used by both norm estimates.
template <typename T>
void power_iteration_start(index_t n, std::uint64_t seed, T* v);

// Row-envelope (profile) Cholesky of a sparse symmetric positive definite matrix in a
// given symmetric ordering: P A P^T = L L^T with row i of L stored densely from column
// first[i] to the diagonal, at val[ptr[i] .. ptr[i + 1]) (ptr[i + 1] - ptr[i] =
// i - first[i] + 1).  The envelope of a row is closed under the elimination, so L needs no
// symbolic phase beyond first[].  The input is CSR (indptr[n + 1], indices[nnz]) with row
// r of P A P^T being row perm[r] of A; only entries on or below the new diagonal are read
// (A is taken to be symmetric), duplicates are summed.  All indices must be validated by
// the caller (the bindings do).
//
// The CSR index type I is int32_t or int64_t (SciPy's choice for the matrix).
// envelope_first: first[i] for every new row; returns the number of stored entries.
template <typename I>
index_t envelope_first(index_t n, const I* indptr, const I* indices, const std::int64_t* perm,
                       std::int64_t* first);
// envelope_cholesky: val (ptr[n] entries) <- L, the lower envelope of P A P^T filled in
// and factorised a block of rows at a time (each block filled just before it is
// factorised, while it is in cache); returns 0, or i + 1 where row i's pivot is not above
// rel_pivot times its diagonal entry (not numerically positive definite; rows from i on
// are then undefined).  Dot products of contiguous row segments in the SIMD variant of
// the batched loop kernels.
template <typename T, typename I>
index_t envelope_cholesky(index_t n, const I* indptr, const I* indices, const T* data,
                          const std::int64_t* perm, const std::int64_t* first,
                          const std::int64_t* ptr, T* val, double rel_pivot);
// envelope_solve: x <- (L L^T)^-1 x for nrhs contiguous columns of n entries each.
template <typename T>
void envelope_solve(index_t n, const std::int64_t* ptr, const std::int64_t* first, const T* val,
                    index_t nrhs, T* x);

// The batched loop kernels exist in several instruction-set variants chosen at run time
// (the wheel is built for the baseline CPU).  These report and override the choice.
const char* kernel_isa();
std::vector<std::string> available_kernel_isas();
bool set_kernel_isa(const std::string& name);  // false when unknown or unsupported here

}  // namespace eagle
