// pybind11 bindings of the compiled kernels: module eagle_sparse._core.
//
// This is the only file that includes pybind11 (its headers dominate compile time).  It
// is also the boundary where input is validated: the kernels write into their arguments
// in place, so every array must already be a NumPy array of the exact dtype, C-contiguous,
// aligned and (for outputs) writeable -- converting silently would write into a temporary
// copy and lose the result.  Only the per-problem scalars and the `active` mask of the
// batched step, which are read-only and tiny, are converted when needed.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "blas.hpp"
#include "eagle_kernels.hpp"
#include "krylov_kernels.hpp"
#include "sketch_kernels.hpp"
#include "sketched_step.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace py = pybind11;
using eagle::index_t;

namespace {

// 0: use the OpenMP default (OMP_NUM_THREADS, threadpoolctl limits, cores).
std::atomic<int> g_num_threads{0};

int kernel_threads() {
    const int n = g_num_threads.load(std::memory_order_relaxed);
    if (n > 0) return n;
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

std::string shape_str(const std::vector<index_t>& shape) {
    std::ostringstream os;
    os << '(';
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    if (shape.size() == 1) os << ',';
    os << ')';
    return os.str();
}

std::vector<index_t> shape_of(const py::array& a) {
    return std::vector<index_t>(a.shape(), a.shape() + a.ndim());
}

constexpr int kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;

// Validates the arguments of one call, remembering them to check for overlap.
class ArgChecker {
public:
    explicit ArgChecker(const char* fn) : fn_(fn) {}

    [[noreturn]] void fail_value(const std::string& msg) const {
        throw py::value_error(std::string(fn_) + ": " + msg);
    }
    [[noreturn]] void fail_type(const std::string& msg) const {
        throw py::type_error(std::string(fn_) + ": " + msg);
    }

    // An ndarray of float32/float64 used as the reference dtype of the call.
    py::array reference(const py::object& obj, const char* name) {
        py::array a = ndarray(obj, name);
        if (!py::array_t<float>::check_(a) && !py::array_t<double>::check_(a)) {
            fail_type(std::string(name) + " must have dtype float32 or float64, got " +
                      std::string(py::str(a.dtype())));
        }
        layout(a, name, false);
        return a;
    }

    // An ndarray of exactly dtype T and the given shape, C-contiguous, aligned, and
    // writeable when written.  `spec` names the shape for the error message.
    template <typename T>
    py::array operand(const py::object& obj, const char* name, bool written,
                      const std::vector<index_t>& shape, const char* spec) {
        py::array a = ndarray(obj, name);
        if (!py::array_t<T>::check_(a)) {
            fail_type(std::string(name) + " has dtype " + std::string(py::str(a.dtype())) +
                      " but the call's dtype (from A) is " +
                      std::string(py::str(py::dtype::of<T>())) +
                      "; all arrays must share one dtype");
        }
        check_shape(a, name, shape, spec);
        layout(a, name, written);
        return a;
    }

    // One extent of an argument, read before its full check (p from B, q from C).
    index_t extent(const py::object& obj, const char* name, int ndim, int axis,
                   const char* spec) const {
        py::array a = ndarray(obj, name);
        if (a.ndim() != ndim) {
            fail_value(std::string(name) + " must have shape " + spec + ", got " +
                       shape_str(shape_of(a)));
        }
        return a.shape(axis);
    }

    void check_shape(const py::array& a, const char* name, const std::vector<index_t>& shape,
                     const char* spec) const {
        if (shape_of(a) != shape) {
            fail_value(std::string(name) + " must have shape " + spec + " = " +
                       shape_str(shape) + ", got " + shape_str(shape_of(a)));
        }
    }

    // Outputs must not share memory with any other argument (inputs may share).
    void check_overlap() const {
        for (size_t i = 0; i < seen_.size(); ++i) {
            for (size_t j = i + 1; j < seen_.size(); ++j) {
                const Seen& a = seen_[i];
                const Seen& b = seen_[j];
                if (!a.written && !b.written) continue;
                if (a.lo < b.hi && b.lo < a.hi) {
                    fail_value(std::string(b.name) + " shares memory with " + a.name +
                               "; the kernels write in place, so outputs must be distinct "
                               "arrays");
                }
            }
        }
    }

private:
    struct Seen {
        const char* name;
        const char* lo;
        const char* hi;
        bool written;
    };

    py::array ndarray(const py::object& obj, const char* name) const {
        if (!py::isinstance<py::array>(obj)) {
            fail_type(std::string(name) + " must be a numpy.ndarray, got " +
                      std::string(py::str(py::type::of(obj).attr("__name__"))));
        }
        return py::reinterpret_borrow<py::array>(obj);
    }

    void layout(const py::array& a, const char* name, bool written) {
        if (!(a.flags() & py::array::c_style)) {
            fail_value(std::string(name) +
                       " must be C-contiguous (use numpy.ascontiguousarray; kernels read and "
                       "write the buffer directly)");
        }
        if (!(a.flags() & kAligned)) fail_value(std::string(name) + " must be aligned");
        if (written && !a.writeable()) fail_value(std::string(name) + " must be writeable");
        if (a.nbytes() > 0) {
            const char* lo = static_cast<const char*>(a.data());
            seen_.push_back({name, lo, lo + a.nbytes(), written});
        }
    }

    const char* fn_;
    std::vector<Seen> seen_;
};

template <typename T>
T* wptr(const py::array& a) {
    return static_cast<T*>(const_cast<void*>(a.data()));
}
template <typename T>
const T* rptr(const py::array& a) {
    return static_cast<const T*>(a.data());
}

void check_int32(ArgChecker& chk, const std::vector<index_t>& dims) {
    for (index_t v : dims) {
        if (v > static_cast<index_t>(INT32_MAX)) {
            chk.fail_value("dimensions above 2**31 - 1 are not supported by the 32-bit BLAS");
        }
    }
}

std::uint64_t seed_to_u64(const py::object& seed) {
    if (seed.is_none()) return 0;
    py::int_ s(seed);  // raises TypeError for non-integers
    // Reduce modulo 2**64 so negative and large seeds are accepted deterministically.
    return static_cast<std::uint64_t>(PyLong_AsUnsignedLongLongMask(s.ptr()));
}

// ------------------------------------------------------------------ eagle_step

// The operands one step reads and writes, checked against A (d, n): B (p, n), C (d, q),
// D (p, q), A_out (d, n), B_out (p, n), G and P (n, n), W (n, q).  Shared by the single
// step and the fused steps (which add their own buffers before check_overlap).
struct StepOperands {
    eagle::StepShape s;
    py::array b, c, dd, ao, bo, g, w, pp;
};

template <typename T>
StepOperands step_operands(ArgChecker& chk, const py::array& A, const py::object& B,
                           const py::object& C, const py::object& D, const py::object& A_out,
                           const py::object& B_out, const py::object& G, const py::object& W,
                           const py::object& P) {
    if (A.ndim() != 2) chk.fail_value("A must be 2-dimensional (d, n), got shape " +
                                      shape_str(shape_of(A)));
    const index_t d = A.shape(0), n = A.shape(1);
    const index_t p = chk.extent(B, "B", 2, 0, "(p, n)");
    const index_t q = chk.extent(C, "C", 2, 1, "(d, q)");
    check_int32(chk, {d, n, p, q});
    StepOperands o{{d, n, p, q}, {}, {}, {}, {}, {}, {}, {}, {}};
    o.b = chk.operand<T>(B, "B", false, {p, n}, "(p, n)");
    o.c = chk.operand<T>(C, "C", true, {d, q}, "(d, q)");
    o.dd = chk.operand<T>(D, "D", true, {p, q}, "(p, q)");
    o.ao = chk.operand<T>(A_out, "A_out", true, {d, n}, "(d, n)");
    o.bo = chk.operand<T>(B_out, "B_out", true, {p, n}, "(p, n)");
    o.g = chk.operand<T>(G, "G", true, {n, n}, "(n, n)");
    o.w = chk.operand<T>(W, "W", true, {n, q}, "(n, q)");
    o.pp = chk.operand<T>(P, "P", true, {n, n}, "(n, n)");
    return o;
}

template <typename T>
void step_typed(ArgChecker& chk, const py::array& A, const py::object& B, const py::object& C,
                const py::object& D, const py::object& A_out, const py::object& B_out,
                const py::object& G, const py::object& W, const py::object& P, double eta_rho,
                double gamma_rho, double scale, double zeta_rho2) {
    const StepOperands o = step_operands<T>(chk, A, B, C, D, A_out, B_out, G, W, P);
    chk.check_overlap();

    py::gil_scoped_release nogil;
    eagle::eagle_step<T>(o.s, rptr<T>(A), rptr<T>(o.b), wptr<T>(o.c), wptr<T>(o.dd),
                         wptr<T>(o.ao), wptr<T>(o.bo), wptr<T>(o.g), wptr<T>(o.w),
                         wptr<T>(o.pp), eta_rho, gamma_rho, scale, zeta_rho2);
}

void eagle_step(const py::object& A, const py::object& B, const py::object& C,
                const py::object& D, const py::object& A_out, const py::object& B_out,
                const py::object& G, const py::object& W, const py::object& P, double eta_rho,
                double gamma_rho, double scale, double zeta_rho2) {
    ArgChecker chk("eagle_step");
    py::array a = chk.reference(A, "A");
    if (py::array_t<double>::check_(a))
        step_typed<double>(chk, a, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale,
                           zeta_rho2);
    else
        step_typed<float>(chk, a, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale,
                          zeta_rho2);
}

// An optional per-step or per-problem array of n values (None: nullptr, every step cubic).
struct OptionalScalars {
    py::array_t<double, py::array::c_style | py::array::forcecast> a;
    bool given = false;  // (a default-constructed array_t is an empty array, not null)
    const double* data() const { return given ? a.data() : nullptr; }
};

// ------------------------------------------------------------------ eagle_steps

using scalar_array = py::array_t<double, py::array::c_style | py::array::forcecast>;

template <typename T>
void steps_typed(ArgChecker& chk, const py::array& A, const py::object& B, const py::object& C,
                 const py::object& D, const py::object& Dsnap, const py::object& A_out,
                 const py::object& B_out, const py::object& G, const py::object& traces,
                 const py::object& W, const py::object& W2, const py::object& P,
                 const py::object& Q, const py::object& Tm, const scalar_array& eta,
                 const scalar_array& gamma, const scalar_array& scale,
                 const OptionalScalars& zeta, bool resume, bool defer) {
    const index_t k = eta.ndim() == 1 ? eta.shape(0) : -1;
    if (k < 1) chk.fail_value("eta_rho must be a non-empty 1-D array (one value per step)");
    chk.check_shape(gamma, "gamma_rho", {k}, "(k,)");
    chk.check_shape(scale, "scale", {k}, "(k,)");
    if (zeta.given) chk.check_shape(zeta.a, "zeta_rho2", {k}, "(k,)");
    const StepOperands o = step_operands<T>(chk, A, B, C, D, A_out, B_out, G, W, P);
    const index_t n = o.s.n, p = o.s.p, q = o.s.q;
    py::array ds = chk.operand<T>(Dsnap, "Dsnap", true, {k - 1, p, q}, "(k - 1, p, q)");
    py::array tr = chk.operand<double>(traces, "traces", true, {k}, "(k,)");
    py::array w2 = chk.operand<T>(W2, "W2", true, {n, q}, "(n, q)");
    py::array qq = chk.operand<T>(Q, "Q", true, {n, n}, "(n, n)");
    py::array tt = chk.operand<T>(Tm, "T", true, {n, n}, "(n, n)");
    chk.check_overlap();

    py::gil_scoped_release nogil;
    eagle::eagle_steps<T>(o.s, static_cast<int>(k), rptr<T>(A), rptr<T>(o.b), wptr<T>(o.c),
                          wptr<T>(o.dd), wptr<T>(ds), wptr<T>(o.ao), wptr<T>(o.bo),
                          wptr<T>(o.g), wptr<double>(tr), wptr<T>(o.w), wptr<T>(w2),
                          wptr<T>(o.pp), wptr<T>(qq), wptr<T>(tt), eta.data(), gamma.data(),
                          scale.data(), zeta.data(), resume, defer);
}

void eagle_steps(const py::object& A, const py::object& B, const py::object& C,
                 const py::object& D, const py::object& Dsnap, const py::object& A_out,
                 const py::object& B_out, const py::object& G, const py::object& traces,
                 const py::object& W, const py::object& W2, const py::object& P,
                 const py::object& Q, const py::object& Tm, const py::object& eta_rho,
                 const py::object& gamma_rho, const py::object& scale,
                 const py::object& zeta_rho2, bool resume, bool defer) {
    ArgChecker chk("eagle_steps");
    py::array a = chk.reference(A, "A");
    scalar_array e = scalar_array::ensure(eta_rho), g = scalar_array::ensure(gamma_rho),
                 sc = scalar_array::ensure(scale);
    if (!e || !g || !sc) chk.fail_type("eta_rho, gamma_rho and scale must be real 1-D arrays");
    OptionalScalars z;
    if (!zeta_rho2.is_none()) {
        z.a = scalar_array::ensure(zeta_rho2);
        if (!z.a) chk.fail_type("zeta_rho2 must be a real 1-D array or None");
        z.given = true;
    }
    if (py::array_t<double>::check_(a))
        steps_typed<double>(chk, a, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, Tm, e,
                            g, sc, z, resume, defer);
    else
        steps_typed<float>(chk, a, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, Tm, e,
                           g, sc, z, resume, defer);
}

// ------------------------------------------------------------------ eagle_step_batched
using mask_array = py::array_t<bool, py::array::c_style | py::array::forcecast>;

template <typename Arr>
Arr per_problem(ArgChecker& chk, const py::object& obj, const char* name, index_t b) {
    Arr a = Arr::ensure(obj);
    if (!a) {
        chk.fail_type(std::string(name) + " must be a real array of shape (b,) = (" +
                      std::to_string(b) + ",)");
    }
    chk.check_shape(a, name, {b}, "(b,)");
    return a;
}

template <typename T>
void step_batched_typed(ArgChecker& chk, const py::array& A, const py::object& B,
                        const py::object& C, const py::object& D, const py::object& A_out,
                        const py::object& B_out, const py::object& G, const py::object& W,
                        const py::object& P, const py::object& eta_rho,
                        const py::object& gamma_rho, const py::object& scale,
                        const py::object& active, const py::object& zeta_rho2) {
    if (A.ndim() != 3) chk.fail_value("A must be 3-dimensional (b, d, n), got shape " +
                                      shape_str(shape_of(A)));
    const index_t nb = A.shape(0), d = A.shape(1), n = A.shape(2);
    const index_t p = chk.extent(B, "B", 3, 1, "(b, p, n)");
    const index_t q = chk.extent(C, "C", 3, 2, "(b, d, q)");
    check_int32(chk, {d, n, p, q});

    py::array b = chk.operand<T>(B, "B", false, {nb, p, n}, "(b, p, n)");
    py::array c = chk.operand<T>(C, "C", true, {nb, d, q}, "(b, d, q)");
    py::array dd = chk.operand<T>(D, "D", true, {nb, p, q}, "(b, p, q)");
    py::array ao = chk.operand<T>(A_out, "A_out", true, {nb, d, n}, "(b, d, n)");
    py::array bo = chk.operand<T>(B_out, "B_out", true, {nb, p, n}, "(b, p, n)");
    py::array g = chk.operand<T>(G, "G", true, {nb, n, n}, "(b, n, n)");
    py::array w = chk.operand<T>(W, "W", true, {nb, n, q}, "(b, n, q)");
    py::array pp = chk.operand<T>(P, "P", true, {nb, n, n}, "(b, n, n)");
    chk.check_overlap();
    scalar_array eta = per_problem<scalar_array>(chk, eta_rho, "eta_rho", nb);
    scalar_array gam = per_problem<scalar_array>(chk, gamma_rho, "gamma_rho", nb);
    scalar_array sc = per_problem<scalar_array>(chk, scale, "scale", nb);
    mask_array act = per_problem<mask_array>(chk, active, "active", nb);
    OptionalScalars z;
    if (!zeta_rho2.is_none()) {
        z.a = per_problem<scalar_array>(chk, zeta_rho2, "zeta_rho2", nb);
        z.given = true;
    }

    const eagle::StepShape s{d, n, p, q};
    const int nt = kernel_threads();
    py::gil_scoped_release nogil;
    eagle::eagle_step_batched<T>(nb, s, rptr<T>(A), rptr<T>(b), wptr<T>(c), wptr<T>(dd),
                                 wptr<T>(ao), wptr<T>(bo), wptr<T>(g), wptr<T>(w), wptr<T>(pp),
                                 eta.data(), gam.data(), sc.data(), act.data(), nt, z.data());
}

void eagle_step_batched(const py::object& A, const py::object& B, const py::object& C,
                        const py::object& D, const py::object& A_out, const py::object& B_out,
                        const py::object& G, const py::object& W, const py::object& P,
                        const py::object& eta_rho, const py::object& gamma_rho,
                        const py::object& scale, const py::object& active,
                        const py::object& zeta_rho2) {
    ArgChecker chk("eagle_step_batched");
    py::array a = chk.reference(A, "A");
    if (py::array_t<double>::check_(a))
        step_batched_typed<double>(chk, a, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho,
                                   scale, active, zeta_rho2);
    else
        step_batched_typed<float>(chk, a, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho,
                                  scale, active, zeta_rho2);
}

// ------------------------------------------------------------------ norm estimates

void check_maxiter(ArgChecker& chk, int maxiter) {
    if (maxiter < 0) chk.fail_value("maxiter must be >= 0, got " + std::to_string(maxiter));
}

py::tuple spectral_norm_estimate(const py::object& A, int maxiter, double rtol,
                                 const py::object& seed) {
    ArgChecker chk("spectral_norm_estimate");
    py::array a = chk.reference(A, "A");
    if (a.ndim() != 2) chk.fail_value("A must be 2-dimensional, got shape " +
                                      shape_str(shape_of(a)));
    check_maxiter(chk, maxiter);
    const index_t d = a.shape(0), n = a.shape(1);
    check_int32(chk, {d, n});
    const std::uint64_t s = seed_to_u64(seed);
    eagle::NormEstimate r{};
    {
        py::gil_scoped_release nogil;
        if (py::array_t<double>::check_(a))
            r = eagle::spectral_norm_estimate<double>(d, n, rptr<double>(a), maxiter, rtol, s);
        else
            r = eagle::spectral_norm_estimate<float>(d, n, rptr<float>(a), maxiter, rtol, s);
    }
    return py::make_tuple(r.sigma, r.iterations);
}

py::array_t<double> spectral_norm_estimate_batched(const py::object& A, int maxiter, double rtol,
                                                   const py::object& seed) {
    ArgChecker chk("spectral_norm_estimate_batched");
    py::array a = chk.reference(A, "A");
    if (a.ndim() != 3) chk.fail_value("A must be 3-dimensional (b, d, n), got shape " +
                                      shape_str(shape_of(a)));
    check_maxiter(chk, maxiter);
    const index_t nb = a.shape(0), d = a.shape(1), n = a.shape(2);
    check_int32(chk, {d, n});
    const std::uint64_t s = seed_to_u64(seed);
    py::array_t<double> out(nb);
    double* sigma = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        if (py::array_t<double>::check_(a))
            eagle::spectral_norm_estimate_batched<double>(nb, d, n, rptr<double>(a), maxiter,
                                                          rtol, s, sigma, nt);
        else
            eagle::spectral_norm_estimate_batched<float>(nb, d, n, rptr<float>(a), maxiter, rtol,
                                                         s, sigma, nt);
    }
    return out;
}

py::array_t<double> inverse_trace_batched(const py::object& G, double tau) {
    ArgChecker chk("inverse_trace_batched");
    py::array g = chk.reference(G, "G");
    if (g.ndim() != 3 || g.shape(1) != g.shape(2))
        chk.fail_value("G must be a stack of square matrices (b, n, n), got shape " +
                       shape_str(shape_of(g)));
    if (!py::array_t<double>::check_(g)) chk.fail_type("G must be float64");
    const index_t nb = g.shape(0), n = g.shape(1);
    py::array_t<double> out(nb);
    double* est = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::inverse_trace_batched(nb, n, rptr<double>(g), tau, est, nt);
    }
    return out;
}

