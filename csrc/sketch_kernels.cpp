#include "sketch_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

namespace eagle {

namespace {
int threads_or_default(int num_threads) {
    return num_threads > 0 ? num_threads : omp_get_max_threads();
}
}  // namespace

template <typename T>
void sparse_sign_csc(index_t m, index_t n, const std::int64_t* indptr,
                     const std::int64_t* indices, const T* data, index_t s, int zeta,
                     const std::int32_t* rows, const std::int8_t* signs, double scale, T* out,
                     int num_threads) {
    (void)m;
    const T sc = static_cast<T>(scale);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads_or_default(num_threads))
    for (index_t j = 0; j < n; ++j) {
        T* col = out + j * s;
        std::memset(col, 0, sizeof(T) * static_cast<std::size_t>(s));
        for (std::int64_t k = indptr[j]; k < indptr[j + 1]; ++k) {
            const std::int64_t i = indices[k];
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
    int nt = threads_or_default(num_threads);
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
#pragma omp parallel for schedule(static) num_threads(threads_or_default(num_threads))
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
#pragma omp parallel for schedule(static) num_threads(threads_or_default(num_threads))
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

#define EAGLE_SKETCH_INSTANTIATE(T)                                                        \
    template void sparse_sign_csc<T>(index_t, index_t, const std::int64_t*,                \
                                     const std::int64_t*, const T*, index_t, int,          \
                                     const std::int32_t*, const std::int8_t*, double, T*,  \
                                     int);                                                 \
    template void sparse_sign_dense<T>(index_t, index_t, const T*, index_t, int,           \
                                       const std::int32_t*, const std::int8_t*, double, T*, \
                                       int);                                               \
    template void fwht_rows<T>(index_t, index_t, T*, int);                                 \
    template void sparse_sign_csr<T, std::int32_t>(                                        \
        index_t, index_t, const std::int32_t*, const std::int32_t*, const T*, index_t, int, \
        const std::int32_t*, const std::int8_t*, double, T*, int, std::size_t);            \
    template void sparse_sign_csr<T, std::int64_t>(                                        \
        index_t, index_t, const std::int64_t*, const std::int64_t*, const T*, index_t, int, \
        const std::int32_t*, const std::int8_t*, double, T*, int, std::size_t);

EAGLE_SKETCH_INSTANTIATE(float)
EAGLE_SKETCH_INSTANTIATE(double)

}  // namespace eagle
