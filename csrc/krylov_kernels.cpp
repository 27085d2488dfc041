#include "krylov_kernels.hpp"

#include <algorithm>
#include <cmath>

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
index_t cg_csr(index_t n, const I* indptr, const I* indices, const T* data, const T* inv,
               T* x, T* r, T* p, T* q, CgState& state, double thresh, index_t maxiter,
               CgStatus& status) {
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
        for (index_t i = 0; i < n; ++i) {
            x[i] += alpha * p[i];
            const T ri = r[i] - alpha * q[i];
            r[i] = ri;
            const T zi = inv ? inv[i] * ri : ri;
            rr += static_cast<double>(ri) * static_cast<double>(ri);
            rho += static_cast<double>(ri) * static_cast<double>(zi);
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
        for (index_t i = 0; i < n; ++i) p[i] = (inv ? inv[i] * r[i] : r[i]) + beta * p[i];
        state.rr = rr;
        state.rho = rho;
    }
    return maxiter;
}

#define EAGLE_INSTANTIATE_CG(T, I)                                                          \
    template void csr_matvec<T, I>(index_t, const I*, const I*, const T*, const T*, T*);    \
    template void csr_normal_product<T, I>(index_t, index_t, const I*, const I*, const T*,   \
                                           index_t, const T*, T*, T*, double*);             \
    template index_t cg_csr<T, I>(index_t, const I*, const I*, const T*, const T*, T*, T*,   \
                                  T*, T*, CgState&, double, index_t, CgStatus&);

EAGLE_INSTANTIATE_CG(float, std::int32_t)
EAGLE_INSTANTIATE_CG(float, std::int64_t)
EAGLE_INSTANTIATE_CG(double, std::int32_t)
EAGLE_INSTANTIATE_CG(double, std::int64_t)

#undef EAGLE_INSTANTIATE_CG

}  // namespace eagle
