#include "krylov_kernels.hpp"

#include "omp_threads.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <vector>

namespace eagle {

namespace {

template <typename T, typename I>
inline T row_dot(const I* indptr, const I* indices, const T* data, const T* x, index_t i) {
    T s0 = 0, s1 = 0;  // two chains: the gathers of one row overlap
    index_t k = indptr[i];
    const index_t end = indptr[i + 1];
    for (; k + 1 < end; k += 2) {
        s0 += data[k] * x[indices[k]];
        s1 += data[k + 1] * x[indices[k + 1]];
    }
    if (k < end) s0 += data[k] * x[indices[k]];
    return s0 + s1;
}

inline index_t chunks_of(index_t n) { return (n + kCgChunk - 1) / kCgChunk; }

// The sum of the chunks' partial sums, in chunk order (every thread of a team computes
// the same bits).
inline double chunk_total(const double* part, index_t chunks) {
    double s = 0;
    for (index_t c = 0; c < chunks; ++c) s += part[c];
    return s;
}

// Rows [c0, c1) of chunk c, within [0, n).
inline index_t chunk_begin(index_t c) { return c * kCgChunk; }
inline index_t chunk_end(index_t n, index_t c) { return std::min(n, (c + 1) * kCgChunk); }

}  // namespace

int cg_threads(index_t n, index_t nnz, int requested) {
    // An iteration takes ~3-5 ns per stored entry on one core (Jacobi-scaled: 0.07 ms
    // at 5e4 entries, 0.32 ms at 2e5, 1.1 ms at 5e5 on the bench machine); the team's
    // three barriers an iteration cost microseconds on idle cores, and a thread the OS
    // deschedules stalls the team: on the shared 2-core machine under a load of 6, two
    // threads took 7-16 ms an iteration at 5e5 entries against one thread's 1.1 ms.
    // The threshold keeps every system that iterates in well under a millisecond on one
    // thread; it is an estimate from those figures, not a measured crossover (the
    // loaded machine showed none).
    if (requested <= 1 || nnz < kCgParallelMinNnz) return 1;
    return static_cast<int>(std::min<index_t>(requested, std::max<index_t>(1, chunks_of(n))));
}

index_t cg_part_start(index_t n, index_t parts, index_t b) {
    if (b >= parts) return n;
    return std::min(n, (b * chunks_of(n) / parts) * kCgChunk);
}

template <typename T, typename I>
void csr_matvec(index_t n, const I* indptr, const I* indices, const T* data, const T* x, T* y,
                int threads) {
    const int nt = std::max(1, threads);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (index_t i = 0; i < n; ++i) y[i] = row_dot(indptr, indices, data, x, i);
}

template <typename T, typename I>
void csr_normal_product(index_t rows, index_t cols, const I* indptr, const I* indices,
                        const T* data, index_t k, const T* x, T* q, T* w, double* qq) {
    std::fill(w, w + cols * k, T(0));
    std::fill(qq, qq + k, 0.0);
    if (k == 1) {
        double s2 = 0;
        for (index_t i = 0; i < rows; ++i) {
            const T t = row_dot(indptr, indices, data, x, i);
            q[i] = t;
            s2 += static_cast<double>(t) * static_cast<double>(t);
            for (index_t e = indptr[i]; e < indptr[i + 1]; ++e) w[indices[e]] += data[e] * t;
        }
        qq[0] = s2;
        return;
    }
    for (index_t i = 0; i < rows; ++i) {
        T* qi = q + i * k;
        std::fill(qi, qi + k, T(0));
        for (index_t e = indptr[i]; e < indptr[i + 1]; ++e) {
            const T a = data[e];
            const T* xr = x + static_cast<index_t>(indices[e]) * k;
            for (index_t c = 0; c < k; ++c) qi[c] += a * xr[c];
        }
        for (index_t c = 0; c < k; ++c) qq[c] += static_cast<double>(qi[c]) * qi[c];
        for (index_t e = indptr[i]; e < indptr[i + 1]; ++e) {
            const T a = data[e];
            T* wr = w + static_cast<index_t>(indices[e]) * k;
            for (index_t c = 0; c < k; ++c) wr[c] += a * qi[c];
        }
    }
}

namespace {

// ------------------------------------------------------------ the order and its rows

// Block b of the twisted order: rows [lo, hi), swept backwards where `rev` (odd b).
struct DiluBlock {
    index_t lo, hi;
    bool rev;
    index_t size() const { return hi - lo; }
    index_t row(index_t k) const { return rev ? hi - 1 - k : lo + k; }  // k-th in order
    index_t pos(index_t i) const { return rev ? hi - 1 - i : i - lo; }
};

inline DiluBlock dilu_block(index_t n, index_t blocks, index_t b) {
    return {cg_part_start(n, blocks, b), cg_part_start(n, blocks, b + 1), (b % 2) == 1};
}

inline index_t block_of(index_t n, index_t blocks, index_t i) {
    index_t b = 0;
    while (b + 1 < blocks && i >= cg_part_start(n, blocks, b + 1)) ++b;
    return b;
}

// Row i's entries before it in the order ([a0, a1) and [b0, b1)) and after it (the
// rest but the diagonal), for a sorted row of block bl whose diagonal entry is at dg.
struct DiluSpans {
    index_t a0, a1, b0, b1;
};

template <typename I>
inline index_t first_at_least(const I* indices, index_t e, index_t end, index_t col) {
    while (e < end && static_cast<index_t>(indices[e]) < col) ++e;
    return e;
}

template <typename I>
inline DiluSpans spans_before(const I* indptr, const I* indices, index_t i, index_t dg,
                              const DiluBlock& bl) {
    if (!bl.rev) return {indptr[i], dg, dg, dg};
    const index_t elo = first_at_least(indices, indptr[i], dg, bl.lo);
    return {indptr[i], elo, dg + 1, first_at_least(indices, dg + 1, indptr[i + 1], bl.hi)};
}

template <typename I>
inline DiluSpans spans_after(const I* indptr, const I* indices, index_t i, index_t dg,
                             const DiluBlock& bl) {
    const index_t end = indptr[i + 1];
    if (!bl.rev) return {dg + 1, end, end, end};
    const index_t elo = first_at_least(indices, indptr[i], dg, bl.lo);
    return {elo, dg, first_at_least(indices, dg + 1, end, bl.hi), end};
}

// sum over the spans of a_ij v_j (v null: ones)
template <typename T, typename I>
inline double span_sum(const DiluSpans& sp, const I* indices, const T* data, const double* v) {
    double s = 0;
    for (index_t e = sp.a0; e < sp.a1; ++e) s += data[e] * (v ? v[indices[e]] : 1.0);
    for (index_t e = sp.b0; e < sp.b1; ++e) s += data[e] * (v ? v[indices[e]] : 1.0);
    return s;
}

// ------------------------------------------------------------ the factor

// Validates rows [lo, hi) (sorted, with a positive diagonal entry; v_i positive), sets
// diag, and with one block (`s` given) sums s_j = sum_{k>j} a_kj v_k over their lower
// entries.
template <typename T, typename I>
DiluStatus dilu_scan(index_t lo, index_t hi, const I* indptr, const I* indices,
                     const T* data, const double* v, I* diag, double* s) {
    for (index_t i = lo; i < hi; ++i) {
        index_t e = indptr[i];
        const index_t end = indptr[i + 1];
        while (e < end && static_cast<index_t>(indices[e]) < i) ++e;
        if (e == end || static_cast<index_t>(indices[e]) != i) return {2, i};
        diag[i] = static_cast<I>(e);
        for (index_t k = e + 1; k < end; ++k)
            if (static_cast<index_t>(indices[k]) <= i) return {2, i};
        const double aii = data[e];
        if (!(aii > 0) || !std::isfinite(aii)) return {1, i};
        const double vi = v ? v[i] : 1.0;
        if (!(vi > 0) || !std::isfinite(vi)) return {3, i};
        if (s)
            for (index_t k = indptr[i]; k < e; ++k) s[indices[k]] += data[k] * vi;
    }
    return {0, -1};
}

// One block (the natural order): the pivots in order from the column sums s.
template <typename T, typename I>
DiluStatus dilu_pivots(index_t n, const I* indptr, const I* indices, const T* data,
                       double omega, double rel_pivot, const double* v, double* s, T* dinv,
                       const I* diag) {
    const double keep = 1.0 - omega;
    for (index_t i = 0; i < n; ++i) {
        const double aii = data[diag[i]];
        const double wi = v ? 1.0 / v[i] : 1.0;
        double d = aii;
        for (index_t e = indptr[i]; e < static_cast<index_t>(diag[i]); ++e) {
            const double a = data[e];
            const index_t j = indices[e];
            d -= a * (keep * a * static_cast<double>(dinv[j]) + s[j] * wi);
        }
        if (!(d > rel_pivot * aii) || !std::isfinite(d)) return {1, i};
        dinv[i] = static_cast<T>(1.0 / d);
        s[i] = omega * s[i] / d;
    }
    return {0, -1};
}

// Whether row j stores column i (a sorted row).
template <typename I>
inline bool stores(const I* indptr, const I* indices, index_t j, index_t i) {
    const I* b = indices + indptr[j];
    const I* e = indices + indptr[j + 1];
    const I* f = std::lower_bound(b, e, static_cast<I>(i));
    return f != e && static_cast<index_t>(*f) == i;
}

// The waits of the twisted order (every coupling between two blocks, stored both ways:
// else code 2 at its row).  A row waits in the forward sweep for its neighbours before
// it in other blocks, in the backward sweep for those after it.
template <typename I>
DiluStatus dilu_waits(index_t n, const I* indptr, const I* indices, DiluPlan& plan) {
    const index_t B = plan.blocks;
    plan.fwd.assign(static_cast<std::size_t>(B), {});
    plan.bwd.assign(static_cast<std::size_t>(B), {});
    for (index_t b = 0; b < B; ++b) {
        const DiluBlock bl = dilu_block(n, B, b);
        for (index_t k = 0; k < bl.size(); ++k) {
            const index_t i = bl.row(k);
            for (index_t e = indptr[i]; e < indptr[i + 1]; ++e) {
                const index_t j = indices[e];
                if (j >= bl.lo && j < bl.hi) continue;
                if (!stores(indptr, indices, j, i)) return {2, i};
                const index_t c = block_of(n, B, j);
                const DiluBlock other = dilu_block(n, B, c);
                if (c < b)  // before i: wait until j is done forwards
                    plan.fwd[b].push_back({k, c, other.pos(j) + 1});
                else  // after i: backwards, j comes first
                    plan.bwd[b].push_back({bl.size() - 1 - k, c, other.size() - other.pos(j)});
            }
        }
        std::reverse(plan.bwd[b].begin(), plan.bwd[b].end());
    }
    return {0, -1};
}

// The twisted order's pivots, block after block in order.
template <typename T, typename I>
DiluStatus dilu_twisted_pivots(index_t n, const I* indptr, const I* indices, const T* data,
                               double omega, double rel_pivot, const double* v,
                               index_t blocks, double* s, T* dinv, const I* diag) {
    for (index_t b = 0; b < blocks; ++b) {  // s_j = sum_{k after j} a_jk v_k
        const DiluBlock bl = dilu_block(n, blocks, b);
        for (index_t i = bl.lo; i < bl.hi; ++i)
            s[i] = span_sum(spans_after(indptr, indices, i, diag[i], bl), indices, data, v);
    }
    const double keep = 1.0 - omega;
    for (index_t b = 0; b < blocks; ++b) {
        const DiluBlock bl = dilu_block(n, blocks, b);
        for (index_t k = 0; k < bl.size(); ++k) {
            const index_t i = bl.row(k);
            const double aii = data[diag[i]];
            const double wi = v ? 1.0 / v[i] : 1.0;
            const DiluSpans sp = spans_before(indptr, indices, i, diag[i], bl);
            double d = aii;
            const auto drop = [&](index_t e) {
                const double a = data[e];
                const index_t j = indices[e];
                d -= a * (keep * a * static_cast<double>(dinv[j]) + s[j] * wi);
            };
            for (index_t e = sp.a0; e < sp.a1; ++e) drop(e);
            for (index_t e = sp.b0; e < sp.b1; ++e) drop(e);
            if (!(d > rel_pivot * aii) || !std::isfinite(d)) return {1, i};
            dinv[i] = static_cast<T>(1.0 / d);
            s[i] = omega * s[i] / d;
        }
    }
    return {0, -1};
}

}  // namespace

index_t dilu_blocks(index_t n, index_t blocks) {
    blocks = std::clamp<index_t>(blocks, 1, kDiluMaxBlocks);
    return std::min<index_t>(blocks, std::max<index_t>(1, chunks_of(n)));
}

template <typename T, typename I>
DiluStatus dilu_factor(index_t n, const I* indptr, const I* indices, const T* data,
                       double omega, double rel_pivot, const double* v, index_t blocks,
                       int threads, T* dinv, I* diag, DiluPlan& plan) {
    blocks = dilu_blocks(n, blocks);
    plan = DiluPlan{};
    plan.blocks = blocks;
    std::vector<double> s(static_cast<std::size_t>(n), 0.0);
    if (blocks == 1) {  // the natural order, as it always was
        const DiluStatus st = dilu_scan(0, n, indptr, indices, data, v, diag, s.data());
        if (st.code) return st;
        return dilu_pivots(n, indptr, indices, data, omega, rel_pivot, v, s.data(), dinv, diag);
    }
    const int nt = static_cast<int>(std::clamp<index_t>(threads, 1, blocks));
    std::vector<DiluStatus> st(static_cast<std::size_t>(blocks), DiluStatus{0, -1});
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (index_t b = 0; b < blocks; ++b)
        st[b] = dilu_scan<T, I>(cg_part_start(n, blocks, b), cg_part_start(n, blocks, b + 1),
                                indptr, indices, data, v, diag, nullptr);
    for (const DiluStatus& x : st)
        if (x.code) return x;
    const DiluStatus w = dilu_waits(n, indptr, indices, plan);
    if (w.code) return w;
    return dilu_twisted_pivots(n, indptr, indices, data, omega, rel_pivot, v, blocks, s.data(),
                               dinv, diag);
}

namespace {

// ------------------------------------------------------------ the sweeps

// z_i = (r_i - sum_{j<i} a_ij z_j) / d_i, row by row (r_i given): the natural order.
template <typename T, typename I>
inline void dilu_forward_row(index_t i, const I* indptr, const I* indices, const T* data,
                             const T* dinv, const I* diag, T ri, T* z) {
    T t0 = ri, t1 = 0;
    index_t e = indptr[i];
    const index_t end = diag[i];
    for (; e + 1 < end; e += 2) {
        t0 -= data[e] * z[indices[e]];
        t1 -= data[e + 1] * z[indices[e + 1]];
    }
    if (e < end) t0 -= data[e] * z[indices[e]];
    z[i] = (t0 + t1) * dinv[i];
}

// The natural order's backward sweep with D + L^T by columns, in place on the forward
// sweep's z; part[c] = r.z over chunk c, summed from its last row.
template <typename T, typename I>
void dilu_backward(index_t n, const I* indptr, const I* indices, const T* data,
                   const T* dinv, const I* diag, const T* r, T* z, double* part) {
    for (index_t c = chunks_of(n) - 1; c >= 0; --c) {
        double rz = 0;
        for (index_t i = chunk_end(n, c) - 1; i >= chunk_begin(c); --i) {
            const T zi = z[i];  // every row below has been scattered into it
            rz += static_cast<double>(r[i]) * static_cast<double>(zi);
            for (index_t e = indptr[i]; e < static_cast<index_t>(diag[i]); ++e) {
                const index_t j = indices[e];
                z[j] -= dinv[j] * data[e] * zi;
            }
        }
        part[c] = rz;
    }
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Rows a block's sweep has done, per block and sweep (a cache line each).
struct alignas(64) DiluProgress {
    std::atomic<index_t> fwd{0}, bwd{0};
};

inline void wait_for(const std::atomic<index_t>& done, index_t need) {
    for (int spins = 0; done.load(std::memory_order_acquire) < need; ++spins) {
        if (spins < 512)
            cpu_relax();
        else
            std::this_thread::yield();  // (more threads than cores)
    }
}

// What a block's sweeps share.
template <typename T, typename I>
struct Sweep {
    index_t n;
    const I* indptr;
    const I* indices;
    const T* data;
    const T* dinv;
    const I* diag;
    const DiluPlan* plan;
    DiluProgress* progress;
    T* z;
};

// Publishes a sweep's progress every 64 rows and at its end.
inline void publish(std::atomic<index_t>& done, index_t k, index_t size) {
    if (((k + 1) & 63) == 0 || k + 1 == size) done.store(k + 1, std::memory_order_release);
}

// Sums over the chunks of kCgChunk rows a sweep visits in its own order, one a chunk:
// add(i, v) adds v to row i's chunk, writing the chunk it leaves; close() writes the last.
// `out` null: nothing is written.
struct ChunkSums {
    double* out;
    index_t cur = -1;
    double acc = 0;

    void add(index_t i, double v) {
        if (i / kCgChunk != cur) {
            close();
            cur = i / kCgChunk;
            acc = 0;
        }
        acc += v;
    }
    void close() const {
        if (out && cur >= 0) out[cur] = acc;
    }
};

// Block b's forward sweep: y_i = (rhs(i) - sum_{j before i} a_ij y_j) / d_i in the
// order; prr[c] (where given) = sum of rhs(i)^2 over chunk c, in the sweep's order.
template <typename T, typename I, typename Rhs>
void twisted_forward(const Sweep<T, I>& sw, index_t b, Rhs rhs, double* prr) {
    const DiluBlock bl = dilu_block(sw.n, sw.plan->blocks, b);
    const std::vector<DiluWait>& waits = sw.plan->fwd[b];
    std::size_t w = 0;
    ChunkSums rr{prr};
    for (index_t k = 0; k < bl.size(); ++k) {
        const index_t i = bl.row(k);
        for (; w < waits.size() && waits[w].k == k; ++w)
            wait_for(sw.progress[waits[w].block].fwd, waits[w].need);
        const T ri = rhs(i);
        rr.add(i, static_cast<double>(ri) * static_cast<double>(ri));
        const DiluSpans sp = spans_before(sw.indptr, sw.indices, i, sw.diag[i], bl);
        T t = ri;
        for (index_t e = sp.a0; e < sp.a1; ++e) t -= sw.data[e] * sw.z[sw.indices[e]];
        for (index_t e = sp.b0; e < sp.b1; ++e) t -= sw.data[e] * sw.z[sw.indices[e]];
        sw.z[i] = t * sw.dinv[i];
        publish(sw.progress[b].fwd, k, bl.size());
    }
    rr.close();
}

// Block b's backward sweep, in place: z_i = y_i - dinv_i sum_{j after i} a_ij z_j in
// the reverse order; prz[c] = r.z over chunk c, in the sweep's order.
template <typename T, typename I>
void twisted_backward(const Sweep<T, I>& sw, index_t b, const T* r, double* prz) {
    const DiluBlock bl = dilu_block(sw.n, sw.plan->blocks, b);
    const std::vector<DiluWait>& waits = sw.plan->bwd[b];
    std::size_t w = 0;
    ChunkSums rz{prz};
    for (index_t k = 0; k < bl.size(); ++k) {
        const index_t i = bl.row(bl.size() - 1 - k);
        for (; w < waits.size() && waits[w].k == k; ++w)
            wait_for(sw.progress[waits[w].block].bwd, waits[w].need);
        const DiluSpans sp = spans_after(sw.indptr, sw.indices, i, sw.diag[i], bl);
        T t = 0;
        for (index_t e = sp.a0; e < sp.a1; ++e) t += sw.data[e] * sw.z[sw.indices[e]];
        for (index_t e = sp.b0; e < sp.b1; ++e) t += sw.data[e] * sw.z[sw.indices[e]];
        const T zi = sw.z[i] - sw.dinv[i] * t;
        sw.z[i] = zi;
        rz.add(i, static_cast<double>(r[i]) * static_cast<double>(zi));
        publish(sw.progress[b].bwd, k, bl.size());
    }
    rz.close();
}

// Thread t of `team`'s blocks [b0, b1) of B.
inline void my_blocks(index_t B, int t, int team, index_t& b0, index_t& b1) {
    b0 = B * t / team;
    b1 = B * (t + 1) / team;
}

// The twisted sweeps of blocks [b0, b1) (forwards in block order, then backwards in
// reverse block order: a block only waits for blocks before it in the sweep).
template <typename T, typename I, typename Rhs>
void twisted_solve(const Sweep<T, I>& sw, index_t b0, index_t b1, Rhs rhs, const T* r,
                   double* prr, double* prz) {
    for (index_t b = b0; b < b1; ++b) twisted_forward(sw, b, rhs, prr);
    for (index_t b = b1 - 1; b >= b0; --b) twisted_backward(sw, b, r, prz);
}

}  // namespace

template <typename T, typename I>
double dilu_apply(index_t n, const I* indptr, const I* indices, const T* data,
                  const T* dinv, const I* diag, const DiluPlan& plan, const T* r, T* z,
                  int threads) {
    const index_t nc = chunks_of(n);
    std::vector<double> part(static_cast<std::size_t>(nc), 0.0);
    if (plan.blocks <= 1) {
        for (index_t i = 0; i < n; ++i) dilu_forward_row(i, indptr, indices, data, dinv, diag, r[i], z);
        dilu_backward(n, indptr, indices, data, dinv, diag, r, z, part.data());
        return chunk_total(part.data(), nc);
    }
    std::vector<DiluProgress> progress(static_cast<std::size_t>(plan.blocks));
    const Sweep<T, I> sw{n, indptr, indices, data, dinv, diag, &plan, progress.data(), z};
    const int nt = static_cast<int>(std::clamp<index_t>(threads, 1, plan.blocks));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        index_t b0, b1;
        my_blocks(plan.blocks, detail::thread_id(), detail::team_size(), b0, b1);
        twisted_solve(sw, b0, b1, [r](index_t i) { return r[i]; }, r, nullptr, part.data());
    }
    return chunk_total(part.data(), nc);
}

template <typename T, typename I>
void cg_start(index_t n, const I* indptr, const I* indices, const T* data,
              const CgPreconditioner<T, I>& pre, const T* r, T* p, CgState& state,
              int threads) {
    const index_t nc = chunks_of(n);
    std::vector<double> part(static_cast<std::size_t>(2 * nc), 0.0);
    double* prr = part.data();
    double* prho = prr + nc;
    const bool ic = pre.dinv != nullptr;
    double rho = 0;
    if (ic) rho = dilu_apply(n, indptr, indices, data, pre.dinv, pre.diag, *pre.plan, r, p,
                             threads);
    const int nt = static_cast<int>(std::clamp<index_t>(threads, 1, std::max<index_t>(nc, 1)));
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (index_t c = 0; c < nc; ++c) {
        double rr = 0, rz = 0;
        for (index_t i = chunk_begin(c); i < chunk_end(n, c); ++i) {
            if (!ic) p[i] = pre.inv ? pre.inv[i] * r[i] : r[i];
            rr += static_cast<double>(r[i]) * static_cast<double>(r[i]);
            rz += static_cast<double>(r[i]) * static_cast<double>(p[i]);
        }
        prr[c] = rr;
        prho[c] = rz;
    }
    state.rr = chunk_total(prr, nc);
    state.rho = ic ? rho : chunk_total(prho, nc);
}

namespace {

// One thread's share of the loop: chunks [c0, c1) (rows [lo, hi)), the factor's blocks
// [b0, b1) where there is one.
struct CgShare {
    index_t c0, c1, lo, hi, b0, b1;
};

inline index_t factor_blocks(const DiluPlan* plan) { return plan ? plan->blocks : 1; }

template <typename T, typename I>
CgShare cg_share(index_t n, const CgPreconditioner<T, I>& pre, int t, int team) {
    CgShare s{};
    if (pre.dinv) {
        const index_t blocks = factor_blocks(pre.plan);
        my_blocks(blocks, t, team, s.b0, s.b1);
        s.lo = cg_part_start(n, blocks, s.b0);
        s.hi = cg_part_start(n, blocks, s.b1);
    } else {
        s.lo = cg_part_start(n, team, t);
        s.hi = cg_part_start(n, team, t + 1);
    }
    s.c0 = s.lo / kCgChunk;
    s.c1 = (s.hi + kCgChunk - 1) / kCgChunk;
    return s;
}

// q = A p over the share's chunks; part[c] = p.q over chunk c.
template <typename T, typename I>
void cg_product(index_t n, const CgShare& sh, const I* indptr, const I* indices,
                const T* data, const T* p, T* q, double* part) {
    for (index_t c = sh.c0; c < sh.c1; ++c) {
        double pq = 0;
        for (index_t i = chunk_begin(c); i < chunk_end(n, c); ++i) {
            const T s = row_dot(indptr, indices, data, p, i);
            q[i] = s;
            pq += static_cast<double>(p[i]) * static_cast<double>(s);
        }
        part[c] = pq;
    }
}

// x += alpha p, r -= alpha q and z = M^-1 r over the share; prr[c], prho[c]: r.r and
// r.z over chunk c.  With a factor of several blocks the sweeps wait for their
// neighbours (progress, reset by each block's owner before the iteration's first
// barrier).
template <typename T, typename I>
void cg_update(index_t n, const CgShare& sh, const I* indptr, const I* indices,
               const T* data, const CgPreconditioner<T, I>& pre, DiluProgress* progress,
               T alpha, T* x, T* r, const T* p, const T* q, double* prr, double* prho) {
    const auto step = [=](index_t i) {
        x[i] += alpha * p[i];
        const T ri = r[i] - alpha * q[i];
        r[i] = ri;
        return ri;
    };
    if (pre.dinv && factor_blocks(pre.plan) > 1) {
        const Sweep<T, I> sw{n, indptr, indices, data, pre.dinv, pre.diag, pre.plan, progress,
                             pre.z};
        twisted_solve(sw, sh.b0, sh.b1, step, r, prr, prho);
        return;
    }
    if (pre.dinv) {  // x, r updated and the forward sweep in one pass, then the backward
        for (index_t c = 0; c < chunks_of(n); ++c) {
            double rr = 0;
            for (index_t i = chunk_begin(c); i < chunk_end(n, c); ++i) {
                const T ri = step(i);
                rr += static_cast<double>(ri) * static_cast<double>(ri);
                dilu_forward_row(i, indptr, indices, data, pre.dinv, pre.diag, ri, pre.z);
            }
            prr[c] = rr;
        }
        dilu_backward(n, indptr, indices, data, pre.dinv, pre.diag, r, pre.z, prho);
        return;
    }
    const T* inv = pre.inv;
    for (index_t c = sh.c0; c < sh.c1; ++c) {
        double rr = 0, rho = 0;
        for (index_t i = chunk_begin(c); i < chunk_end(n, c); ++i) {
            const T ri = step(i);
            const T zi = inv ? inv[i] * ri : ri;
            rr += static_cast<double>(ri) * static_cast<double>(ri);
            rho += static_cast<double>(ri) * static_cast<double>(zi);
        }
        prr[c] = rr;
        prho[c] = rho;
    }
}

// p = z + beta p over the share's rows.
template <typename T, typename I>
void cg_direction(const CgShare& sh, const CgPreconditioner<T, I>& pre, T beta, const T* r,
                  T* p) {
    if (pre.dinv) {
        for (index_t i = sh.lo; i < sh.hi; ++i) p[i] = pre.z[i] + beta * p[i];
    } else {
        const T* inv = pre.inv;
        for (index_t i = sh.lo; i < sh.hi; ++i) p[i] = (inv ? inv[i] * r[i] : r[i]) + beta * p[i];
    }
}

}  // namespace

template <typename T, typename I>
index_t cg_csr(index_t n, const I* indptr, const I* indices, const T* data,
               const CgPreconditioner<T, I>& pre, T* x, T* r, T* p, T* q, CgState& state,
               double thresh, index_t maxiter, CgStatus& status, int threads) {
    const index_t nc = chunks_of(n);
    const index_t parts = pre.dinv ? factor_blocks(pre.plan) : std::max<index_t>(1, nc);
    const int nt = static_cast<int>(std::clamp<index_t>(threads, 1, parts));
    std::vector<double> buf(static_cast<std::size_t>(3 * nc), 0.0);
    double* ppq = buf.data();
    double* prr = ppq + nc;
    double* prho = prr + nc;
    index_t done = maxiter;
    CgStatus out = kCgMaxiter;
    CgState last = state;
    std::vector<DiluProgress> progress(static_cast<std::size_t>(factor_blocks(pre.plan)));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        // every thread runs the same scalar recurrence on the same (chunk-ordered) sums,
        // so all take the same branches; three barriers an iteration
        const CgShare sh = cg_share(n, pre, detail::thread_id(), detail::team_size());
        double rr = state.rr, rho = state.rho;
        CgStatus st = kCgMaxiter;
        index_t it = 0;
        for (; it < maxiter; ++it) {
            if (std::sqrt(rr) < thresh) {  // SciPy: norm(r) < atol (NaN goes on)
                st = kCgConverged;
                break;
            }
            cg_product(n, sh, indptr, indices, data, p, q, ppq);
            for (index_t b = sh.b0; b < sh.b1; ++b) {  // (read last before the last barrier)
                progress[b].fwd.store(0, std::memory_order_relaxed);
                progress[b].bwd.store(0, std::memory_order_relaxed);
            }
#pragma omp barrier
            const double alpha_d = rho / chunk_total(ppq, nc);
            cg_update(n, sh, indptr, indices, data, pre, progress.data(),
                      static_cast<T>(alpha_d), x, r, p, q, prr, prho);
#pragma omp barrier
            const double rr_new = chunk_total(prr, nc), rho_new = chunk_total(prho, nc);
            if (!std::isfinite(alpha_d) || !std::isfinite(rho_new)) {
                rr = rr_new;
                rho = rho_new;
                st = kCgBreakdown;
                ++it;
                break;
            }
            if (rho_new == 0 && rr_new == 0) {  // r = 0 exactly: solved (SciPy's beta: 0/0)
                rr = rho = 0;
                st = kCgConverged;
                ++it;
                break;
            }
            cg_direction(sh, pre, static_cast<T>(rho_new / rho), r, p);
            rr = rr_new;
            rho = rho_new;
#pragma omp barrier
        }
        if (detail::thread_id() == 0) {
            done = it;
            out = st;
            last = CgState{rr, rho};
        }
    }
    state = last;
    status = out;
    return done;
}

