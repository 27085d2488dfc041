#include "sketch_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "omp_threads.hpp"

namespace eagle {

using detail::default_threads;

template <typename T, typename I>
void sparse_sign_csc(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                     index_t s, int zeta, const std::int32_t* rows, const std::int8_t* signs,
                     double scale, T* out, int num_threads) {
    (void)m;
    const T sc = static_cast<T>(scale);
#pragma omp parallel for schedule(dynamic, 16) num_threads(default_threads(num_threads))
    for (index_t j = 0; j < n; ++j) {
        T* col = out + j * s;
        std::memset(col, 0, sizeof(T) * static_cast<std::size_t>(s));
        for (index_t k = indptr[j]; k < static_cast<index_t>(indptr[j + 1]); ++k) {
            const index_t i = indices[k];
            const T v = sc * data[k];
            const std::int32_t* r = rows + i * zeta;
            const std::int8_t* sg = signs + i * zeta;
            for (int t = 0; t < zeta; ++t) col[r[t]] += sg[t] > 0 ? v : -v;
        }
    }
}

template <typename T, typename I>
void sparse_sign_csr(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                     index_t s, int zeta, const std::int32_t* rows, const std::int8_t* signs,
                     double scale, T* out, int num_threads, std::size_t max_buffer_bytes) {
    const T sc = static_cast<T>(scale);
    const std::size_t size = static_cast<std::size_t>(s) * static_cast<std::size_t>(n);
    int nt = default_threads(num_threads);
    const std::size_t per = std::max<std::size_t>(1, size * sizeof(T));
    nt = static_cast<int>(std::min<std::size_t>(nt, 1 + max_buffer_bytes / per));
    nt = static_cast<int>(std::min<index_t>(nt, std::max<index_t>(1, m / 4096)));
    std::vector<T> extra(static_cast<std::size_t>(nt - 1) * size);
    std::memset(out, 0, sizeof(T) * size);
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num();
        const int team = omp_get_num_threads();
        T* o = t == 0 ? out : extra.data() + static_cast<std::size_t>(t - 1) * size;
        if (t > 0) std::memset(o, 0, sizeof(T) * size);
        const index_t i0 = m * t / team, i1 = m * (t + 1) / team;
        for (index_t i = i0; i < i1; ++i) {
            const std::int32_t* r = rows + i * zeta;
            const std::int8_t* sg = signs + i * zeta;
            const I k0 = indptr[i], k1 = indptr[i + 1];
            for (int z = 0; z < zeta; ++z) {
                T* dst = o + static_cast<index_t>(r[z]) * n;
                const T v = sg[z] > 0 ? sc : -sc;
                for (I k = k0; k < k1; ++k) dst[indices[k]] += v * data[k];
            }
        }
#pragma omp barrier
        if (team > 1) {
#pragma omp for schedule(static)
            for (index_t e = 0; e < static_cast<index_t>(size); ++e) {
                T acc = out[e];
                for (int u = 1; u < team; ++u) acc += extra[static_cast<std::size_t>(u - 1) * size + e];
                out[e] = acc;
            }
        }
    }
}

template <typename T>
void sparse_sign_dense(index_t m, index_t n, const T* A, index_t s, int zeta,
                       const std::int32_t* rows, const std::int8_t* signs, double scale, T* out,
                       int num_threads) {
    const T sc = static_cast<T>(scale);
    // Each thread owns a block of columns, so the scattered row updates never race.
    const index_t block = 256;
    const index_t nblocks = (n + block - 1) / block;
    std::memset(out, 0, sizeof(T) * static_cast<std::size_t>(s * n));
#pragma omp parallel for schedule(static) num_threads(default_threads(num_threads))
    for (index_t bj = 0; bj < nblocks; ++bj) {
        const index_t c0 = bj * block, c1 = std::min(n, c0 + block);
        for (index_t i = 0; i < m; ++i) {
            const T* a = A + i * n;
            for (int t = 0; t < zeta; ++t) {
                T* o = out + static_cast<index_t>(rows[i * zeta + t]) * n;
                const T v = signs[i * zeta + t] > 0 ? sc : -sc;
                for (index_t c = c0; c < c1; ++c) o[c] += v * a[c];
            }
        }
    }
}

template <typename T>
void fwht_rows(index_t m2, index_t n, T* W, int num_threads) {
    const index_t block = 64;
    const index_t nblocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) num_threads(default_threads(num_threads))
    for (index_t bj = 0; bj < nblocks; ++bj) {
        const index_t c0 = bj * block, c1 = std::min(n, c0 + block);
        for (index_t h = 1; h < m2; h *= 2) {
            for (index_t i = 0; i < m2; i += 2 * h) {
                for (index_t k = i; k < i + h; ++k) {
                    T* x = W + k * n;
                    T* y = W + (k + h) * n;
                    for (index_t c = c0; c < c1; ++c) {
                        const T a = x[c], b = y[c];
                        x[c] = a + b;
                        y[c] = a - b;
                    }
                }
            }
        }
    }
}


