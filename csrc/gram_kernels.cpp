#include "gram_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "omp_threads.hpp"

namespace eagle {

using detail::default_threads;

namespace {

// Fewer threads than this many rows each only add their start-up and buffers.
constexpr index_t kMinRowsPerThread = 2048;
// A Gram band of fewer rows than this per thread is not worth a thread's pass over A.
constexpr index_t kMinBandRows = 64;

// Threads for a pass over m rows: the request, at most one per kMinRowsPerThread rows.
int row_threads(int requested, index_t m) {
    const index_t most = std::max<index_t>(1, m / kMinRowsPerThread);
    return static_cast<int>(std::min<index_t>(default_threads(requested), most));
}

// The fixed blocks of rows: block b is [split[b], split[b + 1]), balanced on stored
// entries plus rows (indptr[i] + i, which increases with i), a function of the pattern
// and the number of blocks only.
template <typename I>
std::vector<index_t> split_rows(index_t m, const I* indptr, int parts) {
    std::vector<index_t> split(static_cast<std::size_t>(parts) + 1, m);
    split[0] = 0;
    const index_t total = static_cast<index_t>(indptr[m]) + m;
    for (int b = 1; b < parts; ++b) {
        const index_t target = total / parts * b + total % parts * b / parts;
        index_t lo = split[b - 1], hi = m;
        while (lo < hi) {  // the first row i with indptr[i] + i >= target
            const index_t mid = lo + (hi - lo) / 2;
            if (static_cast<index_t>(indptr[mid]) + mid < target)
                lo = mid + 1;
            else
                hi = mid;
        }
        split[b] = lo;
    }
    return split;
}

template <typename I>
index_t longest_row(index_t m, const I* indptr) {
    index_t most = 0;
    for (index_t i = 0; i < m; ++i)
        most = std::max<index_t>(most, static_cast<index_t>(indptr[i + 1] - indptr[i]));
    return most;
}

// Row i's entries as (column, value) in increasing column order (duplicates kept, in
// their stored order), in `row` (capacity reserved by the caller: no allocation).
template <typename T, typename I>
void sorted_row(const I* indptr, const I* indices, const T* data, index_t i,
                std::vector<std::pair<index_t, T>>& row) {
    row.clear();
    bool sorted = true;
    for (index_t e = indptr[i]; e < static_cast<index_t>(indptr[i + 1]); ++e) {
        const index_t c = indices[e];
        if (!row.empty() && c < row.back().first) sorted = false;
        row.emplace_back(c, data[e]);
    }
    if (!sorted)
        std::stable_sort(row.begin(), row.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
}

// Adds row's products to the rows [j0, j1) of the upper triangle of A^T A held in B
// (row j at B + (j - j0) n): for each pair p <= q of the sorted row with column c_p in
// the band, B[c_p][c_q] += v_p v_q; a pair of duplicates (c_p = c_q, p < q) stands for
// both of its orders.
template <typename T>
void add_row(const std::vector<std::pair<index_t, T>>& row, index_t j0, index_t j1,
             index_t n, T* B) {
    const index_t len = static_cast<index_t>(row.size());
    for (index_t p = 0; p < len; ++p) {
        const index_t j = row[p].first;
        if (j < j0) continue;
        if (j >= j1) break;
        const T wp = row[p].second;
        T* b = B + (j - j0) * n;
        b[j] += wp * wp;
        for (index_t q = p + 1; q < len; ++q) {
            const index_t c = row[q].first;
            const T f = wp * row[q].second;
            b[c] += f;
            if (c == j) b[j] += f;
        }
    }
}

}  // namespace

// The bands of G's rows the threads own: band b is [band[b], band[b + 1]), balanced on
// the upper triangle's area (row j holds n - j entries).
std::vector<index_t> split_bands(index_t n, int parts) {
    std::vector<index_t> band(static_cast<std::size_t>(parts) + 1, n);
    band[0] = 0;
    const double total = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
    for (int b = 1; b < parts; ++b) {  // (n - j)^2 / 2 left above row j: solve for j
        const double left = total * (1.0 - static_cast<double>(b) / parts);
        const auto j = static_cast<index_t>(static_cast<double>(n) - std::sqrt(2.0 * left));
        band[b] = std::clamp<index_t>(j, band[b - 1], n);
    }
    return band;
}

template <typename T, typename I>
void csr_gram(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
              bool equilibrate, T* G, T* scales, int num_threads) {
    // Each thread owns a band of G's rows and reads every row of A, adding the products
    // whose first column lies in its band: no private copies of G and no reduction, a
    // cache footprint of its band only, and every entry of G summed over A's rows in
    // row order by one thread: the same bits at any thread count.  (Private n x n sums
    // per block of rows, added afterwards, gained nothing on two threads: 8 MB each at
    // n = 1000, scattered updates out of cache.)
    const int nt = static_cast<int>(std::min<index_t>(
        default_threads(num_threads), std::max<index_t>(1, n / kMinBandRows)));
#pragma omp parallel for schedule(static) num_threads(default_threads(num_threads))
    for (index_t j = 0; j < n; ++j) std::fill(G + j * n, G + (j + 1) * n, T(0));
    if (n == 0) return;
    const std::vector<index_t> band = split_bands(n, nt);
    std::vector<std::vector<std::pair<index_t, T>>> rows(static_cast<std::size_t>(nt));
    const index_t longest = longest_row(m, indptr);
    for (auto& r : rows) r.reserve(static_cast<std::size_t>(longest));
#pragma omp parallel for schedule(static, 1) num_threads(nt)
    for (int b = 0; b < nt; ++b) {
        const index_t j0 = band[b], j1 = band[b + 1];
        if (j0 == j1) continue;
        auto& row = rows[static_cast<std::size_t>(b)];
        for (index_t i = 0; i < m; ++i) {
            const index_t lo = indptr[i], hi = indptr[i + 1];
            if (lo == hi) continue;
            sorted_row(indptr, indices, data, i, row);
            add_row(row, j0, j1, n, G + j0 * n);
        }
    }
    for (index_t j = 0; j < n; ++j) {
        const T g = G[j * n + j];
        scales[j] = equilibrate && g > 0 ? T(1) / std::sqrt(g) : T(1);
    }
    // (scaled by rows of the upper triangle, then the lower triangle filled by rows: each
    // thread writes rows of its own, so no two threads share a cache line)
#pragma omp parallel num_threads(default_threads(num_threads))
    {
#pragma omp for schedule(dynamic, 16)
        for (index_t j = 0; j < n; ++j) {
            const T dj = scales[j];
            T* g = G + j * n;
            for (index_t c = j; c < n; ++c) g[c] *= dj * scales[c];
        }
#pragma omp for schedule(dynamic, 16)
        for (index_t c = 1; c < n; ++c) {
            T* g = G + c * n;
            for (index_t j = 0; j < c; ++j) g[j] = G[j * n + c];
        }
    }
}

template <typename T, typename I>
void csr_matmat(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                index_t k, const T* X, T* Y, int num_threads) {
    (void)n;
    if (k == 1) {  // (two chains: the gathers of one row overlap)
#pragma omp parallel for schedule(static) num_threads(row_threads(num_threads, m))
        for (index_t i = 0; i < m; ++i) {
            T s0 = 0, s1 = 0;
            index_t e = indptr[i];
            const index_t end = indptr[i + 1];
            for (; e + 1 < end; e += 2) {
                s0 += data[e] * X[indices[e]];
                s1 += data[e + 1] * X[indices[e + 1]];
            }
            if (e < end) s0 += data[e] * X[indices[e]];
            Y[i] = s0 + s1;
        }
        return;
    }
#pragma omp parallel for schedule(static) num_threads(row_threads(num_threads, m))
    for (index_t i = 0; i < m; ++i) {
        T* y = Y + i * k;
        std::fill(y, y + k, T(0));
        for (index_t e = indptr[i]; e < static_cast<index_t>(indptr[i + 1]); ++e) {
            const T a = data[e];
            const T* x = X + static_cast<index_t>(indices[e]) * k;
            for (index_t c = 0; c < k; ++c) y[c] += a * x[c];
        }
    }
}

template <typename T, typename I>
void csr_rmatmat(index_t m, index_t n, const I* indptr, const I* indices, const T* data,
                 index_t k, const T* Y, T* W, int num_threads, std::size_t max_buffer_bytes) {
    const std::size_t size = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
    int nt = row_threads(num_threads, m);
    const std::size_t per = std::max<std::size_t>(1, size * sizeof(T));
    nt = static_cast<int>(std::min<std::size_t>(nt, 1 + max_buffer_bytes / per));
    const std::vector<index_t> split = split_rows(m, indptr, nt);
    std::vector<T> extra(static_cast<std::size_t>(nt - 1) * size);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static, 1)
        for (int b = 0; b < nt; ++b) {
            T* B = b == 0 ? W : extra.data() + static_cast<std::size_t>(b - 1) * size;
            std::fill(B, B + size, T(0));
            for (index_t i = split[b]; i < split[b + 1]; ++i) {
                const T* y = Y + i * k;
                const index_t e0 = indptr[i], e1 = indptr[i + 1];
                if (k == 1) {
                    const T yi = y[0];
                    for (index_t e = e0; e < e1; ++e) B[indices[e]] += data[e] * yi;
                    continue;
                }
                for (index_t e = e0; e < e1; ++e) {
                    const T a = data[e];
                    T* w = B + static_cast<index_t>(indices[e]) * k;
                    for (index_t c = 0; c < k; ++c) w[c] += a * y[c];
                }
            }
        }
        if (nt > 1) {
#pragma omp for schedule(static)
            for (std::size_t e = 0; e < size; ++e) {
                T acc = W[e];
                for (int b = 1; b < nt; ++b)
                    acc += extra[static_cast<std::size_t>(b - 1) * size + e];
                W[e] = acc;
            }
        }
    }
}

#define EAGLE_INSTANTIATE_GRAM(T, I)                                                       \
    template void csr_gram<T, I>(index_t, index_t, const I*, const I*, const T*, bool, T*,  \
                                 T*, int);                                                  \
    template void csr_matmat<T, I>(index_t, index_t, const I*, const I*, const T*, index_t, \
                                   const T*, T*, int);                                      \
    template void csr_rmatmat<T, I>(index_t, index_t, const I*, const I*, const T*,         \
                                    index_t, const T*, T*, int, std::size_t);

EAGLE_INSTANTIATE_GRAM(float, std::int32_t)
EAGLE_INSTANTIATE_GRAM(float, std::int64_t)
EAGLE_INSTANTIATE_GRAM(double, std::int32_t)
EAGLE_INSTANTIATE_GRAM(double, std::int64_t)

#undef EAGLE_INSTANTIATE_GRAM

}  // namespace eagle