// ------------------------------------------------------------------ residual_norms_batched

template <typename T>
py::array_t<double> residual_batched_typed(ArgChecker& chk, const py::array& M,
                                           const py::object& Y, const py::object& X,
                                           const py::object& R) {
    if (M.ndim() != 3) chk.fail_value("M must be 3-dimensional (b, m, n), got shape " +
                                      shape_str(shape_of(M)));
    const index_t nb = M.shape(0), m = M.shape(1), n = M.shape(2);
    const index_t k = chk.extent(Y, "Y", 3, 2, "(b, m, k)");
    py::array y = chk.operand<T>(Y, "Y", false, {nb, m, k}, "(b, m, k)");
    py::array x = chk.operand<T>(X, "X", false, {nb, n, k}, "(b, n, k)");
    py::array r = chk.operand<T>(R, "R", true, {nb, m, k}, "(b, m, k)");
    chk.check_overlap();
    py::array_t<double> out({index_t{3}, nb, k});
    double* norms = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::residual_norms_batched<T>(nb, m, n, k, rptr<T>(M), rptr<T>(y), rptr<T>(x),
                                         wptr<T>(r), norms, nt);
    }
    return out;
}

py::array_t<double> residual_norms_batched(const py::object& M, const py::object& Y,
                                           const py::object& X, const py::object& R) {
    ArgChecker chk("residual_norms_batched");
    py::array a = chk.reference(M, "M");
    if (py::array_t<double>::check_(a)) return residual_batched_typed<double>(chk, a, Y, X, R);
    return residual_batched_typed<float>(chk, a, Y, X, R);
}

