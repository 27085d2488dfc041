// The products of the normal-equations route (eagle_sparse/_lsq/_normal.py) on a tall CSR
// matrix A (m x n), in parallel with OpenMP and reproducibly: the dense Gram matrix A^T A
// (optionally column-equilibrated, D A^T A D with D = diag(1 / ||a_j||)), and the
// refinement's products A X and A^T Y.
//
// Reproducible: every kernel gives the same bits for the same input at a given thread
// count.  The Gram matrix's rows are split into one band per thread (balanced on the upper
// triangle's area); each thread reads every row of A and adds the products whose first
// column lies in its band, so every entry of G is summed over A's rows in row order by
// one thread: its bits do not depend on the thread count, and no memory beyond G is
// used.  A X needs no buffer (each output row is one thread's dot products), so its bits
// do not depend on the thread count either.  A^T Y splits A's rows into one FIXED
// contiguous block per thread (split_rows: a function of the pattern and the thread count
// only), sums each into a private buffer and adds the buffers in block order.
//
// Everything assumes validated input (the bindings check it): a CSR pattern whose
// indptr runs from 0 to nnz without decreasing and whose indices lie in [0, n), and
// output arrays of the stated sizes that overlap nothing.  Duplicate entries within a row
// are summed, as scipy.sparse's products sum them; unsorted rows are accepted.
#pragma once

#include <cstddef>
#include <cstdint>

namespace eagle {

using index_t = std::ptrdiff_t;

// G (n x n, row-major, overwritten, symmetric) = A^T A; where `equilibrate`, then
// G <- D G D with d_j = 1 / sqrt((A^T A)_jj) (1 where that is 0), d written to scales (n)
// (all ones otherwise).  Each entry is summed over A's rows in row order.
template <typename T, typename I>
void csr_gram(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
              bool equilibrate, T* G, T* scales, int num_threads);

// Y (m x k, row-major, overwritten) = A X, X (n x k) row-major.
template <typename T, typename I>
void csr_matmat(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                index_t k, const T* X, T* Y, int num_threads);

// W (n x k, row-major, overwritten) = A^T Y, Y (m x k) row-major: each thread's block of
// rows scattered into a private n x k buffer (thread 0: into W), added in thread order;
// fewer threads where their buffers would exceed max_buffer_bytes.
template <typename T, typename I>
void csr_rmatmat(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                 index_t k, const T* Y, T* W, int num_threads, std::size_t max_buffer_bytes);

}  // namespace eagle
