// Fused kernel passes for Nystrom kernel ridge regression without the n x m kernel matrix
// (Falkon's iteration, eagle_sparse/_lsq/_falkon.py): each pass computes the kernel rows
// K(x_i, Z) of a few samples at a time, uses them for the products below while they are
// in cache, and drops them.  Memory O(m d + m t) besides the output, whatever n.
//
// The kernels are scikit-learn's pairwise kernels of the same names and parameters:
//   linear      <x, z>
//   polynomial  (gamma <x, z> + coef0)^degree      (integer degree >= 0)
//   rbf         exp(-gamma ||x - z||^2)
//   laplacian   exp(-gamma ||x - z||_1)
//   sigmoid     tanh(gamma <x, z> + coef0)
// The translation-invariant ones (rbf, laplacian) are evaluated on data shifted by the
// landmarks' mean, which leaves the kernel unchanged and keeps ||x||^2 + ||z||^2 - 2<x, z>
// from cancelling where the data sit far from the origin; exp is a vectorised polynomial
// (relative error a few units in the last place; arguments below -708 (float: -87) give 0).
//
// The products, for X (n x d), landmarks Z (m x d), K = K(X, Z) (n x m), weights w (n):
//   gram   out (m x t) = K^T diag(w) K V        V (m x t)
//   rhs    out (m x t) = K^T diag(w) Y          Y (n x t)
//   apply  out (n x t) = K V
// in the kernel precision T (float or double; the samples may be either), each block of
// 256 samples summed in T and the blocks summed in double, in a fixed order: the result
// does not depend on the number of threads.  Input is validated by the bindings.
#pragma once

#include "eagle_kernels.hpp"

namespace eagle {

enum KernelKind : int { kLinear = 0, kPolynomial = 1, kRbf = 2, kLaplacian = 3, kSigmoid = 4 };
enum PassMode : int { kGram = 0, kRhs = 1, kApply = 2 };

struct KernelSpec {
    int kind;
    double gamma;
    double coef0;
    int degree;
};

// w may be nullptr (unit weights); V is read in gram and apply mode, Y in rhs mode.
template <typename Tin, typename T>
void kernel_pass(const KernelSpec& spec, int mode, index_t n, index_t d, const Tin* X,
                 index_t m, const double* Z, index_t t, const double* V, const double* w,
                 const double* Y, double* out, int num_threads);

}  // namespace eagle