// ------------------------------------------------------------------ introspection

// The Fortran BLAS routines of SciPy (scipy.linalg.cython_blas exports each as a PyCapsule
// named by its C signature), stored in eagle::blas::routines for the kernels; an
// ImportError naming what is missing otherwise.
void load_scipy_blas() {
    py::module_ mod = py::module_::import("scipy.linalg.cython_blas");
    py::dict capi = mod.attr("__pyx_capi__");
    auto get = [&capi](const char* name) -> void* {
        if (!capi.contains(name))
            throw py::import_error(std::string("scipy.linalg.cython_blas exports no ") + name);
        PyObject* cap = py::object(capi[name]).ptr();
        void* fn = PyCapsule_GetPointer(cap, PyCapsule_GetName(cap));
        if (fn == nullptr) throw py::error_already_set();
        return fn;
    };
    auto& r = eagle::blas::routines;
    r.sgemm = reinterpret_cast<eagle::blas::gemm_fn<float>>(get("sgemm"));
    r.dgemm = reinterpret_cast<eagle::blas::gemm_fn<double>>(get("dgemm"));
    r.ssyrk = reinterpret_cast<eagle::blas::syrk_fn<float>>(get("ssyrk"));
    r.dsyrk = reinterpret_cast<eagle::blas::syrk_fn<double>>(get("dsyrk"));
    r.sgemv = reinterpret_cast<eagle::blas::gemv_fn<float>>(get("sgemv"));
    r.dgemv = reinterpret_cast<eagle::blas::gemv_fn<double>>(get("dgemv"));
}

py::dict blas_info() {
    py::dict info;
    info["name"] = "scipy.linalg.cython_blas";
    info["interface"] = "Fortran BLAS through SciPy's PyCapsules (no BLAS linked)";
    info["int_bits"] = static_cast<int>(8 * sizeof(eagle::blas::blasint));
    info["scipy"] = py::module_::import("scipy").attr("__version__");
    return info;
}

py::dict build_info() {
    py::dict info;
    info["version"] = EAGLE_VERSION;
    info["compiler"] = EAGLE_COMPILER;
    info["cxx_flags"] = EAGLE_CXX_FLAGS;
    info["build_type"] = EAGLE_BUILD_TYPE;
#if defined(_OPENMP)
    info["openmp"] = static_cast<int>(_OPENMP);
#else
    info["openmp"] = py::none();
#endif
    info["pybind11"] = std::to_string(PYBIND11_VERSION_MAJOR) + "." +
                       std::to_string(PYBIND11_VERSION_MINOR) + "." +
                       std::to_string(PYBIND11_VERSION_PATCH);
    info["kernel_isas"] = eagle::available_kernel_isas();
    info["kernel_isa"] = std::string(eagle::kernel_isa());
    return info;
}

// ------------------------------------------------------------------ sketches

using i64_array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using i32_array = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;
using i8_array = py::array_t<std::int8_t, py::array::c_style | py::array::forcecast>;

