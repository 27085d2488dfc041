// Minimal row-major CBLAS bindings for the few level-2/3 routines the kernels use.
//
// We declare the prototypes ourselves instead of including a cblas.h, because the
// BLAS we link (scipy-openblas32, the OpenBLAS build NumPy and SciPy ship) exports
// every symbol with a prefix: `scipy_cblas_dgemm`, not `cblas_dgemm`.  The prefix is
// a build setting (EAGLE_BLAS_PREFIX, set by CMakeLists.txt), so the same code links
// against an unprefixed CBLAS by defining it empty.  The integer type is the 32-bit
// `blasint` of scipy-openblas32 (ILP64 builds would need `long`).
#pragma once

#include <cstdint>

#ifndef EAGLE_BLAS_PREFIX
#define EAGLE_BLAS_PREFIX scipy_
#endif

#define EAGLE_BLAS_CAT2(a, b) a##b
#define EAGLE_BLAS_CAT(a, b) EAGLE_BLAS_CAT2(a, b)
#define EAGLE_BLAS(name) EAGLE_BLAS_CAT(EAGLE_BLAS_PREFIX, name)

namespace eagle::blas {

using blasint = int32_t;

// Values fixed by the CBLAS standard.
enum Order : int { RowMajor = 101, ColMajor = 102 };
enum Trans : int { NoTrans = 111, Transpose = 112 };
enum Uplo : int { Upper = 121, Lower = 122 };

}  // namespace eagle::blas

extern "C" {
void EAGLE_BLAS(cblas_sgemm)(int order, int transa, int transb, eagle::blas::blasint m,
                             eagle::blas::blasint n, eagle::blas::blasint k, float alpha,
                             const float* a, eagle::blas::blasint lda, const float* b,
                             eagle::blas::blasint ldb, float beta, float* c,
                             eagle::blas::blasint ldc);
void EAGLE_BLAS(cblas_dgemm)(int order, int transa, int transb, eagle::blas::blasint m,
                             eagle::blas::blasint n, eagle::blas::blasint k, double alpha,
                             const double* a, eagle::blas::blasint lda, const double* b,
                             eagle::blas::blasint ldb, double beta, double* c,
                             eagle::blas::blasint ldc);
void EAGLE_BLAS(cblas_ssyrk)(int order, int uplo, int trans, eagle::blas::blasint n,
                             eagle::blas::blasint k, float alpha, const float* a,
                             eagle::blas::blasint lda, float beta, float* c,
                             eagle::blas::blasint ldc);
void EAGLE_BLAS(cblas_dsyrk)(int order, int uplo, int trans, eagle::blas::blasint n,
                             eagle::blas::blasint k, double alpha, const double* a,
                             eagle::blas::blasint lda, double beta, double* c,
                             eagle::blas::blasint ldc);
void EAGLE_BLAS(cblas_sgemv)(int order, int trans, eagle::blas::blasint m,
                             eagle::blas::blasint n, float alpha, const float* a,
                             eagle::blas::blasint lda, const float* x, eagle::blas::blasint incx,
                             float beta, float* y, eagle::blas::blasint incy);
void EAGLE_BLAS(cblas_dgemv)(int order, int trans, eagle::blas::blasint m,
                             eagle::blas::blasint n, double alpha, const double* a,
                             eagle::blas::blasint lda, const double* x, eagle::blas::blasint incx,
                             double beta, double* y, eagle::blas::blasint incy);
#if defined(EAGLE_BLAS_IS_OPENBLAS)
// OpenBLAS extensions, used only to report what we run on.
char* EAGLE_BLAS(openblas_get_config)(void);
char* EAGLE_BLAS(openblas_get_corename)(void);
int EAGLE_BLAS(openblas_get_num_threads)(void);
int EAGLE_BLAS(openblas_get_parallel)(void);
#endif
}

namespace eagle::blas {

// C(m x n) = alpha * op(A) op(B) + beta * C, all row-major.
template <typename T>
void gemm(Trans ta, Trans tb, blasint m, blasint n, blasint k, T alpha, const T* a, blasint lda,
          const T* b, blasint ldb, T beta, T* c, blasint ldc);

// C(n x n) = alpha * op(A) op(A)^T + beta * C on the `uplo` triangle only.
template <typename T>
void syrk(Uplo uplo, Trans trans, blasint n, blasint k, T alpha, const T* a, blasint lda, T beta,
          T* c, blasint ldc);

// y = alpha * op(A) x + beta * y with A (m x n) row-major.
template <typename T>
void gemv(Trans trans, blasint m, blasint n, T alpha, const T* a, blasint lda, const T* x,
          blasint incx, T beta, T* y, blasint incy);

template <>
inline void gemm<float>(Trans ta, Trans tb, blasint m, blasint n, blasint k, float alpha,
                        const float* a, blasint lda, const float* b, blasint ldb, float beta,
                        float* c, blasint ldc) {
    EAGLE_BLAS(cblas_sgemm)(RowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
template <>
inline void gemm<double>(Trans ta, Trans tb, blasint m, blasint n, blasint k, double alpha,
                         const double* a, blasint lda, const double* b, blasint ldb, double beta,
                         double* c, blasint ldc) {
    EAGLE_BLAS(cblas_dgemm)(RowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
template <>
inline void syrk<float>(Uplo uplo, Trans trans, blasint n, blasint k, float alpha, const float* a,
                        blasint lda, float beta, float* c, blasint ldc) {
    EAGLE_BLAS(cblas_ssyrk)(RowMajor, uplo, trans, n, k, alpha, a, lda, beta, c, ldc);
}
template <>
inline void syrk<double>(Uplo uplo, Trans trans, blasint n, blasint k, double alpha,
                         const double* a, blasint lda, double beta, double* c, blasint ldc) {
    EAGLE_BLAS(cblas_dsyrk)(RowMajor, uplo, trans, n, k, alpha, a, lda, beta, c, ldc);
}
template <>
inline void gemv<float>(Trans trans, blasint m, blasint n, float alpha, const float* a,
                        blasint lda, const float* x, blasint incx, float beta, float* y,
                        blasint incy) {
    EAGLE_BLAS(cblas_sgemv)(RowMajor, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
template <>
inline void gemv<double>(Trans trans, blasint m, blasint n, double alpha, const double* a,
                         blasint lda, const double* x, blasint incx, double beta, double* y,
                         blasint incy) {
    EAGLE_BLAS(cblas_dgemv)(RowMajor, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

}  // namespace eagle::blas
