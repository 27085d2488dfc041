// Conjugate gradients on a CSR matrix: the compiled inner loop of cg's Krylov route; and
// the fused pair of products CGLS takes per iteration with a tall CSR matrix.
//
// SciPy's cg spends most of a small system's time in Python: per iteration a
// LinearOperator call, two dot products and four vector updates, each a NumPy call of
// a few microseconds.  Here an iteration is three passes over the vectors and no
// allocation: q = A p with p.q fused into it; x += alpha p and r -= alpha q with r.r and
// r.z fused into them (z = diag(inv) r, or r); p = z + beta p.  The recurrence is
// SciPy's (scipy/sparse/linalg/_isolve/iterative.py, cg), iteration for iteration: the
// stopping test ||r|| < thresh comes first, and the same updates follow; only the dot
// products' rounding differs (accumulated in double here).
//
// Everything assumes validated input (the bindings check it): a square CSR pattern whose
// indices lie in [0, n) (or [0, cols)), and vectors of the stated lengths that do not
// overlap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace eagle {

using index_t = std::ptrdiff_t;

// y = A x for CSR A (n x n).
template <typename T, typename I>
void csr_matvec(index_t n, const I* indptr, const I* indices, const T* data, const T* x, T* y);

// q = A x and w = A^T q for CSR A (rows x cols) in one pass over A (CGLS's two products,
// fused: each row is dotted with x, then scattered into w while it is in cache); x (cols,
// k), q (rows, k) and w (cols, k) row-major; qq[c] = q[:, c].q[:, c], accumulated in
// double.
template <typename T, typename I>
void csr_normal_product(index_t rows, index_t cols, const I* indptr, const I* indices,
                        const T* data, index_t k, const T* x, T* q, T* w, double* qq);

// What cg_csr reports.
enum CgStatus : int {
    kCgConverged = 0,  // ||r|| < thresh before an iteration: the loop stopped there
    kCgMaxiter = 1,    // maxiter iterations done
    kCgBreakdown = 2,  // alpha = r.z / p.q or the new r.z not finite (p.q = 0, overflow, NaN)
};

// The state between calls: rr = r.r and rho = r.z of the current residual, where p is the
// next search direction (p = z on the first call).
struct CgState {
    double rr, rho;
};

// At most maxiter CG iterations from (x, r, p, state) with the preconditioner
// z = inv * r (inv null: none); q is scratch.  Returns the iterations done and sets
// status.  x, r, p and state are updated in place.
template <typename T, typename I>
index_t cg_csr(index_t n, const I* indptr, const I* indices, const T* data, const T* inv,
               T* x, T* r, T* p, T* q, CgState& state, double thresh, index_t maxiter,
               CgStatus& status);

}  // namespace eagle
