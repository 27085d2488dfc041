// Sketching kernels: apply a random embedding S (s x m) to A (m x n) without forming S.
//
// The randomness is drawn by the caller (eagle_sparse/sketch.py) from a seeded NumPy
// generator and passed in, so every backend applies the identical S: these kernels only
// do the arithmetic, in parallel with OpenMP and without races (each thread owns a set
// of output columns).
#pragma once

#include <cstddef>
#include <cstdint>

namespace eagle {

using index_t = std::ptrdiff_t;

// Sparse sign embedding: column i of S has `zeta` nonzeros, at rows rows[i*zeta + t]
// with values scale * signs[i*zeta + t] (signs +-1, scale 1/sqrt(zeta)).
//
// CSC input A (m x n; indptr[n+1], indices[nnz] row indices, data[nnz]), int32 or int64
// indices.  out is s x n in column-major order (out[j*s + r]); it is overwritten.
template <typename T, typename I>
void sparse_sign_csc(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                     index_t s, int zeta, const std::int32_t* rows, const std::int8_t* signs,
                     double scale, T* out, int num_threads);

// CSR input A (m x n; indptr[m+1], indices[nnz] column indices, data[nnz]), int32 or
// int64 indices; out is s x n row-major, overwritten.  Row i of A is added to the zeta
// rows of out that column i of S names: no conversion to CSC.  Threads split A's rows,
// each adding into a private copy of out (at most max_buffer_bytes of copies in all;
// fewer threads where they would not fit), summed at the end.
template <typename T, typename I>
void sparse_sign_csr(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                     index_t s, int zeta, const std::int32_t* rows, const std::int8_t* signs,
                     double scale, T* out, int num_threads, std::size_t max_buffer_bytes);

// Dense row-major input A (m x n); out is s x n row-major, overwritten.
template <typename T>
void sparse_sign_dense(index_t m, index_t n, const T* A, index_t s, int zeta,
                       const std::int32_t* rows, const std::int8_t* signs, double scale, T* out,
                       int num_threads);

// In-place fast Walsh-Hadamard transform along axis 0 of the row-major (m2 x n) array W
// (m2 a power of two; unnormalised: H H = m2 I).
template <typename T>
void fwht_rows(index_t m2, index_t n, T* W, int num_threads);

}  // namespace eagle

namespace eagle {

// The subsampled randomized Hadamard transform S A = scale R H D A without the m2-row
// transform: D = diag(signs) (m), H the m2 x m2 Walsh-Hadamard matrix (m2 a power of two,
// m <= m2; rows m..m2-1 of D A are zero), R the rows idx[0..s) in [0, m2).  Writing a row
// index as a = hi * L + lo (L a power of two), H = H_R (x) H_L, so
//     (H x)[a] = sum_t (-1)^popcount(hi & t) (H_L x_t)[lo],
// x_t the t-th chunk of L rows.  Each chunk of a block of W columns is transformed in
// cache (L log2 L butterflies per column) and only the s needed rows of it are added,
// with their sign, into the output: O(m2 W log2 L + s W m2 / L) per block and one pass over
// A, against the full transform's log2 m2 passes over an m2 x W buffer.  Chunks past row
// m are zero and skipped.  out (s x n) row-major, overwritten.
//
// Dense row-major A (m x n):
template <typename T>
void srht_dense(index_t m, index_t n, const T* A, const T* signs, index_t m2, index_t s,
                const std::int64_t* idx, double scale, T* out, int num_threads);
// CSC A (m x n), row indices sorted within each column (duplicates are summed):
template <typename T, typename I>
void srht_csc(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
              const T* signs, index_t m2, index_t s, const std::int64_t* idx, double scale,
              T* out, int num_threads);

}  // namespace eagle