void check_sign_pattern(const i32_array& rows, const i8_array& signs, index_t m, index_t s,
                        int& zeta) {
    if (rows.ndim() != 2 || rows.shape(0) != m)
        throw py::value_error("rows must have shape (m, zeta) = (" + std::to_string(m) +
                              ", zeta), got " + shape_str(shape_of(rows)));
    zeta = static_cast<int>(rows.shape(1));
    if (zeta < 1) throw py::value_error("rows must have at least one column (zeta >= 1)");
    if (signs.ndim() != 2 || signs.shape(0) != m || signs.shape(1) != zeta)
        throw py::value_error("signs must have the shape of rows " +
                              shape_str(shape_of(rows)) + ", got " + shape_str(shape_of(signs)));
    const std::int32_t* r = rows.data();
    for (index_t k = 0; k < m * zeta; ++k)
        if (r[k] < 0 || r[k] >= s)
            throw py::value_error("rows entries must lie in [0, s) = [0, " + std::to_string(s) +
                                  ")");
}

// Whether both index arrays of a compressed pattern are int32 (SciPy's usual type: the
// kernels then read them without a copy).
bool int32_pattern(const py::array& indptr, const py::array& indices) {
    return py::array_t<std::int32_t>::check_(indptr) && py::array_t<std::int32_t>::check_(indices);
}

// A compressed (CSR/CSC) pattern: indptr (n + 1) from 0 to nnz, non-decreasing, and every
// index in [0, bound) -- what every kernel that walks one indexes with.
template <typename I>
void check_compressed(const I* ip, index_t n, const I* ix, index_t nnz, index_t bound,
                      const char* what, const char* bound_name) {
    if (ip[0] != 0 || static_cast<index_t>(ip[n]) != nnz)
        throw py::value_error("indptr must start at 0 and end at len(indices)");
    for (index_t i = 0; i < n; ++i)
        if (ip[i + 1] < ip[i]) throw py::value_error("indptr must be non-decreasing");
    for (index_t k = 0; k < nnz; ++k)
        if (ix[k] < 0 || static_cast<index_t>(ix[k]) >= bound)
            throw py::value_error(std::string(what) + " must lie in [0, " + bound_name +
                                  ") = [0, " + std::to_string(bound) + ")");
}

template <typename T>
py::array sparse_sign_csc_typed(const i64_array& indptr, const i64_array& indices,
                                const py::array& data_obj, index_t m, index_t s,
                                const i32_array& rows, const i8_array& signs, double scale) {
    using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;
    arr data = arr::ensure(data_obj);  // null when the array cannot be converted
    if (!data) throw py::type_error("data must be a real numeric array");
    if (indptr.ndim() != 1 || indptr.shape(0) < 1)
        throw py::value_error("indptr must be 1-D of length n + 1");
    const index_t n = indptr.shape(0) - 1;
    const index_t nnz = indices.shape(0);
    if (data.ndim() != 1 || data.shape(0) != nnz || indices.ndim() != 1)
        throw py::value_error("indices and data must be 1-D of equal length");
    check_compressed(indptr.data(), n, indices.data(), nnz, m, "row indices", "m");
    const std::int64_t* ip = indptr.data();
    const std::int64_t* ix = indices.data();
    int zeta = 0;
    check_sign_pattern(rows, signs, m, s, zeta);
    py::array_t<T, py::array::f_style> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::sparse_sign_csc<T>(m, n, ip, ix, data.data(), s, zeta, rows.data(), signs.data(),
                                  scale, o, nt);
    }
    return out;
}

py::array sparse_sign_csc(const i64_array& indptr, const i64_array& indices,
                          const py::array& data, index_t m, index_t s, const i32_array& rows,
                          const i8_array& signs, double scale) {
    if (s < 1 || m < 0) throw py::value_error("s must be >= 1 and m >= 0");
    if (py::array_t<float>::check_(data))
        return sparse_sign_csc_typed<float>(indptr, indices, data, m, s, rows, signs, scale);
    return sparse_sign_csc_typed<double>(indptr, indices, data, m, s, rows, signs, scale);
}

template <typename T, typename I>
py::array sparse_sign_csr_typed(const py::array& indptr_obj, const py::array& indices_obj,
                                const py::array& data_obj, index_t n, index_t s,
                                const i32_array& rows, const i8_array& signs, double scale) {
    using idx = py::array_t<I, py::array::c_style | py::array::forcecast>;
    using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;
    idx indptr = idx::ensure(indptr_obj), indices = idx::ensure(indices_obj);
    arr data = arr::ensure(data_obj);
    if (!indptr || !indices) throw py::type_error("indptr and indices must be integer arrays");
    if (!data) throw py::type_error("data must be a real numeric array");
    if (indptr.ndim() != 1 || indptr.shape(0) < 1)
        throw py::value_error("indptr must be 1-D of length m + 1");
    const index_t m = indptr.shape(0) - 1;
    const index_t nnz = indices.shape(0);
    if (data.ndim() != 1 || data.shape(0) != nnz || indices.ndim() != 1)
        throw py::value_error("indices and data must be 1-D of equal length");
    check_compressed(indptr.data(), m, indices.data(), nnz, n, "column indices", "n");
    int zeta = 0;
    check_sign_pattern(rows, signs, m, s, zeta);
    py::array_t<T> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::sparse_sign_csr<T, I>(m, n, indptr.data(), indices.data(), data.data(), s, zeta,
                                     rows.data(), signs.data(), scale, o, nt,
                                     std::size_t(256) << 20);
    }
    return out;
}

py::array sparse_sign_csr(const py::array& indptr, const py::array& indices,
                          const py::array& data, index_t n, index_t s, const i32_array& rows,
                          const i8_array& signs, double scale) {
    if (s < 1 || n < 0) throw py::value_error("s must be >= 1 and n >= 0");
    const bool i32 = int32_pattern(indptr, indices);
    if (py::array_t<float>::check_(data))
        return i32 ? sparse_sign_csr_typed<float, std::int32_t>(indptr, indices, data, n, s, rows,
                                                               signs, scale)
                   : sparse_sign_csr_typed<float, std::int64_t>(indptr, indices, data, n, s, rows,
                                                               signs, scale);
    return i32 ? sparse_sign_csr_typed<double, std::int32_t>(indptr, indices, data, n, s, rows,
                                                            signs, scale)
               : sparse_sign_csr_typed<double, std::int64_t>(indptr, indices, data, n, s, rows,
                                                            signs, scale);
}

template <typename T>
py::array sparse_sign_dense_typed(const py::array& A_obj, index_t s, const i32_array& rows,
                                  const i8_array& signs, double scale) {
    using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;
    arr A = arr::ensure(A_obj);  // null when the array cannot be converted
    if (!A) throw py::type_error("A must be a real numeric array");
    if (A.ndim() != 2) throw py::value_error("A must be 2-D, got " + shape_str(shape_of(A)));
    const index_t m = A.shape(0), n = A.shape(1);
    int zeta = 0;
    check_sign_pattern(rows, signs, m, s, zeta);
    py::array_t<T, py::array::c_style> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::sparse_sign_dense<T>(m, n, A.data(), s, zeta, rows.data(), signs.data(), scale,
                                    o, nt);
    }
    return out;
}

py::array sparse_sign_dense(const py::array& A, index_t s, const i32_array& rows,
                            const i8_array& signs, double scale) {
    if (s < 1) throw py::value_error("s must be >= 1");
    if (py::array_t<float>::check_(A))
        return sparse_sign_dense_typed<float>(A, s, rows, signs, scale);
    return sparse_sign_dense_typed<double>(A, s, rows, signs, scale);
}

template <typename T>
void fwht_typed(py::array& W) {
    if (!(W.flags() & py::array::c_style) || !W.writeable())
        throw py::value_error("W must be a writeable C-contiguous array");
    const index_t m2 = W.shape(0), n = W.ndim() == 2 ? W.shape(1) : 1;
    T* w = static_cast<T*>(W.mutable_data());
    const int nt = kernel_threads();
    py::gil_scoped_release nogil;
    eagle::fwht_rows<T>(m2, n, w, nt);
}

void fwht_rows(py::array W) {
    if (W.ndim() < 1 || W.ndim() > 2) throw py::value_error("W must be 1-D or 2-D");
    const index_t m2 = W.shape(0);
    if (m2 < 1 || (m2 & (m2 - 1)) != 0)
        throw py::value_error("W.shape[0] must be a power of two, got " + std::to_string(m2));
    if (W.dtype().is(py::dtype::of<double>()))
        fwht_typed<double>(W);
    else if (W.dtype().is(py::dtype::of<float>()))
        fwht_typed<float>(W);
    else
        throw py::type_error("W must be float32 or float64");
}

