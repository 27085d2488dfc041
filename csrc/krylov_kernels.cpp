#include "krylov_kernels.hpp"

#include <algorithm>
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

}  // namespace

template <typename T, typename I>
void csr_matvec(index_t n, const I* indptr, const I* indices, const T* data, const T* x, T* y) {
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

template <typename T, typename I>
DiluStatus dilu_factor(index_t n, const I* indptr, const I* indices, const T* data,
                       double omega, double rel_pivot, const double* v, T* dinv, I* diag) {
    // s[j]: sum_{k>j} a_kj v_k, then omega s_j / d_j once d_j is known (v null: ones)
    std::vector<double> s(static_cast<std::size_t>(n), 0.0);
    for (index_t i = 0; i < n; ++i) {
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
        for (index_t k = indptr[i]; k < e; ++k) s[indices[k]] += data[k] * vi;
    }
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

namespace {

// z_i = (r_i - sum_{j<i} a_ij z_j) / d_i, row by row (r_i given).
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

// The backward sweep with D + L^T by columns, in place on the forward sweep's z;
// returns r.z.
template <typename T, typename I>
double dilu_backward(index_t n, const I* indptr, const I* indices, const T* data,
                     const T* dinv, const I* diag, const T* r, T* z) {
    double rz = 0;
    for (index_t i = n - 1; i >= 0; --i) {
        const T zi = z[i];  // every row below has been scattered into it
        rz += static_cast<double>(r[i]) * static_cast<double>(zi);
        for (index_t e = indptr[i]; e < static_cast<index_t>(diag[i]); ++e) {
            const index_t j = indices[e];
            z[j] -= dinv[j] * data[e] * zi;
        }
    }
    return rz;
}

}  // namespace

template <typename T, typename I>
double dilu_apply(index_t n, const I* indptr, const I* indices, const T* data,
                  const T* dinv, const I* diag, const T* r, T* z) {
    for (index_t i = 0; i < n; ++i) dilu_forward_row(i, indptr, indices, data, dinv, diag, r[i], z);
    return dilu_backward(n, indptr, indices, data, dinv, diag, r, z);
}

template <typename T, typename I>
index_t cg_csr(index_t n, const I* indptr, const I* indices, const T* data,
               const CgPreconditioner<T, I>& pre, T* x, T* r, T* p, T* q, CgState& state,
               double thresh, index_t maxiter, CgStatus& status) {
    const T* inv = pre.inv;
    const bool ic = pre.dinv != nullptr;
    status = kCgMaxiter;
    for (index_t it = 0; it < maxiter; ++it) {
        if (std::sqrt(state.rr) < thresh) {  // SciPy: norm(r) < atol (NaN goes on)
            status = kCgConverged;
            return it;
        }
        double pq = 0;
        for (index_t i = 0; i < n; ++i) {
            const T s = row_dot(indptr, indices, data, p, i);
            q[i] = s;
            pq += static_cast<double>(p[i]) * static_cast<double>(s);
        }
        const double alpha_d = state.rho / pq;
        const T alpha = static_cast<T>(alpha_d);
        double rr = 0, rho = 0;
        if (ic) {  // x, r updated and the forward sweep in one pass, then the backward
            for (index_t i = 0; i < n; ++i) {
                x[i] += alpha * p[i];
                const T ri = r[i] - alpha * q[i];
                r[i] = ri;
                rr += static_cast<double>(ri) * static_cast<double>(ri);
                dilu_forward_row(i, indptr, indices, data, pre.dinv, pre.diag, ri, pre.z);
            }
            rho = dilu_backward(n, indptr, indices, data, pre.dinv, pre.diag, r, pre.z);
        } else {
            for (index_t i = 0; i < n; ++i) {
                x[i] += alpha * p[i];
                const T ri = r[i] - alpha * q[i];
                r[i] = ri;
                const T zi = inv ? inv[i] * ri : ri;
                rr += static_cast<double>(ri) * static_cast<double>(ri);
                rho += static_cast<double>(ri) * static_cast<double>(zi);
            }
        }
        if (!std::isfinite(alpha_d) || !std::isfinite(rho)) {
            state.rr = rr;
            state.rho = rho;
            status = kCgBreakdown;
            return it + 1;
        }
        if (rho == 0 && rr == 0) {  // r = 0 exactly: solved (SciPy's beta would be 0/0)
            state.rr = state.rho = 0;
            status = kCgConverged;
            return it + 1;
        }
        const T beta = static_cast<T>(rho / state.rho);
        if (ic) {
            for (index_t i = 0; i < n; ++i) p[i] = pre.z[i] + beta * p[i];
        } else {
            for (index_t i = 0; i < n; ++i) p[i] = (inv ? inv[i] * r[i] : r[i]) + beta * p[i];
        }
        state.rr = rr;
        state.rho = rho;
    }
    return maxiter;
}

#define EAGLE_INSTANTIATE_CG(T, I)                                                          \
    template void csr_matvec<T, I>(index_t, const I*, const I*, const T*, const T*, T*);    \
    template void csr_normal_product<T, I>(index_t, index_t, const I*, const I*, const T*,   \
                                           index_t, const T*, T*, T*, double*);             \
    template index_t cg_csr<T, I>(index_t, const I*, const I*, const T*,                     \
                                  const CgPreconditioner<T, I>&, T*, T*, T*, T*, CgState&,   \
                                  double, index_t, CgStatus&);                               \
    template DiluStatus dilu_factor<T, I>(index_t, const I*, const I*, const T*, double,     \
                                          double, const double*, T*, I*);                                   \
    template double dilu_apply<T, I>(index_t, const I*, const I*, const T*, const T*,        \
                                     const I*, const T*, T*);

EAGLE_INSTANTIATE_CG(float, std::int32_t)
EAGLE_INSTANTIATE_CG(float, std::int64_t)
EAGLE_INSTANTIATE_CG(double, std::int32_t)
EAGLE_INSTANTIATE_CG(double, std::int64_t)

#undef EAGLE_INSTANTIATE_CG

}  // namespace eagle