#define EAGLE_INSTANTIATE_CG(T, I)                                                          \
    template void csr_matvec<T, I>(index_t, const I*, const I*, const T*, const T*, T*, int); \
    template void csr_normal_product<T, I>(index_t, index_t, const I*, const I*, const T*,   \
                                           index_t, const T*, T*, T*, double*);             \
    template index_t cg_csr<T, I>(index_t, const I*, const I*, const T*,                     \
                                  const CgPreconditioner<T, I>&, T*, T*, T*, T*, CgState&,   \
                                  double, index_t, CgStatus&, int);                          \
    template void cg_start<T, I>(index_t, const I*, const I*, const T*,                      \
                                 const CgPreconditioner<T, I>&, const T*, T*, CgState&, int); \
    template DiluStatus dilu_factor<T, I>(index_t, const I*, const I*, const T*, double,     \
                                          double, const double*, index_t, int, T*, I*,       \
                                          DiluPlan&);                                        \
    template double dilu_apply<T, I>(index_t, const I*, const I*, const T*, const T*,        \
                                     const I*, const DiluPlan&, const T*, T*, int);

EAGLE_INSTANTIATE_CG(float, std::int32_t)
EAGLE_INSTANTIATE_CG(float, std::int64_t)
EAGLE_INSTANTIATE_CG(double, std::int32_t)
EAGLE_INSTANTIATE_CG(double, std::int64_t)

#undef EAGLE_INSTANTIATE_CG

}  // namespace eagle