// ------------------------------------------------------------------ envelope Cholesky

// The CSR pattern (indptr, indices) of a square matrix, as int32 arrays where both are
// (SciPy's usual index type: no copy) or else converted to int64, with a permutation of its
// rows; every index the envelope kernels use is checked here.
template <typename I>
struct CsrPattern {
    py::array_t<I, py::array::c_style | py::array::forcecast> indptr, indices;
    index_t n = 0;
};

template <typename I>
CsrPattern<I> csr_pattern(const py::array& indptr_obj, const py::array& indices_obj,
                          const i64_array& perm) {
    using arr = py::array_t<I, py::array::c_style | py::array::forcecast>;
    CsrPattern<I> c{arr::ensure(indptr_obj), arr::ensure(indices_obj)};
    if (!c.indptr || !c.indices) throw py::type_error("indptr and indices must be integer arrays");
    if (c.indptr.ndim() != 1 || c.indptr.shape(0) < 1)
        throw py::value_error("indptr must be 1-D of length n + 1");
    const index_t n = c.indptr.shape(0) - 1;
    if (c.indices.ndim() != 1) throw py::value_error("indices must be 1-D");
    check_compressed(c.indptr.data(), n, c.indices.data(), c.indices.shape(0), n, "indices",
                     "n");
    if (perm.ndim() != 1 || perm.shape(0) != n)
        throw py::value_error("perm must be 1-D of length n = " + std::to_string(n));
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    const std::int64_t* pp = perm.data();
    for (index_t i = 0; i < n; ++i) {
        if (pp[i] < 0 || pp[i] >= n || seen[pp[i]])
            throw py::value_error("perm must be a permutation of range(n)");
        seen[pp[i]] = 1;
    }
    c.n = n;
    return c;
}

template <typename I>
py::tuple envelope_first_typed(const py::array& indptr, const py::array& indices,
                               const i64_array& perm) {
    const CsrPattern<I> c = csr_pattern<I>(indptr, indices, perm);
    py::array_t<std::int64_t> first(c.n);
    index_t entries = 0;
    {
        py::gil_scoped_release nogil;
        entries = eagle::envelope_first<I>(c.n, c.indptr.data(), c.indices.data(), perm.data(),
                                           first.mutable_data());
    }
    return py::make_tuple(first, entries);
}

py::tuple envelope_first(const py::array& indptr, const py::array& indices,
                         const i64_array& perm) {
    if (int32_pattern(indptr, indices))
        return envelope_first_typed<std::int32_t>(indptr, indices, perm);
    return envelope_first_typed<std::int64_t>(indptr, indices, perm);
}

template <typename T, typename I>
py::tuple envelope_cholesky_typed(const py::array& indptr, const py::array& indices,
                                  const py::array& data_obj, const i64_array& perm,
                                  double rel_pivot) {
    using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;
    arr data = arr::ensure(data_obj);
    if (!data) throw py::type_error("data must be a real numeric array");
    const CsrPattern<I> c = csr_pattern<I>(indptr, indices, perm);
    const index_t n = c.n;
    if (data.ndim() != 1 || data.shape(0) != c.indices.shape(0))
        throw py::value_error("data must be 1-D, of the length of indices");
    if (!(rel_pivot >= 0.0 && rel_pivot < 1.0))
        throw py::value_error("rel_pivot must lie in [0, 1)");
    py::array_t<std::int64_t> first(n), ptr(n + 1);
    std::int64_t* f = first.mutable_data();
    std::int64_t* p = ptr.mutable_data();
    index_t entries = 0;
    {
        py::gil_scoped_release nogil;
        entries = eagle::envelope_first<I>(n, c.indptr.data(), c.indices.data(), perm.data(), f);
    }
    py::array_t<T> val(entries);
    T* v = val.mutable_data();
    index_t info = 0;
    {
        py::gil_scoped_release nogil;
        p[0] = 0;
        for (index_t i = 0; i < n; ++i) p[i + 1] = p[i] + (i - f[i] + 1);
        info = eagle::envelope_cholesky<T, I>(n, c.indptr.data(), c.indices.data(), data.data(),
                                              perm.data(), f, p, v, rel_pivot);
    }
    return py::make_tuple(first, ptr, val, info);
}

py::tuple envelope_cholesky(const py::array& indptr, const py::array& indices,
                            const py::array& data, const i64_array& perm, double rel_pivot) {
    const bool i32 = int32_pattern(indptr, indices);
    if (py::array_t<float>::check_(data))
        return i32 ? envelope_cholesky_typed<float, std::int32_t>(indptr, indices, data, perm,
                                                                  rel_pivot)
                   : envelope_cholesky_typed<float, std::int64_t>(indptr, indices, data, perm,
                                                                  rel_pivot);
    return i32 ? envelope_cholesky_typed<double, std::int32_t>(indptr, indices, data, perm,
                                                               rel_pivot)
               : envelope_cholesky_typed<double, std::int64_t>(indptr, indices, data, perm,
                                                               rel_pivot);
}

template <typename T>
py::array envelope_solve_typed(const i64_array& first, const i64_array& ptr, const py::array& val_obj,
                               const py::array& b_obj) {
    using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;
    arr val = arr::ensure(val_obj);
    if (!val || val.ndim() != 1) throw py::type_error("val must be a 1-D real array");
    if (first.ndim() != 1 || ptr.ndim() != 1 || ptr.shape(0) != first.shape(0) + 1)
        throw py::value_error("first (n,) and ptr (n + 1,) do not match");
    const index_t n = first.shape(0);
    const std::int64_t* f = first.data();
    const std::int64_t* p = ptr.data();
    if (p[0] != 0 || p[n] != val.shape(0))
        throw py::value_error("ptr must start at 0 and end at len(val)");
    for (index_t i = 0; i < n; ++i)
        if (f[i] < 0 || f[i] > i || p[i + 1] - p[i] != i - f[i] + 1)
            throw py::value_error("first and ptr do not describe a row envelope");
    arr b = arr::ensure(b_obj);
    if (!b) throw py::type_error("b must be a real numeric array");
    if (b.ndim() < 1 || b.ndim() > 2 || b.shape(0) != n)
        throw py::value_error("b must be (n,) or (n, k) with n = " + std::to_string(n));
    const index_t k = b.ndim() == 2 ? b.shape(1) : 1;
    // columns contiguous for the kernel: x holds b transposed
    py::array_t<T> x(std::vector<index_t>{k, n});
    T* xp = x.mutable_data();
    const T* bp = b.data();
    {
        py::gil_scoped_release nogil;
        for (index_t i = 0; i < n; ++i)
            for (index_t c = 0; c < k; ++c) xp[c * n + i] = bp[i * k + c];
        eagle::envelope_solve<T>(n, p, f, val.data(), k, xp);
    }
    if (b.ndim() == 1) return x.reshape(std::vector<index_t>{n});
    return x.attr("T").attr("copy")();
}

py::array envelope_solve(const i64_array& first, const i64_array& ptr, const py::array& val,
                         const py::array& b) {
    if (py::array_t<float>::check_(val)) return envelope_solve_typed<float>(first, ptr, val, b);
    return envelope_solve_typed<double>(first, ptr, val, b);
}

// ------------------------------------------------------------------ sampled (sketched) step

template <typename T>
T* checked(const py::array& a, const char* name, const std::vector<index_t>& shape,
           bool writeable) {
    if (!a.dtype().is(py::dtype::of<T>()))
        throw py::type_error(std::string(name) + " must have the dtype of A");
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous");
    if (writeable && !a.writeable())
        throw py::value_error(std::string(name) + " must be writeable");
    std::vector<index_t> got = shape_of(a);
    if (got != shape)
        throw py::value_error(std::string(name) + " must have shape " + shape_str(shape) +
                              ", got " + shape_str(got));
    return static_cast<T*>(const_cast<void*>(a.data()));
}

const std::int64_t* checked_idx(const i64_array& idx, index_t n) {
    if (idx.ndim() != 1) throw py::value_error("idx must be 1-D");
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    const std::int64_t* p = idx.data();
    for (index_t k = 0; k < idx.shape(0); ++k) {
        if (p[k] < 0 || p[k] >= n)
            throw py::value_error("idx entries must lie in [0, n) = [0, " + std::to_string(n) +
                                  ")");
        if (seen[static_cast<std::size_t>(p[k])]++)
            throw py::value_error("idx entries must be distinct");
    }
    return p;
}

