// The few level-2/3 BLAS routines the kernels use, row-major, called through SciPy's BLAS.
//
// The extension links no BLAS.  When the module is imported, the bindings fill
// eagle::blas::routines with the Fortran BLAS function pointers that SciPy exports as
// PyCapsules in scipy.linalg.cython_blas.__pyx_capi__ (what scikit-learn does): the same
// BLAS library and thread pool as SciPy's (limit it with threadpoolctl or
// OPENBLAS_NUM_THREADS), nothing to bundle into a wheel, no symbol clash with the other
// BLAS copies of the process.  The integer type is Fortran's default `int` (LP64), as
// cython_blas declares it.
//
// Fortran BLAS is column-major; a row-major m x n array with leading dimension ld is the
// column-major n x m array of its transpose with the same ld, so each row-major call is
// the column-major call on the transposes (operands swapped, triangles mirrored).
#pragma once

#include <cstdint>

namespace eagle::blas {

using blasint = int;

// The CBLAS enumeration values, kept as the kernels' vocabulary.
enum Trans : int { NoTrans = 111, Transpose = 112 };
enum Uplo : int { Upper = 121, Lower = 122 };

template <typename T>
using gemm_fn = void (*)(char* ta, char* tb, blasint* m, blasint* n, blasint* k, T* alpha, T* a,
                         blasint* lda, T* b, blasint* ldb, T* beta, T* c, blasint* ldc);
template <typename T>
using syrk_fn = void (*)(char* uplo, char* trans, blasint* n, blasint* k, T* alpha, T* a,
                         blasint* lda, T* beta, T* c, blasint* ldc);
template <typename T>
using gemv_fn = void (*)(char* trans, blasint* m, blasint* n, T* alpha, T* a, blasint* lda, T* x,
                         blasint* incx, T* beta, T* y, blasint* incy);

struct Routines {
    gemm_fn<float> sgemm = nullptr;
    gemm_fn<double> dgemm = nullptr;
    syrk_fn<float> ssyrk = nullptr;
    syrk_fn<double> dsyrk = nullptr;
    gemv_fn<float> sgemv = nullptr;
    gemv_fn<double> dgemv = nullptr;
};

// Filled once, at import, before any kernel can run (csrc/bindings.cpp).
extern Routines routines;

template <typename T>
struct For;
template <>
struct For<float> {
    static gemm_fn<float> gemm() { return routines.sgemm; }
    static syrk_fn<float> syrk() { return routines.ssyrk; }
    static gemv_fn<float> gemv() { return routines.sgemv; }
};
template <>
struct For<double> {
    static gemm_fn<double> gemm() { return routines.dgemm; }
    static syrk_fn<double> syrk() { return routines.dsyrk; }
    static gemv_fn<double> gemv() { return routines.dgemv; }
};

inline char fortran_trans(Trans t) { return t == NoTrans ? 'N' : 'T'; }

// C(m x n) = alpha * op(A) op(B) + beta * C, all row-major:
// column-major C^T = op(B)^T op(A)^T.
template <typename T>
inline void gemm(Trans ta, Trans tb, blasint m, blasint n, blasint k, T alpha, const T* a,
                 blasint lda, const T* b, blasint ldb, T beta, T* c, blasint ldc) {
    char ca = fortran_trans(ta), cb = fortran_trans(tb);
    For<T>::gemm()(&cb, &ca, &n, &m, &k, &alpha, const_cast<T*>(b), &ldb, const_cast<T*>(a),
                   &lda, &beta, c, &ldc);
}

// C(n x n) = alpha * op(A) op(A)^T + beta * C on the `uplo` triangle only, row-major:
// the row-major upper triangle is the column-major lower one, and op(A) (n x k) row-major
// is op(A)^T column-major, so the column-major call takes the other transpose.
template <typename T>
inline void syrk(Uplo uplo, Trans trans, blasint n, blasint k, T alpha, const T* a, blasint lda,
                 T beta, T* c, blasint ldc) {
    char cu = uplo == Upper ? 'L' : 'U';
    char ct = trans == NoTrans ? 'T' : 'N';
    For<T>::syrk()(&cu, &ct, &n, &k, &alpha, const_cast<T*>(a), &lda, &beta, c, &ldc);
}

// y = alpha * op(A) x + beta * y with A (m x n) row-major: column-major A^T (n x m).
template <typename T>
inline void gemv(Trans trans, blasint m, blasint n, T alpha, const T* a, blasint lda, const T* x,
                 blasint incx, T beta, T* y, blasint incy) {
    char ct = trans == NoTrans ? 'T' : 'N';
    For<T>::gemv()(&ct, &n, &m, &alpha, const_cast<T*>(a), &lda, const_cast<T*>(x), &incx, &beta,
                   y, &incy);
}

}  // namespace eagle::blas