// ------------------------------------------------------------------ SRHT (see the header)

namespace {

// Bytes of the chunk a thread transforms in cache (L rows x W columns).
constexpr std::size_t kSrhtChunkBytes = std::size_t(256) << 10;

inline int parity(std::uint64_t x) {
    x ^= x >> 32;
    x ^= x >> 16;
    x ^= x >> 8;
    x ^= x >> 4;
    x ^= x >> 2;
    x ^= x >> 1;
    return static_cast<int>(x & 1u);
}

// The chunk's rows L: a power of two near kSrhtChunkBytes / (W sizeof(T)), at least s (the
// per-chunk accumulation, s W adds, then stays below the chunk's L W log2 L), at most m2.
template <typename T, int W>
index_t srht_chunk_rows(index_t m2, index_t s) {
    const index_t want = static_cast<index_t>(kSrhtChunkBytes / (W * sizeof(T)));
    index_t L = 1;
    while (L < want || L < s) L *= 2;
    return std::min(L, m2);
}

// In-place unnormalised Walsh-Hadamard transform of the L rows of buf (L x W, row-major).
template <typename T, int W>
void fwht_chunk(T* buf, index_t L) {
    for (index_t h = 1; h < L; h *= 2) {
        for (index_t i = 0; i < L; i += 2 * h) {
            for (index_t k = i; k < i + h; ++k) {
                T* x = buf + k * W;
                T* y = buf + (k + h) * W;
                for (int c = 0; c < W; ++c) {
                    const T a = x[c], b = y[c];
                    x[c] = a + b;
                    y[c] = a - b;
                }
            }
        }
    }
}

// The driver: blocks of W columns, chunks of L rows; fill(buf, r0, rows, c0, wv) writes
// D A[r0:r0+rows, c0:c0+wv] into the zeroed chunk buf (L x W).  Threads take whole column
// blocks where there are enough of them, else the chunks of each block (private sums,
// added into out).
template <typename T, int W, typename Fill>
void srht_blocks(index_t m, index_t n, index_t m2, index_t s, const std::int64_t* idx,
                 double scale, T* out, int num_threads, const Fill& fill) {
    const index_t L = srht_chunk_rows<T, W>(m2, s);
    int shift = 0;
    while ((index_t(1) << shift) < L) ++shift;
    const index_t chunks = (m + L - 1) / L;  // (chunks past row m are zero)
    const index_t blocks = (n + W - 1) / W;
    std::memset(out, 0, sizeof(T) * static_cast<std::size_t>(s * n));
    if (chunks == 0 || blocks == 0 || s == 0) return;
    std::vector<std::uint64_t> hi(static_cast<std::size_t>(s));
    std::vector<index_t> lo(static_cast<std::size_t>(s));
    for (index_t i = 0; i < s; ++i) {
        hi[i] = static_cast<std::uint64_t>(idx[i]) >> shift;
        lo[i] = static_cast<index_t>(idx[i] & (L - 1));
    }
    const int nt = default_threads(num_threads);
    const bool by_block = blocks >= nt || chunks < 2 * static_cast<index_t>(nt);
    const T sc = static_cast<T>(scale);
#pragma omp parallel num_threads(nt)
    {
        std::vector<T> buf(static_cast<std::size_t>(L * W)), acc(static_cast<std::size_t>(s * W));
        auto chunk = [&](index_t c0, int wv, index_t t) {
            std::fill(buf.begin(), buf.end(), T(0));
            fill(buf.data(), t * L, std::min(L, m - t * L), c0, wv);
            fwht_chunk<T, W>(buf.data(), L);
            const std::uint64_t tt = static_cast<std::uint64_t>(t);
            for (index_t i = 0; i < s; ++i) {
                const T* src = buf.data() + lo[i] * W;
                T* dst = acc.data() + i * W;
                if (parity(hi[i] & tt)) {
                    for (int c = 0; c < W; ++c) dst[c] -= src[c];
                } else {
                    for (int c = 0; c < W; ++c) dst[c] += src[c];
                }
            }
        };
        auto add_out = [&](index_t c0, int wv) {
            for (index_t i = 0; i < s; ++i)
                for (int c = 0; c < wv; ++c) out[i * n + c0 + c] += sc * acc[i * W + c];
        };
        if (by_block) {
#pragma omp for schedule(dynamic, 1)
            for (index_t b = 0; b < blocks; ++b) {
                const index_t c0 = b * W;
                const int wv = static_cast<int>(std::min<index_t>(W, n - c0));
                std::fill(acc.begin(), acc.end(), T(0));
                for (index_t t = 0; t < chunks; ++t) chunk(c0, wv, t);
                add_out(c0, wv);
            }
        } else {
            for (index_t b = 0; b < blocks; ++b) {
                const index_t c0 = b * W;
                const int wv = static_cast<int>(std::min<index_t>(W, n - c0));
                std::fill(acc.begin(), acc.end(), T(0));
#pragma omp for schedule(static) nowait
                for (index_t t = 0; t < chunks; ++t) chunk(c0, wv, t);
#pragma omp critical(eagle_srht_sum)
                add_out(c0, wv);
#pragma omp barrier
            }
        }
    }
}

}  // namespace

