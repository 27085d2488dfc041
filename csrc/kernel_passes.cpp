// The OpenMP driver of the fused kernel passes (kernel_passes.hpp); the per-group work is
// the loop kernels' kernel_rows (small_kernels_impl.hpp), in the SIMD variant in use.
#include "kernel_passes.hpp"

#include <algorithm>
#include <vector>

#include "omp_threads.hpp"
#include "small_kernels.hpp"

namespace eagle {

namespace {

// Samples per block (each block's sums are formed in T, then added in double in block
// order) and per group (the kernel rows formed at once: kGroup x m values of T in cache).
constexpr index_t kBlock = 256;
constexpr index_t kGroup = 16;
// At most this many blocks' partial sums are held at once (fewer where t m is large).
constexpr index_t kWave = 64;
constexpr index_t kWaveBytes = index_t{64} << 20;

}  // namespace

template <typename Tin, typename T>
void kernel_pass(const KernelSpec& spec, int mode, index_t n, index_t d, const Tin* X,
                 index_t m, const double* Z, index_t t, const double* V, const double* w,
                 const double* Y, double* out, int num_threads) {
    const index_t out_size = (mode == kApply ? n : m) * t;
    std::fill(out, out + out_size, 0.0);
    if (n == 0 || m == 0 || t == 0) return;
    const auto& kern = detail::active_kernels<T>();

    // The landmarks, shifted by their mean for the translation-invariant kernels, as
    // Zt (d x m) in T with their squared norms zn (of the rounded values).
    std::vector<double> shift(static_cast<size_t>(d), 0.0);
    if (spec.kind == kRbf || spec.kind == kLaplacian) {
        for (index_t j = 0; j < m; ++j)
            for (index_t c = 0; c < d; ++c) shift[c] += Z[j * d + c];
        for (index_t c = 0; c < d; ++c) shift[c] /= static_cast<double>(m);
    }
    std::vector<T> Zt(static_cast<size_t>(d * m)), zn(static_cast<size_t>(m));
    for (index_t j = 0; j < m; ++j) {
        double s = 0.0;
        for (index_t c = 0; c < d; ++c) {
            const T v = static_cast<T>(Z[j * d + c] - shift[c]);
            Zt[c * m + j] = v;
            s += static_cast<double>(v) * static_cast<double>(v);
        }
        zn[j] = static_cast<T>(s);
    }
    std::vector<T> Vt;
    if (mode != kRhs) {
        Vt.resize(static_cast<size_t>(t * m));
        for (index_t j = 0; j < m; ++j)
            for (index_t c = 0; c < t; ++c) Vt[c * m + j] = static_cast<T>(V[j * t + c]);
    }

    const index_t blocks = (n + kBlock - 1) / kBlock;
    const index_t tm = t * m;
    const index_t wave = mode == kApply
        ? blocks
        : std::clamp<index_t>(kWaveBytes / static_cast<index_t>(sizeof(T)) / tm, 1, kWave);
    const int nt = static_cast<int>(
        std::min<index_t>(detail::default_threads(num_threads), std::min(wave, blocks)));
    std::vector<T> partial(mode == kApply ? 0 : static_cast<size_t>(std::min(wave, blocks) * tm));
    // per thread: the loop kernel's scratch, the group's samples (g x d), weights (g),
    // weighted targets or outputs (g x t); padded to a cache line
    const index_t raw = detail::small_kernel_scratch(kGroup, m, t) + kGroup * (d + 1 + t);
    const index_t stride = detail::padded<T>(raw);
    std::vector<T> scratch(static_cast<size_t>(stride * nt));
    const double* shift_p = shift.data();

    for (index_t w0 = 0; w0 < blocks; w0 += wave) {
        const index_t wn = std::min(wave, blocks - w0);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (index_t q = 0; q < wn; ++q) {
            T* scr = scratch.data() + detail::thread_id() * stride;
            T* Xg = scr + detail::small_kernel_scratch(kGroup, m, t);
            T* wg = Xg + kGroup * d;
            T* Cg = wg + kGroup;
            T* acc = mode == kApply ? nullptr : partial.data() + q * tm;
            if (acc != nullptr) std::fill(acc, acc + tm, T(0));
            const index_t b0 = (w0 + q) * kBlock, b1 = std::min(n, b0 + kBlock);
            for (index_t i0 = b0; i0 < b1; i0 += kGroup) {
                const index_t g = std::min(kGroup, b1 - i0);
                for (index_t r = 0; r < g; ++r) {
                    const Tin* x = X + (i0 + r) * d;
                    for (index_t c = 0; c < d; ++c)
                        Xg[r * d + c] = static_cast<T>(static_cast<double>(x[c]) - shift_p[c]);
                    const double wi = w != nullptr ? w[i0 + r] : 1.0;
                    wg[r] = static_cast<T>(wi);
                    if (mode == kRhs)
                        for (index_t c = 0; c < t; ++c)
                            Cg[r * t + c] = static_cast<T>(wi * Y[(i0 + r) * t + c]);
                }
                kern.kernel_rows(spec, mode, g, d, Xg, m, Zt.data(), zn.data(), t, Vt.data(),
                                 wg, Cg, acc, Cg, scr);
                if (mode == kApply)
                    for (index_t r = 0; r < g; ++r)
                        for (index_t c = 0; c < t; ++c)
                            out[(i0 + r) * t + c] = static_cast<double>(Cg[r * t + c]);
            }
        }
        if (mode == kApply) continue;
        // out (m x t) += the wave's block sums (t x m each), in block order
        const T* part = partial.data();
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (index_t e = 0; e < tm; ++e) {
            const index_t c = e / m, j = e % m;
            double s = out[j * t + c];
            for (index_t q = 0; q < wn; ++q) s += static_cast<double>(part[q * tm + e]);
            out[j * t + c] = s;
        }
    }
}

#define EAGLE_KERNEL_PASS(TIN, T)                                                          \
    template void kernel_pass<TIN, T>(const KernelSpec&, int, index_t, index_t, const TIN*, \
                                      index_t, const double*, index_t, const double*,      \
                                      const double*, const double*, double*, int);
EAGLE_KERNEL_PASS(double, double)
EAGLE_KERNEL_PASS(double, float)
EAGLE_KERNEL_PASS(float, double)
EAGLE_KERNEL_PASS(float, float)
#undef EAGLE_KERNEL_PASS

}  // namespace eagle
