// Per-problem loop kernels behind the batched entry points (internal to csrc/).
//
// Each instruction-set variant is its own translation unit (small_kernels_<isa>.cpp)
// compiling small_kernels_impl.hpp with different flags; this header only names the
// tables of function pointers they export.  The batched drivers call these from inside
// an OpenMP region, which is why they are plain loops and never call BLAS.
#pragma once

#include <cmath>    // (the portable mode of small_kernels_impl.hpp: std::sqrt, HUGE_VAL)
#include <cstring>  // (std::memcpy)

#include "eagle_kernels.hpp"
#include "kernel_passes.hpp"

namespace eagle::detail {

template <typename T>
struct SmallKernelTable {
    const char* isa;
    // One step on one problem; `scratch` holds small_step_scratch(s) elements.
    void (*step)(const StepShape& s, const T* A, const T* B, T* C, T* D, T* A_out, T* B_out,
                 T* G, T* W, T* P, double eta_rho, double gamma_rho, double scale,
                 double zeta_rho2, T* scratch);
    // Power iteration on one (d x n) matrix from the unit start vector v0; returns sigma.
    // `scratch` holds small_norm_scratch(d, n) elements.
    double (*norm)(index_t d, index_t n, const T* A, const T* v0, int maxiter, double rtol,
                   T* scratch);
    // Row-envelope Cholesky in place, rows [begin, end) (those before begin factorised
    // already), and the solve with its factor (see eagle_kernels.hpp: envelope_cholesky,
    // envelope_solve).  `inv` holds n elements of scratch (1 / L[j, j] for j < begin on
    // entry).
    index_t (*envelope_factor)(index_t begin, index_t end, const std::int64_t* ptr,
                               const std::int64_t* first,
                               T* val, double rel_pivot, T* inv);
    void (*envelope_solve)(index_t n, const std::int64_t* ptr, const std::int64_t* first,
                           const T* val, T* x);
    // R = Y - M X for one (m x n) problem with k right-hand sides and the column norms of
    // R, X and M^T R (in double); `scratch` holds small_residual_scratch(n, k) elements.
    void (*residual)(index_t m, index_t n, index_t k, const T* M, const T* Y, const T* X,
                     T* R, double* nr, double* nx, double* ng, T* scratch);
    // One group of g samples of a fused kernel pass (kernel_passes.hpp): X (g x d, already
    // shifted), Zt (d x m, the landmarks transposed, shifted), zn (m) their squared norms;
    // V (t x m) in gram and apply mode; w (g) in gram mode, C (g x t, the weighted targets)
    // in rhs mode; acc (t x m) += the group's K^T diag(w) K V^T or K^T C; in apply mode
    // out (g x t) = K V^T.  `scratch` holds small_kernel_scratch(g, m, t) elements.
    void (*kernel_rows)(const eagle::KernelSpec& k, int mode, index_t g, index_t d, const T* X,
                        index_t m, const T* Zt, const T* zn, index_t t, const T* V,
                        const T* w, const T* C, T* acc, T* out, T* scratch);
};

inline index_t small_step_scratch(const StepShape& s) { return s.q * s.n; }
inline index_t small_norm_scratch(index_t d, index_t n) { return d + 2 * n; }
inline index_t small_residual_scratch(index_t n, index_t k) { return 2 * n * k; }
inline index_t small_kernel_scratch(index_t g, index_t m, index_t t) { return g * (m + t); }

// The table of the variant in use (eagle_kernels.cpp: the best the CPU runs, or the one
// set_kernel_isa chose).
template <typename T>
const SmallKernelTable<T>& active_kernels();

// Declared unconditionally so each definition gets external linkage; only those that
// CMake builds (EAGLE_HAVE_<ISA>_KERNELS) are referenced.
extern const SmallKernelTable<float> small_kernels_f32_generic;
extern const SmallKernelTable<double> small_kernels_f64_generic;
extern const SmallKernelTable<float> small_kernels_f32_avx2;
extern const SmallKernelTable<double> small_kernels_f64_avx2;
extern const SmallKernelTable<float> small_kernels_f32_avx512;
extern const SmallKernelTable<double> small_kernels_f64_avx512;

}  // namespace eagle::detail
