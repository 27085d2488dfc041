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
// Threads (OpenMP, a static partition of the rows): every pass is split at fixed
// reduction chunks of kCgChunk rows, each thread taking a contiguous run of them, and
// every dot product is summed chunk by chunk (in row order within a chunk) and the
// chunks' sums in chunk order.  The chunks do not depend on the thread count, so the
// loop gives the same bits on any number of threads for the same preconditioner (the
// MIC factor's blocks are fixed when it is factored: see dilu_factor).
//
// Everything assumes validated input (the bindings check it): a square CSR pattern whose
// indices lie in [0, n) (or [0, cols)), and vectors of the stated lengths that do not
// overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace eagle {

using index_t = std::ptrdiff_t;

// Rows of one reduction chunk (see above).
constexpr index_t kCgChunk = 4096;

// Stored entries below which the loop, its products and its factor run on one thread
// (an iteration then takes well under a millisecond: see cg_threads in
// krylov_kernels.cpp for the figures and the caveat).
constexpr index_t kCgParallelMinNnz = 200000;

// Threads worth running on an n x n matrix with nnz stored entries, `requested` (> 0)
// being the caller's limit: 1 below kCgParallelMinNnz, else at most one per chunk.
int cg_threads(index_t n, index_t nnz, int requested);

// The first row of part b of `parts` contiguous parts of n rows, cut at chunk boundaries
// (parts >= 1; part `parts` starts at n).  Parts beyond the number of chunks are empty.
index_t cg_part_start(index_t n, index_t parts, index_t b);

// y = A x for CSR A (n x n), on `threads` threads.
template <typename T, typename I>
void csr_matvec(index_t n, const I* indptr, const I* indices, const T* data, const T* x, T* y,
                int threads = 1);

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
// "MIC(0)" where A's pattern is all its factor keeps), in a twisted order of `blocks`
// blocks:
//     M = P^T (D + L) D^-1 (D + L^T) P,   L = the strictly lower triangle of P A P^T,
// where P orders the rows block by block (contiguous blocks cut at the loop's chunks:
// cg_part_start), the even blocks forwards and the odd ones backwards, so that two
// neighbouring blocks meet "burning from both ends" (van der Vorst's twisted
// factorisation): nothing is dropped between blocks, each block's sweeps run on their
// own thread, and a block waits for its neighbour only along their shared rows.  One
// block is the natural order.  D is chosen row by row, in that order, so that M's
// diagonal matches A's and, for omega = 1, M v = A v for a given positive v
// (Gustafsson's modification: the fill each elimination step drops, a_ij a_jk / d_j off
// the pattern, is moved to the diagonal, weighted by v_k / v_i and times omega; v = ones
// keeps the row sums; v = diag(A)^-1/2 makes the factor invariant under a symmetric
// diagonal scaling of A):
//     d_i = a_ii - sum_{j before i} a_ij / d_j (a_ij (1 - omega) + omega s_j / v_i),
//     s_j = sum_{k after j} a_kj v_k  (column j of L, weighted).
// With one block only A's lower triangle is read, so M is symmetric whatever the upper
// triangle holds; with more, a row's entries before and after it in the order are read
// from the row itself (A must be symmetric; a coupling between two blocks stored on one
// side only fails as an unsorted row does, code 2).  On a Stieltjes matrix (SPD,
// off-diagonal entries <= 0) from a 2-D or 3-D grid in its natural order, CG
// preconditioned by M takes O(kappa^1/4) iterations against CG's O(kappa^1/2)
// (Gustafsson 1978), at two sweeps over L per application.
struct DiluStatus {
    int code;       // 0: factored; 1: pivot i not above rel_pivot a_ii (or not finite);
                    // 2: row i has no diagonal entry, or an entry of column < i after it
                    //    (or, blocks > 1, a coupling to another block not stored both ways);
                    // 3: v_i is not positive and finite
    index_t row;    // the failing row (-1 where code is 0)
};

// Most blocks dilu_factor makes (the iterations grow with the meetings: CG to rtol 1e-8
// on 2-D Poisson 1000^2 took 154, 149, 229, 228 and 600 iterations with 1, 2, 3, 4 and
// 8 blocks; on 3-D Poisson 100^3 60, 64, 88, 88 and 200).
constexpr index_t kDiluMaxBlocks = 4;

// The blocks dilu_factor makes when asked for `blocks` on n rows: at most one per
// chunk, at most kDiluMaxBlocks.
index_t dilu_blocks(index_t n, index_t blocks);

// Where a block's sweep waits for a neighbour: before its k-th row (in the sweep's
// order), until `block` has done `need` rows of the same sweep.
struct DiluWait {
    index_t k, block, need;
};

// The twisted order's blocks and their waits (forward and backward sweeps, per block).
struct DiluPlan {
    index_t blocks = 1;
    std::vector<std::vector<DiluWait>> fwd, bwd;
};

// dinv[i] = 1 / d_i and diag[i] = the position of row i's diagonal entry (every column
// index before it in the row is below i, every one after it above: a sorted row); v
// null: ones; plan: the order's blocks and waits (blocks clamped to [1,
// kDiluMaxBlocks]).  The factor depends on `blocks` only, not on `threads`.
template <typename T, typename I>
DiluStatus dilu_factor(index_t n, const I* indptr, const I* indices, const T* data,
                       double omega, double rel_pivot, const double* v, index_t blocks,
                       int threads, T* dinv, I* diag, DiluPlan& plan);

// z = M^-1 r for the factor of dilu_factor (forward sweep with D + L, backward with
// D + L^T); z must not alias r.  Returns r.z, accumulated in double in the loop's chunk
// order (within a chunk in the backward sweep's order).
template <typename T, typename I>
double dilu_apply(index_t n, const I* indptr, const I* indices, const T* data,
                  const T* dinv, const I* diag, const DiluPlan& plan, const T* r, T* z,
                  int threads = 1);

// The preconditioner of cg_csr: none, a diagonal (z = inv * r), or a D-ILU factor of
// the same matrix (dilu_factor's dinv, diag and plan, with z a work vector of n).
template <typename T, typename I>
struct CgPreconditioner {
    const T* inv = nullptr;
    const T* dinv = nullptr;
    const I* diag = nullptr;
    const DiluPlan* plan = nullptr;
    T* z = nullptr;
};

// The loop's start: p = M^-1 r (r, inv * r or the factor's solve) and state = (r.r,
// r.p) in the loop's chunk order.
template <typename T, typename I>
void cg_start(index_t n, const I* indptr, const I* indices, const T* data,
              const CgPreconditioner<T, I>& pre, const T* r, T* p, CgState& state,
              int threads = 1);

// At most maxiter CG iterations from (x, r, p, state) with the preconditioner pre
// (where it is a D-ILU factor, its forward sweep is fused with the update of r); q is
// scratch.  Returns the iterations done and sets status.  x, r, p and state are
// updated in place.  `threads` threads share the passes (cg_threads decides how many
// pay; with a factor, at most one per block: each thread takes whole blocks); the bits
// do not depend on how many.
template <typename T, typename I>
index_t cg_csr(index_t n, const I* indptr, const I* indices, const T* data,
               const CgPreconditioner<T, I>& pre, T* x, T* r, T* p, T* q, CgState& state,
               double thresh, index_t maxiter, CgStatus& status, int threads = 1);

}  // namespace eagle