template <typename T>
void srht_dense(index_t m, index_t n, const T* A, const T* signs, index_t m2, index_t s,
                const std::int64_t* idx, double scale, T* out, int num_threads) {
    auto run = [&](auto width) {
        constexpr int W = decltype(width)::value;
        srht_blocks<T, W>(m, n, m2, s, idx, scale, out, num_threads,
                          [&](T* buf, index_t r0, index_t rows, index_t c0, int wv) {
                              for (index_t r = 0; r < rows; ++r) {
                                  const T sg = signs[r0 + r];
                                  const T* a = A + (r0 + r) * n + c0;
                                  T* b = buf + r * W;
                                  for (int c = 0; c < wv; ++c) b[c] = sg * a[c];
                              }
                          });
    };
    if (n == 1)
        run(std::integral_constant<int, 1>{});
    else
        run(std::integral_constant<int, 8>{});
}

template <typename T, typename I>
void srht_csc(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
              const T* signs, index_t m2, index_t s, const std::int64_t* idx, double scale,
              T* out, int num_threads) {
    auto run = [&](auto width) {
        constexpr int W = decltype(width)::value;
        srht_blocks<T, W>(
            m, n, m2, s, idx, scale, out, num_threads,
            [&](T* buf, index_t r0, index_t rows, index_t c0, int wv) {
                for (int c = 0; c < wv; ++c) {
                    const I* begin = indices + indptr[c0 + c];
                    const I* end = indices + indptr[c0 + c + 1];
                    // (rows sorted within the column: the chunk's entries are one run)
                    for (const I* k = std::lower_bound(begin, end, static_cast<I>(r0));
                         k < end && static_cast<index_t>(*k) < r0 + rows; ++k) {
                        const index_t row = *k;
                        buf[(row - r0) * W + c] += signs[row] * data[k - indices];
                    }
                }
            });
    };
    if (n == 1)
        run(std::integral_constant<int, 1>{});
    else
        run(std::integral_constant<int, 8>{});
}

#define EAGLE_SKETCH_INSTANTIATE(T)                                                        \
    template void sparse_sign_csc<T, std::int32_t>(                                        \
        index_t, index_t, const std::int32_t*, const std::int32_t*, const T*, index_t, int, \
        const std::int32_t*, const std::int8_t*, double, T*, int);                         \
    template void sparse_sign_csc<T, std::int64_t>(                                        \
        index_t, index_t, const std::int64_t*, const std::int64_t*, const T*, index_t, int, \
        const std::int32_t*, const std::int8_t*, double, T*, int);                         \
    template void sparse_sign_dense<T>(index_t, index_t, const T*, index_t, int,           \
                                       const std::int32_t*, const std::int8_t*, double, T*, \
                                       int);                                               \
    template void fwht_rows<T>(index_t, index_t, T*, int);                                 \
    template void srht_dense<T>(index_t, index_t, const T*, const T*, index_t, index_t,     \
                                const std::int64_t*, double, T*, int);                     \
    template void srht_csc<T, std::int32_t>(index_t, index_t, const std::int32_t*,          \
                                            const std::int32_t*, const T*, const T*, index_t, \
                                            index_t, const std::int64_t*, double, T*, int); \
    template void srht_csc<T, std::int64_t>(index_t, index_t, const std::int64_t*,          \
                                            const std::int64_t*, const T*, const T*, index_t, \
                                            index_t, const std::int64_t*, double, T*, int); \
    template void sparse_sign_csr<T, std::int32_t>(                                        \
        index_t, index_t, const std::int32_t*, const std::int32_t*, const T*, index_t, int, \
        const std::int32_t*, const std::int8_t*, double, T*, int, std::size_t);            \
    template void sparse_sign_csr<T, std::int64_t>(                                        \
        index_t, index_t, const std::int64_t*, const std::int64_t*, const T*, index_t, int, \
        const std::int32_t*, const std::int8_t*, double, T*, int, std::size_t);

EAGLE_SKETCH_INSTANTIATE(float)
EAGLE_SKETCH_INSTANTIATE(double)

}  // namespace eagle