template <typename T>
void sampled_gram_typed(const py::array& A, const i64_array& idx, const py::array& At,
                        const py::array& G) {
    if (A.ndim() != 2) throw py::value_error("A must be 2-D (d, n)");
    const index_t d = A.shape(0), n = A.shape(1), r = idx.ndim() == 1 ? idx.shape(0) : 0;
    const T* a = checked<T>(A, "A", {d, n}, false);
    const std::int64_t* ix = checked_idx(idx, n);
    T* at = checked<T>(At, "At", {d, r}, true);
    T* g = checked<T>(G, "G", {r, r}, true);
    py::gil_scoped_release nogil;
    eagle::sampled_gram<T>(d, n, r, a, ix, at, g);
}

void sampled_gram(const py::array& A, const i64_array& idx, const py::array& At,
                  const py::array& G) {
    if (A.dtype().is(py::dtype::of<float>()))
        sampled_gram_typed<float>(A, idx, At, G);
    else if (A.dtype().is(py::dtype::of<double>()))
        sampled_gram_typed<double>(A, idx, At, G);
    else
        throw py::type_error("A must be float32 or float64");
}

template <typename T>
void sampled_update_typed(const py::array& A, const py::array& B, const py::array& C,
                          const py::array& D, const i64_array& idx, const py::array& At,
                          const py::array& G, double eta_rho, double gamma_rho) {
    if (A.ndim() != 2 || B.ndim() != 2 || C.ndim() != 2)
        throw py::value_error("A, B and C must be 2-D");
    const index_t d = A.shape(0), n = A.shape(1), p = B.shape(0), q = C.shape(1);
    const index_t r = idx.ndim() == 1 ? idx.shape(0) : 0;
    T* a = checked<T>(A, "A", {d, n}, true);
    T* b = checked<T>(B, "B", {p, n}, true);
    T* c = checked<T>(C, "C", {d, q}, true);
    T* dd = checked<T>(D, "D", {p, q}, true);
    const T* at = checked<T>(At, "At", {d, r}, false);
    const T* g = checked<T>(G, "G", {r, r}, false);
    const std::int64_t* ix = checked_idx(idx, n);
    std::vector<T> bt(static_cast<std::size_t>(p * r)), w(static_cast<std::size_t>(r * q)),
        t1(static_cast<std::size_t>(std::max(d, p) * r));
    py::gil_scoped_release nogil;
    eagle::sampled_update<T>(d, n, p, q, r, a, b, c, dd, ix, at, g, eta_rho, gamma_rho,
                             bt.data(), w.data(), t1.data());
}

void sampled_update(const py::array& A, const py::array& B, const py::array& C,
                    const py::array& D, const i64_array& idx, const py::array& At,
                    const py::array& G, double eta_rho, double gamma_rho) {
    if (A.dtype().is(py::dtype::of<float>()))
        sampled_update_typed<float>(A, B, C, D, idx, At, G, eta_rho, gamma_rho);
    else if (A.dtype().is(py::dtype::of<double>()))
        sampled_update_typed<double>(A, B, C, D, idx, At, G, eta_rho, gamma_rho);
    else
        throw py::type_error("A must be float32 or float64");
}

template <typename T>
void sketched_gram_typed(const py::array& A, const py::array& S, const py::array& At,
                         const py::array& G) {
    if (A.ndim() != 2) throw py::value_error("A must be 2-D (d, n)");
    if (S.ndim() != 2) throw py::value_error("S must be 2-D (n, r)");
    const index_t d = A.shape(0), n = A.shape(1), r = S.shape(1);
    if (r > n) throw py::value_error("S must have at most n = " + std::to_string(n) + " columns");
    const T* a = checked<T>(A, "A", {d, n}, false);
    const T* s = checked<T>(S, "S", {n, r}, false);
    T* at = checked<T>(At, "At", {d, r}, true);
    T* g = checked<T>(G, "G", {r, r}, true);
    py::gil_scoped_release nogil;
    eagle::sketched_gram<T>(d, n, r, a, s, at, g);
}

void sketched_gram(const py::array& A, const py::array& S, const py::array& At,
                   const py::array& G) {
    if (A.dtype().is(py::dtype::of<float>()))
        sketched_gram_typed<float>(A, S, At, G);
    else if (A.dtype().is(py::dtype::of<double>()))
        sketched_gram_typed<double>(A, S, At, G);
    else
        throw py::type_error("A must be float32 or float64");
}

template <typename T>
void sketched_update_typed(const py::array& A, const py::array& B, const py::array& C,
                           const py::array& D, const py::array& S, const py::array& At,
                           const py::array& G, double eta_rho, double gamma_rho) {
    if (A.ndim() != 2 || B.ndim() != 2 || C.ndim() != 2 || S.ndim() != 2)
        throw py::value_error("A, B, C and S must be 2-D");
    const index_t d = A.shape(0), n = A.shape(1), p = B.shape(0), q = C.shape(1);
    const index_t r = S.shape(1);
    if (r > n) throw py::value_error("S must have at most n = " + std::to_string(n) + " columns");
    T* a = checked<T>(A, "A", {d, n}, true);
    T* b = checked<T>(B, "B", {p, n}, true);
    T* c = checked<T>(C, "C", {d, q}, true);
    T* dd = checked<T>(D, "D", {p, q}, true);
    const T* s = checked<T>(S, "S", {n, r}, false);
    const T* at = checked<T>(At, "At", {d, r}, false);
    const T* g = checked<T>(G, "G", {r, r}, false);
    std::vector<T> bt(static_cast<std::size_t>(p * r)), w(static_cast<std::size_t>(r * q)),
        t1(static_cast<std::size_t>(std::max(d, p) * r));
    py::gil_scoped_release nogil;
    eagle::sketched_update<T>(d, n, p, q, r, a, b, c, dd, s, at, g, eta_rho, gamma_rho,
                              bt.data(), w.data(), t1.data());
}

void sketched_update(const py::array& A, const py::array& B, const py::array& C,
                     const py::array& D, const py::array& S, const py::array& At,
                     const py::array& G, double eta_rho, double gamma_rho) {
    if (A.dtype().is(py::dtype::of<float>()))
        sketched_update_typed<float>(A, B, C, D, S, At, G, eta_rho, gamma_rho);
    else if (A.dtype().is(py::dtype::of<double>()))
        sketched_update_typed<double>(A, B, C, D, S, At, G, eta_rho, gamma_rho);
    else
        throw py::type_error("A must be float32 or float64");
}

// ------------------------------------------------------------------ CG on CSR

// A CSR matrix (rows x cols; square unless cols is given), validated once (the pattern is
// checked in O(nnz) here, not on every call of the CG or CGLS loop that follows): int32
// indices where both index arrays are int32 (SciPy's usual type: no copy), else int64;
// float32 or float64 values.  It holds references to the arrays, which the caller must not
// modify while it is in use.
class CsrMatrix {
public:
    CsrMatrix(const py::array& indptr, const py::array& indices, const py::array& data,
              index_t cols) : cols_(cols) {
        if (!py::array_t<float>::check_(data) && !py::array_t<double>::check_(data))
            throw py::type_error("data must have dtype float32 or float64, got " +
                                 std::string(py::str(data.dtype())));
        if (data.ndim() != 1 || !(data.flags() & py::array::c_style))
            throw py::value_error("data must be a 1-D C-contiguous array");
        i32_ = int32_pattern(indptr, indices);
        if (i32_) {
            init<std::int32_t>(indptr, indices, data);
        } else {
            init<std::int64_t>(indptr, indices, data);
        }
        f32_ = py::array_t<float>::check_(data);
    }

    index_t n() const { return n_; }
    py::tuple shape() const { return py::make_tuple(n_, cols_); }
    py::dtype dtype() const { return data_.dtype(); }

    py::array normal_product(const py::object& x, const py::object& q,
                             const py::object& w) const {
        return f32_ ? normal_product_typed<float>(x, q, w)
                    : normal_product_typed<double>(x, q, w);
    }

    py::array matvec(const py::array& x_obj) const {
        return f32_ ? matvec_typed<float>(x_obj) : matvec_typed<double>(x_obj);
    }

