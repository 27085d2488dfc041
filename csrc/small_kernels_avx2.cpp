// AVX2 + FMA (256-bit vectors) build of the per-problem loop kernels (see small_kernels_impl.hpp);
// the compiler flags for this file are set in CMakeLists.txt.
#include "small_kernels.hpp"

#define EAGLE_VEC_BYTES 32

namespace {
#include "small_kernels_impl.hpp"
}  // namespace

namespace eagle::detail {
const SmallKernelTable<float> small_kernels_f32_avx2 = {"avx2", &step_small<float>,
                                                      &norm_small<float>,
    &envelope_factor_small<float>, &envelope_solve_small<float>,
    &residual_small<float>, &kernel_rows_small<float>};
const SmallKernelTable<double> small_kernels_f64_avx2 = {"avx2", &step_small<double>,
                                                       &norm_small<double>,
    &envelope_factor_small<double>, &envelope_solve_small<double>,
    &residual_small<double>, &kernel_rows_small<double>};
}  // namespace eagle::detail
