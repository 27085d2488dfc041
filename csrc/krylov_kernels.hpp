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

// The modified diagonal incomplete Cholesky factor of a symmetric CSR matrix (D-ILU,
// "MIC(0)" where A's strictly lower part is all its factor keeps):
//     M = (D + L) D^-1 (D + L^T),   L = A's strictly lower triangle,
// with D chosen row by row, in order, so that M's diagonal matches A's and, for omega = 1,
// M v = A v for a given positive v (Gustafsson's modification: the fill each elimination
// step drops, a_ij a_jk / d_j off the pattern, is moved to the diagonal, weighted by
// v_k / v_i and times omega; v = ones keeps the row sums; v = diag(A)^-1/2 makes the
// factor invariant under a symmetric diagonal scaling of A):
//     d_i = a_ii - sum_{j<i} a_ij / d_j (a_ij (1 - omega) + omega s_j / v_i),
//     s_j = sum_{k>j} a_kj v_k  (column j of L, weighted).
// Only A's lower triangle is read, so M is symmetric whatever the upper triangle holds.
// On a Stieltjes matrix (SPD, off-diagonal entries <= 0) from a 2-D or 3-D grid in its
// natural order, CG preconditioned by M takes O(kappa^1/4) iterations against CG's
// O(kappa^1/2) (Gustafsson 1978), at two sweeps over L per application.
struct DiluStatus {
    int code;       // 0: factored; 1: pivot i not above rel_pivot a_ii (or not finite);
                    // 2: row i has no diagonal entry, or an entry of column < i after it;
                    // 3: v_i is not positive and finite
    index_t row;    // the failing row (-1 where code is 0)
};

// dinv[i] = 1 / d_i and diag[i] = the position of row i's diagonal entry (every column
// index before it in the row is below i, every one after it above: a sorted row); v
// null: ones.
template <typename T, typename I>
DiluStatus dilu_factor(index_t n, const I* indptr, const I* indices, const T* data,
                       double omega, double rel_pivot, const double* v, T* dinv, I* diag);

// z = M^-1 r for the factor of dilu_factor (forward sweep with D + L, backward with
// D + L^T by columns); z must not alias r.  Returns r.z, accumulated in double.
template <typename T, typename I>
double dilu_apply(index_t n, const I* indptr, const I* indices, const T* data,
                  const T* dinv, const I* diag, const T* r, T* z);

// The preconditioner of cg_csr: none, a diagonal (z = inv * r), or a D-ILU factor of
// the same matrix (dilu_factor's dinv and diag, with z a work vector of n).
template <typename T, typename I>
struct CgPreconditioner {
    const T* inv = nullptr;
    const T* dinv = nullptr;
    const I* diag = nullptr;
    T* z = nullptr;
};

// At most maxiter CG iterations from (x, r, p, state) with the preconditioner pre
// (where it is a D-ILU factor, its forward sweep is fused with the update of r); q is
// scratch.  Returns the iterations done and sets status.  x, r, p and state are
// updated in place.
template <typename T, typename I>
index_t cg_csr(index_t n, const I* indptr, const I* indices, const T* data,
               const CgPreconditioner<T, I>& pre, T* x, T* r, T* p, T* q, CgState& state,
               double thresh, index_t maxiter, CgStatus& status);

}  // namespace eagle