    py::tuple cg(const py::object& inv, const py::object& x, const py::object& r,
                 const py::object& p, const py::object& q, const py::object& state,
                 double thresh, index_t maxiter) const {
        return f32_ ? cg_typed<float>(inv, x, r, p, q, state, thresh, maxiter)
                    : cg_typed<double>(inv, x, r, p, q, state, thresh, maxiter);
    }

private:
    template <typename I>
    void init(const py::array& indptr_obj, const py::array& indices_obj, const py::array& data) {
        using arr = py::array_t<I, py::array::c_style | py::array::forcecast>;
        arr ip = arr::ensure(indptr_obj), ix = arr::ensure(indices_obj);
        if (!ip || !ix) throw py::type_error("indptr and indices must be integer arrays");
        if (ip.ndim() != 1 || ip.shape(0) < 1)
            throw py::value_error("indptr must be 1-D of length n + 1");
        if (ix.ndim() != 1 || ix.shape(0) != data.shape(0))
            throw py::value_error("indices and data must be 1-D of equal length");
        n_ = ip.shape(0) - 1;
        if (cols_ < 0) cols_ = n_;
        check_compressed(ip.data(), n_, ix.data(), ix.shape(0), cols_, "indices", "cols");
        indptr_ = ip;
        indices_ = ix;
        data_ = data;
    }

    template <typename T>
    py::array matvec_typed(const py::array& x_obj) const {
        ArgChecker chk("CsrMatrix.matvec");
        py::array x = chk.operand<T>(x_obj, "x", false, {cols_}, "(cols,)");
        py::array_t<T> y(n_);
        T* yp = y.mutable_data();
        const T* xp = rptr<T>(x);
        const T* d = rptr<T>(data_);
        py::gil_scoped_release nogil;
        if (i32_) {
            eagle::csr_matvec<T>(n_, rptr<std::int32_t>(indptr_), rptr<std::int32_t>(indices_),
                                 d, xp, yp);
        } else {
            eagle::csr_matvec<T>(n_, rptr<std::int64_t>(indptr_), rptr<std::int64_t>(indices_),
                                 d, xp, yp);
        }
        return y;
    }

    template <typename T>
    py::tuple cg_typed(const py::object& inv_obj, const py::object& x_obj,
                       const py::object& r_obj, const py::object& p_obj,
                       const py::object& q_obj, const py::object& state_obj, double thresh,
                       index_t maxiter) const {
        ArgChecker chk("CsrMatrix.cg");
        if (cols_ != n_) chk.fail_value("needs a square matrix, got " + std::to_string(n_) +
                                        " x " + std::to_string(cols_));
        const std::vector<index_t> vec{n_};
        py::array x = chk.operand<T>(x_obj, "x", true, vec, "(n,)");
        py::array r = chk.operand<T>(r_obj, "r", true, vec, "(n,)");
        py::array p = chk.operand<T>(p_obj, "p", true, vec, "(n,)");
        py::array q = chk.operand<T>(q_obj, "q", true, vec, "(n,)");
        const T* inv = nullptr;
        if (!inv_obj.is_none()) inv = rptr<T>(chk.operand<T>(inv_obj, "inv", false, vec, "(n,)"));
        py::array st = chk.operand<double>(state_obj, "state", true, {2}, "(2,)");
        chk.check_overlap();
        if (maxiter < 0) chk.fail_value("maxiter must be >= 0");
        if (!(thresh >= 0)) chk.fail_value("thresh must be >= 0");
        double* sp = wptr<double>(st);
        eagle::CgState s{sp[0], sp[1]};
        eagle::CgStatus status = eagle::kCgMaxiter;
        index_t its = 0;
        {
            py::gil_scoped_release nogil;
            const T* d = rptr<T>(data_);
            if (i32_) {
                its = eagle::cg_csr<T>(n_, rptr<std::int32_t>(indptr_),
                                       rptr<std::int32_t>(indices_), d, inv, wptr<T>(x),
                                       wptr<T>(r), wptr<T>(p), wptr<T>(q), s, thresh, maxiter,
                                       status);
            } else {
                its = eagle::cg_csr<T>(n_, rptr<std::int64_t>(indptr_),
                                       rptr<std::int64_t>(indices_), d, inv, wptr<T>(x),
                                       wptr<T>(r), wptr<T>(p), wptr<T>(q), s, thresh, maxiter,
                                       status);
            }
        }
        sp[0] = s.rr;
        sp[1] = s.rho;
        return py::make_tuple(its, static_cast<int>(status));
    }

    template <typename T>
    py::array normal_product_typed(const py::object& x_obj, const py::object& q_obj,
                                   const py::object& w_obj) const {
        ArgChecker chk("CsrMatrix.normal_product");
        const index_t k = chk.extent(x_obj, "x", 2, 1, "(cols, k)");
        py::array x = chk.operand<T>(x_obj, "x", false, {cols_, k}, "(cols, k)");
        py::array q = chk.operand<T>(q_obj, "q", true, {n_, k}, "(rows, k)");
        py::array w = chk.operand<T>(w_obj, "w", true, {cols_, k}, "(cols, k)");
        chk.check_overlap();
        py::array_t<double> qq(k);
        double* qqp = qq.mutable_data();
        const T* xp = rptr<T>(x);
        T* qp = wptr<T>(q);
        T* wp = wptr<T>(w);
        const T* d = rptr<T>(data_);
        py::gil_scoped_release nogil;
        if (i32_) {
            eagle::csr_normal_product<T>(n_, cols_, rptr<std::int32_t>(indptr_),
                                         rptr<std::int32_t>(indices_), d, k, xp, qp, wp, qqp);
        } else {
            eagle::csr_normal_product<T>(n_, cols_, rptr<std::int64_t>(indptr_),
                                         rptr<std::int64_t>(indices_), d, k, xp, qp, wp, qqp);
        }
        return qq;
    }

    py::array indptr_, indices_, data_;
    index_t n_ = 0, cols_ = -1;
    bool i32_ = false, f32_ = false;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "Compiled kernels of eagle_sparse (see eagle_sparse.backends.numpy_backend for "
              "the kernel interface; eagle_sparse.backends.native wraps this module).";
    m.attr("__version__") = EAGLE_VERSION;
    load_scipy_blas();

