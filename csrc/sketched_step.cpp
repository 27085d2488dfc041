#include "sketched_step.hpp"

#include <algorithm>

#include "blas.hpp"

namespace eagle {

namespace {
using blas::blasint;
inline blasint bi(index_t v) { return static_cast<blasint>(v); }
inline blasint ld(index_t v) { return static_cast<blasint>(std::max<index_t>(v, 1)); }

template <typename T>
void gather(index_t rows, index_t n, index_t r, const T* X, const std::int64_t* idx, T* out) {
    for (index_t i = 0; i < rows; ++i) {
        const T* x = X + i * n;
        T* o = out + i * r;
        for (index_t k = 0; k < r; ++k) o[k] = x[idx[k]];
    }
}

// X[:, idx] -= U (U is rows x r)
template <typename T>
void scatter_sub(index_t rows, index_t n, index_t r, T* X, const std::int64_t* idx, const T* U) {
    for (index_t i = 0; i < rows; ++i) {
        T* x = X + i * n;
        const T* u = U + i * r;
        for (index_t k = 0; k < r; ++k) x[idx[k]] -= u[k];
    }
}

// C -= gr At W, D += gr Bt W with W = At^T C (the C/D pair of both sketched steps).
template <typename T>
void cd_update(index_t d, index_t p, index_t q, index_t r, T* C, T* D, const T* At,
               const T* Bt, T gr, T* W) {
    if (q == 0 || d == 0) return;
    blas::gemm<T>(blas::Transpose, blas::NoTrans, bi(r), bi(q), bi(d), T(1), At, ld(r), C,
                  ld(q), T(0), W, ld(q));
    blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(d), bi(q), bi(r), -gr, At, ld(r), W, ld(q),
                  T(1), C, ld(q));
    if (p > 0)
        blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(p), bi(q), bi(r), gr, Bt, ld(r), W,
                      ld(q), T(1), D, ld(q));
}

// X (rows, n) -= er (Xt G) S^T, with T1 (rows, r) as scratch.
template <typename T>
void dense_correction(index_t rows, index_t n, index_t r, T* X, const T* Xt, const T* G,
                      const T* S, T er, T* T1) {
    if (rows == 0 || n == 0) return;
    blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(rows), bi(r), bi(r), T(1), Xt, ld(r), G,
                  ld(r), T(0), T1, ld(r));
    blas::gemm<T>(blas::NoTrans, blas::Transpose, bi(rows), bi(n), bi(r), -er, T1, ld(r), S,
                  ld(r), T(1), X, ld(n));
}
}  // namespace

template <typename T>
void sampled_gram(index_t d, index_t n, index_t r, const T* A, const std::int64_t* idx, T* At,
                  T* G) {
    if (r == 0) return;
    gather<T>(d, n, r, A, idx, At);
    if (d == 0) {
        std::fill(G, G + r * r, T(0));
        return;
    }
    blas::syrk<T>(blas::Upper, blas::Transpose, bi(r), bi(d), T(1), At, ld(r), T(0), G, ld(r));
    for (index_t i = 0; i < r; ++i)
        for (index_t j = 0; j < i; ++j) G[i * r + j] = G[j * r + i];
}

template <typename T>
void sampled_update(index_t d, index_t n, index_t p, index_t q, index_t r, T* A, T* B, T* C,
                    T* D, const std::int64_t* idx, const T* At, const T* G, double eta_rho,
                    double gamma_rho, T* Bt, T* W, T* T1) {
    if (r == 0) return;
    const T er = static_cast<T>(eta_rho), gr = static_cast<T>(gamma_rho);
    gather<T>(p, n, r, B, idx, Bt);
    cd_update<T>(d, p, q, r, C, D, At, Bt, gr, W);
    // A[:, idx] -= er At G; B[:, idx] -= er Bt G
    if (d > 0) {
        blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(d), bi(r), bi(r), er, At, ld(r), G, ld(r),
                      T(0), T1, ld(r));
        scatter_sub<T>(d, n, r, A, idx, T1);
    }
    if (p > 0) {
        blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(p), bi(r), bi(r), er, Bt, ld(r), G, ld(r),
                      T(0), T1, ld(r));
        scatter_sub<T>(p, n, r, B, idx, T1);
    }
}


template <typename T>
void sketched_gram(index_t d, index_t n, index_t r, const T* A, const T* S, T* At, T* G) {
    if (r == 0) return;
    if (d == 0 || n == 0) {
        std::fill(At, At + d * r, T(0));
        std::fill(G, G + r * r, T(0));
        return;
    }
    blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(d), bi(r), bi(n), T(1), A, ld(n), S, ld(r),
                  T(0), At, ld(r));
    blas::syrk<T>(blas::Upper, blas::Transpose, bi(r), bi(d), T(1), At, ld(r), T(0), G, ld(r));
    for (index_t i = 0; i < r; ++i)
        for (index_t j = 0; j < i; ++j) G[i * r + j] = G[j * r + i];
}

template <typename T>
void sketched_update(index_t d, index_t n, index_t p, index_t q, index_t r, T* A, T* B, T* C,
                     T* D, const T* S, const T* At, const T* G, double eta_rho,
                     double gamma_rho, T* Bt, T* W, T* T1) {
    if (r == 0) return;
    const T er = static_cast<T>(eta_rho), gr = static_cast<T>(gamma_rho);
    if (p > 0) {  // Bt = B S, from B before its update
        if (n > 0)
            blas::gemm<T>(blas::NoTrans, blas::NoTrans, bi(p), bi(r), bi(n), T(1), B, ld(n), S,
                          ld(r), T(0), Bt, ld(r));
        else
            std::fill(Bt, Bt + p * r, T(0));
    }
    cd_update<T>(d, p, q, r, C, D, At, Bt, gr, W);
    dense_correction<T>(d, n, r, A, At, G, S, er, T1);
    dense_correction<T>(p, n, r, B, Bt, G, S, er, T1);
}

#define EAGLE_SAMPLED_INSTANTIATE(T)                                                         \
    template void sampled_gram<T>(index_t, index_t, index_t, const T*, const std::int64_t*, \
                                  T*, T*);                                                  \
    template void sampled_update<T>(index_t, index_t, index_t, index_t, index_t, T*, T*, T*, \
                                    T*, const std::int64_t*, const T*, const T*, double,    \
                                    double, T*, T*, T*);                                    \
    template void sketched_gram<T>(index_t, index_t, index_t, const T*, const T*, T*, T*);  \
    template void sketched_update<T>(index_t, index_t, index_t, index_t, index_t, T*, T*, T*, \
                                     T*, const T*, const T*, const T*, double, double, T*,  \
                                     T*, T*);

EAGLE_SAMPLED_INSTANTIATE(float)
EAGLE_SAMPLED_INSTANTIATE(double)

}  // namespace eagle
