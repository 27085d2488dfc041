// The sketched (compute-limited) EAGLE step of ALGORITHM.md §4 with a column-sampling
// sketch S (n x r, columns of the identity at the distinct indices idx):
//
//     At = A S = A[:, idx],  Bt = B[:, idx],  G = At^T At,  rho = 1 / lambda_max(G)
//     A[:, idx] -= eta rho At G        (= A - eta rho At At^T At S^T)
//     B[:, idx] -= eta rho Bt G
//     C         -= gamma rho At (At^T C)
//     D         += gamma rho Bt (At^T C)
//
// Split in two calls so that the caller computes rho from G exactly (an r x r
// eigenvalue problem) with the same code on every backend.  Row-major arrays;
// A (d, n), B (p, n), C (d, q), D (p, q), At (d, r), G (r, r).
#pragma once

#include <cstddef>
#include <cstdint>

namespace eagle {

using index_t = std::ptrdiff_t;

template <typename T>
void sampled_gram(index_t d, index_t n, index_t r, const T* A, const std::int64_t* idx, T* At,
                  T* G);

// Bt (p, r), W (r, q) and T1 (max(d, p), r) are scratch.
template <typename T>
void sampled_update(index_t d, index_t n, index_t p, index_t q, index_t r, T* A, T* B, T* C,
                    T* D, const std::int64_t* idx, const T* At, const T* G, double eta_rho,
                    double gamma_rho, T* Bt, T* W, T* T1);

// The same step with a dense sketch S (n, r) with orthonormal columns (Gaussian, SRHT or
// sparse sign embeddings, orthonormalised by the caller):
//
//     At = A S,  G = At^T At                                     (sketched_gram)
//     Bt = B S,  W = At^T C
//     C -= gamma rho At W,  D += gamma rho Bt W
//     A -= eta rho (At G) S^T,  B -= eta rho (Bt G) S^T          (sketched_update)
//
// The rank-r corrections go into A and B in place (GEMM with beta = 1), so a step
// costs O((d + p) n r) and allocates nothing of size n.
template <typename T>
void sketched_gram(index_t d, index_t n, index_t r, const T* A, const T* S, T* At, T* G);

// Bt (p, r), W (r, q) and T1 (max(d, p), r) are scratch.
template <typename T>
void sketched_update(index_t d, index_t n, index_t p, index_t q, index_t r, T* A, T* B, T* C,
                     T* D, const T* S, const T* At, const T* G, double eta_rho,
                     double gamma_rho, T* Bt, T* W, T* T1);

}  // namespace eagle