    m.def("eagle_step", &eagle_step, py::arg("A"), py::arg("B"), py::arg("C"), py::arg("D"),
          py::arg("A_out"), py::arg("B_out"), py::arg("G"), py::arg("W"), py::arg("P"),
          py::arg("eta_rho"), py::arg("gamma_rho"), py::arg("scale"), py::arg("zeta_rho2") = 0.0,
          "One EAGLE step on A (d, n), B (p, n), C (d, q), D (p, q) with BLAS; writes "
          "A_out, B_out, G, W, P = scale (I - eta_rho G + zeta_rho2 G^2) and updates C, D "
          "in place.");
    m.def("eagle_steps", &eagle_steps, py::arg("A"), py::arg("B"), py::arg("C"), py::arg("D"),
          py::arg("Dsnap"), py::arg("A_out"), py::arg("B_out"), py::arg("G"),
          py::arg("traces"), py::arg("W"),
          py::arg("W2"), py::arg("P"), py::arg("Q"), py::arg("T"), py::arg("eta_rho"),
          py::arg("gamma_rho"), py::arg("scale"), py::arg("zeta_rho2") = py::none(),
          py::kw_only(), py::arg("resume") = false, py::arg("defer") = false,
          "k = len(eta_rho) EAGLE steps fused for tall problems (one SYRK and one A/B "
          "product; Grams follow in n-space): writes A_out = A Q_k, B_out, the Gram before "
          "the last step into G, the trace of the Gram before each step into traces (k,), "
          "D after each step but the last into Dsnap (k - 1, p, q), and updates C, D in "
          "place.  defer=True leaves A_out, B_out unwritten (the iterate is A Q_k, Q_k in "
          "Q); resume=True continues from such a call's G, P and Q, without a SYRK.");
    m.def("eagle_step_batched", &eagle_step_batched, py::arg("A"), py::arg("B"), py::arg("C"),
          py::arg("D"), py::arg("A_out"), py::arg("B_out"), py::arg("G"), py::arg("W"),
          py::arg("P"), py::arg("eta_rho"), py::arg("gamma_rho"), py::arg("scale"),
          py::arg("active"), py::arg("zeta_rho2") = py::none(),
          "eagle_step on stacks (b, ...) with per-problem scalars; inactive problems are "
          "left untouched.  OpenMP over the stack.");
    m.def("residual_norms_batched", &residual_norms_batched, py::arg("M"), py::arg("Y"),
          py::arg("X"), py::arg("R"),
          "R = Y - M X on stacks (M (b, m, n), Y and R (b, m, k), X (b, n, k)); returns the "
          "column norms (3, b, k) in float64: ||R||, ||X||, ||M^T R||.  OpenMP over the "
          "stack.");
    m.def("sparse_sign_csc", &sparse_sign_csc, py::arg("indptr"), py::arg("indices"),
          py::arg("data"), py::arg("m"), py::arg("s"), py::arg("rows"), py::arg("signs"),
          py::arg("scale"),
          "S A for CSC A (m, n) and the sparse sign embedding S (s, m) whose column i has "
          "values scale * signs[i] (int8 +-1) at rows rows[i] (int32); returns (s, n), "
          "Fortran order.  OpenMP over columns.");
    m.def("sparse_sign_csr", &sparse_sign_csr, py::arg("indptr"), py::arg("indices"),
          py::arg("data"), py::arg("n"), py::arg("s"), py::arg("rows"), py::arg("signs"),
          py::arg("scale"),
          "S A for CSR A (m, n), int32 or int64 indices, and the sparse sign embedding S "
          "(s, m) of sparse_sign_csc; returns (s, n), C order.  OpenMP over A's rows "
          "(private copies of the output, summed).");
    m.def("sparse_sign_dense", &sparse_sign_dense, py::arg("A"), py::arg("s"), py::arg("rows"),
          py::arg("signs"), py::arg("scale"),
          "S A for dense A (m, n); returns (s, n).  OpenMP over column blocks.");
    m.def("sampled_gram", &sampled_gram, py::arg("A"), py::arg("idx"), py::arg("At"),
          py::arg("G"), "Sketched EAGLE, part 1: At = A[:, idx], G = At^T At.");
    m.def("sampled_update", &sampled_update, py::arg("A"), py::arg("B"), py::arg("C"),
          py::arg("D"), py::arg("idx"), py::arg("At"), py::arg("G"), py::arg("eta_rho"),
          py::arg("gamma_rho"),
          "Sketched EAGLE, part 2 (in place): C -= gamma_rho At At^T C, D += gamma_rho "
          "B[:, idx] At^T C, A[:, idx] -= eta_rho At G, B[:, idx] -= eta_rho B[:, idx] G.");
    m.def("sketched_gram", &sketched_gram, py::arg("A"), py::arg("S"), py::arg("At"),
          py::arg("G"),
          "Sketched EAGLE with a dense orthonormal sketch S (n, r), part 1: At = A S, "
          "G = At^T At.");
    m.def("sketched_update", &sketched_update, py::arg("A"), py::arg("B"), py::arg("C"),
          py::arg("D"), py::arg("S"), py::arg("At"), py::arg("G"), py::arg("eta_rho"),
          py::arg("gamma_rho"),
          "Sketched EAGLE with a dense sketch, part 2 (in place): C -= gamma_rho At At^T C, "
          "D += gamma_rho (B S) At^T C, A -= eta_rho (At G) S^T, B -= eta_rho (B S G) S^T.");
    m.def("envelope_first", &envelope_first, py::arg("indptr"), py::arg("indices"),
          py::arg("perm"),
          "(first, entries): the row envelope of the lower triangle of P A P^T for CSR A "
          "(indptr, indices) and the row order perm (row i of P A P^T is row perm[i] of A): "
          "first[i] its first column in row i, entries the envelope's size.");
    m.def("envelope_cholesky", &envelope_cholesky, py::arg("indptr"), py::arg("indices"),
          py::arg("data"), py::arg("perm"), py::arg("rel_pivot") = 0.0,
          "(first, ptr, val, info): the row-envelope Cholesky factor L of P A P^T (A "
          "symmetric CSR, its lower triangle read in the order perm), row i of L at "
          "val[ptr[i]:ptr[i + 1]] from column first[i]; info 0, or i + 1 where row i's "
          "pivot is not above rel_pivot times its diagonal (not positive definite).");
    m.def("envelope_solve", &envelope_solve, py::arg("first"), py::arg("ptr"), py::arg("val"),
          py::arg("b"),
          "(L L^T)^-1 b for the factor of envelope_cholesky; b (n,) or (n, k), a new array.");
    py::class_<CsrMatrix>(m, "CsrMatrix",
                          "A CSR matrix (indptr, indices, data; rows x cols, square unless "
                          "cols is given), validated once, for the compiled CG loop and "
                          "CGLS's fused products.")
        .def(py::init<const py::array&, const py::array&, const py::array&, index_t>(),
             py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("cols") = -1)
        .def_property_readonly("n", &CsrMatrix::n, "The rows.")
        .def_property_readonly("shape", &CsrMatrix::shape)
        .def_property_readonly("dtype", &CsrMatrix::dtype)
        .def("matvec", &CsrMatrix::matvec, py::arg("x"), "A x (a new array); x (cols,).")
        .def("normal_product", &CsrMatrix::normal_product, py::arg("x"), py::arg("q"),
             py::arg("w"),
             "q = A x and w = A^T q in one pass over A, in place; x (cols, k), q (rows, k), "
             "w (cols, k); returns the float64 column sums of q * q (k,).")
        .def("cg", &CsrMatrix::cg, py::arg("inv"), py::arg("x"), py::arg("r"), py::arg("p"),
             py::arg("q"), py::arg("state"), py::arg("thresh"), py::arg("maxiter"),
             "(iterations, status): at most maxiter CG iterations in place on x, r, p "
             "(q scratch; state float64 [r.r, r.z]; inv the diagonal preconditioner or "
             "None); status 0 converged (||r|| < thresh), 1 maxiter, 2 breakdown.");
    m.def("fwht_rows", &fwht_rows, py::arg("W"),
          "In-place unnormalised fast Walsh-Hadamard transform along axis 0 of W (m2, n), "
          "m2 a power of two.  OpenMP over column blocks.");
    m.def("spectral_norm_estimate", &spectral_norm_estimate, py::arg("A"),
          py::arg("maxiter") = 100, py::arg("rtol") = 1e-3, py::arg("seed") = 0,
          "Power-iteration lower estimate of ||A||_2; returns (sigma, iterations).");
    m.def("inverse_trace_batched", &inverse_trace_batched, py::arg("G"), py::arg("tau"),
          "1 / trace((G_b + tau I)^-1) for a float64 stack of symmetric Grams (Cholesky); "
          "-1 where the factorisation breaks down");
    m.def("spectral_norm_estimate_batched", &spectral_norm_estimate_batched, py::arg("A"),
          py::arg("maxiter") = 100, py::arg("rtol") = 1e-3, py::arg("seed") = 0,
          "spectral_norm_estimate for each matrix of a stack A (b, d, n); returns sigma (b,).");

    m.def("openmp_max_threads", &kernel_threads,
          "Threads the batched kernels will use: set_num_threads' value, else OpenMP's "
          "default for the calling thread.");
    m.def(
        "set_num_threads",
        [](int n) {
#if defined(_OPENMP)
            const int procs = omp_get_num_procs();
#else
            const int procs = 1;
#endif
            // more threads than a few per processor only oversubscribes the cores
            if (n > 4 * procs)
                throw py::value_error("n must be at most 4 x the " + std::to_string(procs) +
                                      " processors here (or <= 0 for the OpenMP default), "
                                      "got " + std::to_string(n));
            g_num_threads.store(n > 0 ? n : 0, std::memory_order_relaxed);
        },
        py::arg("n"),
        "Threads for the batched kernels in every calling thread (at most 4 per "
        "processor); n <= 0 restores the OpenMP default.  Does not affect BLAS (use "
        "threadpoolctl for that).");
    m.def("blas_info", &blas_info, "Which BLAS the single-problem kernels call.");
    m.def("build_info", &build_info, "Compiler, flags, OpenMP and kernel variants of this build.");
    m.def("kernel_isa", []() { return std::string(eagle::kernel_isa()); },
          "Instruction-set variant of the batched loop kernels in use.");
    m.def("available_kernel_isas", &eagle::available_kernel_isas,
          "Variants of the batched loop kernels that this build has and this CPU runs.");
    m.def(
        "set_kernel_isa",
        [](const std::string& name) {
            if (!eagle::set_kernel_isa(name)) {
                throw py::value_error("set_kernel_isa: unknown or unsupported variant '" + name +
                                      "'; available: " +
                                      std::string(py::str(py::cast(eagle::available_kernel_isas()))));
            }
        },
        py::arg("name"), "Force a variant of the batched loop kernels ('auto' for the best).");
}
