// pybind11 bindings of the compiled kernels: module eagle_sparse._core.
//
// This is the only file that includes pybind11 (its headers dominate compile time).  It
// is also the boundary where input is validated, by one class, ArgChecker, that every
// binding uses:
//  - arrays the kernels write (and the step kernels' operands) must already be NumPy
//    arrays of the call's exact dtype, C-contiguous, aligned and writeable -- converting
//    silently would write into a temporary copy and lose the result -- and no array a
//    kernel writes may share memory with another argument of the call;
//  - read-only data (values, right-hand sides, per-problem scalars) is converted to the
//    kernel's type only from real numeric dtypes (bool, integers, floats): complex data is
//    refused (its imaginary part would be dropped), and so are object arrays (None would be
//    read as NaN), strings (they would be parsed) and every other dtype;
//  - index arrays (indptr, indices, idx, perm, rows, signs) must have an integer dtype:
//    bool, float -- even integral-valued, as NumPy refuses float indices -- complex,
//    object and string arrays are refused, and values that do not fit the kernel's index
//    type are refused rather than wrapped;
//  - a compressed (CSR/CSC) pattern is checked in one O(nnz) pass before any kernel
//    indexes with it, and a compiled object (CsrMatrix) keeps private copies of the arrays
//    it indexes, so nothing the caller does later can make it read out of bounds.
// Wrong arguments raise TypeError (wrong kind of object or dtype) or ValueError (wrong
// shape, layout, overlap or values), the message naming the function and the argument.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>
#include <string>
#include <vector>

#include "blas.hpp"
#include "eagle_kernels.hpp"
#include "gram_kernels.hpp"
#include "kernel_passes.hpp"
#include "krylov_kernels.hpp"
#include "sketch_kernels.hpp"
#include "sketched_step.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

namespace py = pybind11;
using eagle::index_t;

namespace {

// 0: use the OpenMP default (OMP_NUM_THREADS, threadpoolctl limits, cores).
std::atomic<int> g_num_threads{0};
// GNU OpenMP is not fork-safe: a child forked after the parent ran a team of threads
// waits forever on the parent's pool if it starts a team.  Every call that may run a team
// marks g_teams; a child forked after one (pthread_atfork, registered at import) runs the
// kernels on one thread.
std::atomic<bool> g_teams{false};
std::atomic<bool> g_forked_after_teams{false};

void after_fork_in_child() {
    if (g_teams.load(std::memory_order_relaxed))
        g_forked_after_teams.store(true, std::memory_order_relaxed);
}

int kernel_threads() {
    if (g_forked_after_teams.load(std::memory_order_relaxed)) return 1;
    int n = g_num_threads.load(std::memory_order_relaxed);
#if defined(_OPENMP)
    if (n <= 0) n = omp_get_max_threads();
#else
    n = 1;
#endif
    if (n > 1) g_teams.store(true, std::memory_order_relaxed);
    return n;
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

template <typename T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

std::string dtype_str(const py::array& a) { return std::string(py::str(a.dtype())); }

template <typename I>
const char* int_name() {
    return sizeof(I) == 4 ? "int32" : "int64";
}

// Validates the arguments of one call, remembering the arrays it checked to test outputs
// for overlap (check_overlap).  See the comment at the top of the file for the rules.
class ArgChecker {
public:
    explicit ArgChecker(const char* fn) : fn_(fn) {}
    // `ref`: what sets the call's dtype where no argument does (a compiled object's data).
    ArgChecker(const char* fn, const char* ref) : fn_(fn), ref_(ref) {}

    [[noreturn]] void fail_value(const std::string& msg) const {
        throw py::value_error(std::string(fn_) + ": " + msg);
    }
    [[noreturn]] void fail_type(const std::string& msg) const {
        throw py::type_error(std::string(fn_) + ": " + msg);
    }

    // An ndarray of float32/float64 used as the reference dtype of the call (written in
    // place when `written`).
    py::array reference(const py::object& obj, const char* name, bool written = false) {
        py::array a = ndarray(obj, name);
        if (!py::array_t<float>::check_(a) && !py::array_t<double>::check_(a)) {
            fail_type(std::string(name) + " must have dtype float32 or float64, got " +
                      dtype_str(a) + complex_hint(a));
        }
        ref_ = name;
        layout(a, name, written);
        return a;
    }

    // An ndarray of exactly dtype T and the given shape, C-contiguous, aligned, and
    // writeable when written.  `spec` names the shape for the error message ("" for none).
    template <typename T>
    py::array operand(const py::object& obj, const char* name, bool written,
                      const std::vector<index_t>& shape, const char* spec) {
        py::array a = ndarray(obj, name);
        if (!py::array_t<T>::check_(a)) {
            fail_type(std::string(name) + " has dtype " + dtype_str(a) +
                      " but the call's dtype (the dtype of " + ref_ + ") is " +
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
            fail_value(std::string(name) + " must have shape " + spec + (*spec ? " = " : "") +
                       shape_str(shape) + ", got " + shape_str(shape_of(a)));
        }
    }

    void check_ndim(const py::array& a, const char* name, int ndim, const char* spec) const {
        if (a.ndim() != ndim)
            fail_value(std::string(name) + " must be " + std::to_string(ndim) + "-D " + spec +
                       ", got shape " + shape_str(shape_of(a)));
    }

    // Read-only real data as a C-contiguous array of T (converted, or copied into that
    // layout, where the caller's is not): see the rules at the top of the file.
    template <typename T>
    carray<T> values(const py::object& obj, const char* name) const {
        py::array a = any_array(obj, name);
        const char k = a.dtype().kind();
        if (k != 'b' && k != 'i' && k != 'u' && k != 'f') {
            fail_type(std::string(name) + " must be a real numeric array, got dtype " +
                      dtype_str(a) + complex_hint(a));
        }
        return carray<T>::ensure(a);
    }

    // Read-only index array as a C-contiguous array of I: integer dtypes only, every value
    // representable in I (see the rules at the top of the file).
    template <typename I>
    carray<I> integers(const py::object& obj, const char* name) const {
        py::array a = any_array(obj, name);
        const char k = a.dtype().kind();
        if (k == 'f' && a.size() == 0 && !py::isinstance<py::array>(obj)) {
            return carray<I>(std::vector<index_t>(a.shape(), a.shape() + a.ndim()));  // []
        }
        if (k != 'i' && k != 'u') {
            fail_type(std::string(name) + " must be an integer array, got dtype " +
                      dtype_str(a) +
                      (k == 'f' ? " (indices are never rounded or truncated; convert "
                                  "integral values with astype(numpy.intp))"
                                : ""));
        }
        const auto size = static_cast<std::size_t>(a.itemsize());
        const bool fits = size < sizeof(I) || (size == sizeof(I) && k == 'i');
        if (!fits && a.size() > 0) {
            const py::object lo = a.attr("min")(), hi = a.attr("max")();
            if (lo < py::int_(std::numeric_limits<I>::min()) ||
                hi > py::int_(std::numeric_limits<I>::max())) {
                fail_value(std::string(name) + " has values outside the range of " +
                           int_name<I>() + " (" + std::string(py::str(lo)) + " .. " +
                           std::string(py::str(hi)) + ")");
            }
        }
        return carray<I>::ensure(a);
    }

    // A read-only mask: boolean or integer (nonzero: true), as bool.
    carray<bool> mask(const py::object& obj, const char* name) const {
        py::array a = any_array(obj, name);
        const char k = a.dtype().kind();
        if (k != 'b' && k != 'i' && k != 'u')
            fail_type(std::string(name) + " must be a boolean or integer mask, got dtype " +
                      dtype_str(a));
        return carray<bool>::ensure(a);
    }

    // A compressed (CSR/CSC) pattern of n major slices over `bound` minor indices:
    // indptr (n + 1) starts at 0, never decreases and ends at nnz = len(indices), and
    // every index lies in [0, bound) -- what every kernel that walks one indexes with.
    // One pass over indptr, then one branch-free reduction over the indices.
    template <typename I>
    void compressed(const I* ip, index_t n, const I* ix, index_t nnz, index_t bound,
                    const char* what, const char* bound_name) const {
        if (ip[0] != 0 || static_cast<index_t>(ip[n]) != nnz)
            fail_value("indptr must start at 0 and end at len(indices) = " +
                       std::to_string(nnz) + ", got " + std::to_string(ip[0]) + " .. " +
                       std::to_string(ip[n]));
        // (branch-free or-reductions, which the compiler vectorises)
        unsigned decreasing = 0;
        for (index_t i = 0; i < n; ++i) decreasing |= static_cast<unsigned>(ip[i + 1] < ip[i]);
        if (decreasing) fail_value("indptr must be non-decreasing");
        using U = std::make_unsigned_t<I>;
        const index_t most = static_cast<index_t>(std::numeric_limits<I>::max());
        // (a negative index converts to an unsigned value above any bound)
        const U limit = bound > most ? static_cast<U>(most) + 1 : static_cast<U>(bound);
        unsigned outside = 0;
        for (index_t k = 0; k < nnz; ++k)
            outside |= static_cast<unsigned>(static_cast<U>(ix[k]) >= limit);
        if (outside)
            fail_value(std::string(what) + " must lie in [0, " + bound_name + ") = [0, " +
                       std::to_string(bound) + ")");
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

    static std::string complex_hint(const py::array& a) {
        return a.dtype().kind() == 'c'
                   ? " (complex data: the kernels are real and would drop the imaginary "
                     "part; pass the real and imaginary parts separately)"
                   : "";
    }

    py::array ndarray(const py::object& obj, const char* name) const {
        if (!py::isinstance<py::array>(obj)) {
            fail_type(std::string(name) + " must be a numpy.ndarray, got " +
                      std::string(py::str(py::type::of(obj).attr("__name__"))));
        }
        return py::reinterpret_borrow<py::array>(obj);
    }

    // Any array-like as an ndarray of the dtype NumPy infers for it (nothing converted).
    py::array any_array(const py::object& obj, const char* name) const {
        if (py::isinstance<py::array>(obj)) return py::reinterpret_borrow<py::array>(obj);
        if (obj.is_none()) fail_type(std::string(name) + " must be an array, got None");
        try {
            return py::module_::import("numpy").attr("asarray")(obj);
        } catch (py::error_already_set& e) {
            const bool value = e.matches(PyExc_ValueError);
            const std::string msg = std::string(name) + " is not array_like: " + e.what();
            if (value) fail_value(msg);
            fail_type(msg);
        }
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
    const char* ref_ = "A";
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

std::uint64_t seed_to_u64(const ArgChecker& chk, const py::object& seed) {
    if (seed.is_none()) return 0;
    if (!PyIndex_Check(seed.ptr()))  // (a float seed is not truncated: NumPy refuses it too)
        chk.fail_type("seed must be an integer or None, got " +
                      std::string(py::str(py::type::of(seed).attr("__name__"))));
    PyObject* index = PyNumber_Index(seed.ptr());
    if (index == nullptr) throw py::error_already_set();
    const py::int_ s = py::reinterpret_steal<py::int_>(index);
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
    carray<double> a;
    bool given = false;  // (a default-constructed array_t is an empty array, not null)
    const double* data() const { return given ? a.data() : nullptr; }
};

// ------------------------------------------------------------------ eagle_steps

using scalar_array = carray<double>;

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
    // traces: float64 whatever A's dtype (one message for any mismatch, as _checks.py has)
    chk.extent(traces, "traces", 1, 0, "(k,)");
    const py::array tr_arr = py::reinterpret_borrow<py::array>(traces);
    const bool f64 = py::array_t<double>::check_(tr_arr);
    if (!f64 || tr_arr.shape(0) != k || !tr_arr.writeable()) {
        const std::string msg = "traces must be a writeable float64 array of shape (" +
                                std::to_string(k) + ",), got " + dtype_str(tr_arr) + " " +
                                shape_str(shape_of(tr_arr));
        if (!f64) chk.fail_type(msg);
        chk.fail_value(msg);
    }
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
    const scalar_array e = chk.values<double>(eta_rho, "eta_rho"),
                       g = chk.values<double>(gamma_rho, "gamma_rho"),
                       sc = chk.values<double>(scale, "scale");
    OptionalScalars z;
    if (!zeta_rho2.is_none()) {
        z.a = chk.values<double>(zeta_rho2, "zeta_rho2");
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
using mask_array = carray<bool>;

// A per-problem array of shape (b,): real values, or the `active` mask.
template <typename Arr>
Arr per_problem(ArgChecker& chk, const py::object& obj, const char* name, index_t b) {
    Arr a;
    if constexpr (std::is_same_v<Arr, mask_array>)
        a = chk.mask(obj, name);
    else
        a = chk.values<double>(obj, name);
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
    const std::uint64_t s = seed_to_u64(chk, seed);
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
    const std::uint64_t s = seed_to_u64(chk, seed);
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

// ------------------------------------------------------------------ kernel_pass

// The fused kernel passes of Falkon's solver (kernel_passes.hpp).  X (n, d) float32 or
// float64, C-contiguous (read in place: it may be large); Z (m, d); mode "gram" reads
// V (m, t), "rhs" reads Y (n, t), "apply" reads V; w (n,) or None.  Returns (m, t)
// float64, (n, t) for "apply".  `single`: the kernel rows in float32.
py::array_t<double> kernel_pass(const py::object& X, const py::object& Z, const std::string& kind,
                                double gamma, double coef0, int degree, const std::string& mode,
                                const py::object& V, const py::object& w, const py::object& Y,
                                bool single) {
    ArgChecker chk("kernel_pass");
    int kk = -1;
    const char* kinds[] = {"linear", "polynomial", "rbf", "laplacian", "sigmoid"};
    for (int i = 0; i < 5; ++i)
        if (kind == kinds[i]) kk = i;
    if (kk < 0)
        chk.fail_value("kind must be one of linear, polynomial, rbf, laplacian, sigmoid, got " +
                       kind);
    int md = mode == "gram" ? eagle::kGram : mode == "rhs" ? eagle::kRhs
           : mode == "apply" ? eagle::kApply : -1;
    if (md < 0) chk.fail_value("mode must be 'gram', 'rhs' or 'apply', got " + mode);
    if (!std::isfinite(gamma)) chk.fail_value("gamma must be finite");
    if (!std::isfinite(coef0)) chk.fail_value("coef0 must be finite");
    if (degree < 0) chk.fail_value("degree must be >= 0, got " + std::to_string(degree));
    py::array x = chk.reference(X, "X");
    chk.check_ndim(x, "X", 2, "(n, d)");
    const index_t n = x.shape(0), d = x.shape(1);
    carray<double> z = chk.values<double>(Z, "Z");
    chk.check_ndim(z, "Z", 2, "(m, d)");
    if (z.shape(1) != d)
        chk.fail_value("Z must have d = " + std::to_string(d) + " columns (X's), got shape " +
                       shape_str(shape_of(z)));
    const index_t m = z.shape(0);
    // V (m, t) or Y (n, t): the right-hand block, its rows those of Z or X
    const bool rhs = md == eagle::kRhs;
    const char* bname = rhs ? "Y" : "V";
    const index_t brows = rhs ? n : m;
    carray<double> b = chk.values<double>(rhs ? Y : V, bname);
    chk.check_ndim(b, bname, 2, rhs ? "(n, t)" : "(m, t)");
    if (b.shape(0) != brows)
        chk.fail_value(std::string(bname) + " must have " + (rhs ? "n = " : "m = ") +
                       std::to_string(brows) + (rhs ? " rows (X's)" : " rows (Z's)") +
                       ", got shape " + shape_str(shape_of(b)));
    const index_t t = b.shape(1);
    carray<double> wt;
    const double* wp = nullptr;
    if (!w.is_none()) {
        wt = chk.values<double>(w, "w");
        chk.check_shape(wt, "w", {n}, "(n,)");
        wp = wt.data();
    }
    const eagle::KernelSpec spec{kk, gamma, coef0, degree};
    py::array_t<double> out({md == eagle::kApply ? n : m, t});
    double* o = out.mutable_data();
    const double* vp = rhs ? nullptr : b.data();
    const double* yp = rhs ? b.data() : nullptr;
    const int nt = kernel_threads();
    // the samples' dtype (Tin) times the kernel rows' (T)
    auto run = [&](auto xin, auto kt) {
        using Tin = decltype(xin);
        using T = decltype(kt);
        eagle::kernel_pass<Tin, T>(spec, md, n, d, rptr<Tin>(x), m, z.data(), t, vp, wp, yp, o,
                                   nt);
    };
    const bool x64 = py::array_t<double>::check_(x);
    {
        py::gil_scoped_release nogil;
        if (x64 && single) run(double{}, float{});
        else if (x64) run(double{}, double{});
        else if (single) run(float{}, float{});
        else run(float{}, double{});
    }
    return out;
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

// ------------------------------------------------------------------ compressed patterns

// Whether both index arrays of a compressed pattern are int32 arrays (SciPy's usual type:
// the kernels then read them without a copy); otherwise both are read as int64.
bool int32_pattern(const py::object& indptr, const py::object& indices) {
    return py::array_t<std::int32_t>::check_(indptr) &&
           py::array_t<std::int32_t>::check_(indices);
}

// A compressed (CSR/CSC) pattern from the caller, checked (ArgChecker::compressed): n major
// slices over `bound` minor indices (bound < 0: n, a square matrix).
template <typename I>
struct Pattern {
    carray<I> indptr, indices;
    index_t n = 0, bound = 0;
    index_t nnz() const { return indices.shape(0); }
};

template <typename I>
Pattern<I> pattern(const ArgChecker& chk, const py::object& indptr, const py::object& indices,
                   index_t bound, const char* what, const char* bound_name) {
    Pattern<I> c{chk.integers<I>(indptr, "indptr"), chk.integers<I>(indices, "indices")};
    if (c.indptr.ndim() != 1 || c.indptr.shape(0) < 1)
        chk.fail_value("indptr must be 1-D of length n + 1, got shape " +
                       shape_str(shape_of(c.indptr)));
    chk.check_ndim(c.indices, "indices", 1, "(nnz,)");
    c.n = c.indptr.shape(0) - 1;
    c.bound = bound < 0 ? c.n : bound;
    chk.compressed(c.indptr.data(), c.n, c.indices.data(), c.nnz(), c.bound, what, bound_name);
    return c;
}

// The values of a compressed matrix: 1-D, one per stored index.
template <typename T>
carray<T> pattern_values(const ArgChecker& chk, const py::object& data, index_t nnz,
                         const char* msg) {
    carray<T> v = chk.values<T>(data, "data");
    if (v.ndim() != 1 || v.shape(0) != nnz) chk.fail_value(msg);
    return v;
}

// The element type of read-only data: float32 where the caller's is, else float64.
bool is_float32(const py::object& obj) { return py::array_t<float>::check_(obj); }

// ------------------------------------------------------------------ pattern queries

// Whether any major slice of a compressed pattern repeats a minor index (scipy.sparse's
// "duplicates", which products add up): one pass with a marker array where it is no
// larger than the pattern, else each unsorted slice sorted in a small buffer.  The
// pattern is checked first (ArgChecker::compressed), so every index is within bounds.
template <typename I>
bool csr_duplicates_typed(const ArgChecker& chk, const py::object& indptr,
                          const py::object& indices, index_t bound) {
    const Pattern<I> c = pattern<I>(chk, indptr, indices, bound, "indices", "bound");
    const I* ip = c.indptr.data();
    const I* ix = c.indices.data();
    const index_t n = c.n;
    bool dup = false;
    {
        py::gil_scoped_release nogil;
        if (bound <= 8 * c.nnz() + 4096) {
            std::vector<index_t> mark(static_cast<std::size_t>(bound), -1);
            for (index_t i = 0; i < n && !dup; ++i)
                for (index_t k = ip[i]; k < static_cast<index_t>(ip[i + 1]); ++k) {
                    const index_t j = ix[k];
                    if (mark[j] == i) {
                        dup = true;
                        break;
                    }
                    mark[j] = i;
                }
        } else {
            std::vector<I> row;
            for (index_t i = 0; i < n && !dup; ++i) {
                const index_t lo = ip[i], hi = ip[i + 1];
                bool increasing = true;
                for (index_t k = lo + 1; k < hi && increasing; ++k) increasing = ix[k - 1] < ix[k];
                if (increasing) continue;
                row.assign(ix + lo, ix + hi);
                std::sort(row.begin(), row.end());
                dup = std::adjacent_find(row.begin(), row.end()) != row.end();
            }
        }
    }
    return dup;
}

bool csr_duplicates(const py::object& indptr, const py::object& indices, index_t bound) {
    const ArgChecker chk("csr_duplicates");
    if (bound < 0) chk.fail_value("bound must be >= 0, got " + std::to_string(bound));
    if (int32_pattern(indptr, indices))
        return csr_duplicates_typed<std::int32_t>(chk, indptr, indices, bound);
    return csr_duplicates_typed<std::int64_t>(chk, indptr, indices, bound);
}

// ------------------------------------------------------------------ sketches

// The sparse sign embedding's pattern: rows (m, zeta) in [0, s), signs (m, zeta) each +1 or
// -1 (the kernels take any other value for -1).
struct SignPattern {
    carray<std::int32_t> rows;
    carray<std::int8_t> signs;
    int zeta = 0;
};

SignPattern sign_pattern(const ArgChecker& chk, const py::object& rows_obj,
                         const py::object& signs_obj, index_t m, index_t s) {
    SignPattern p{chk.integers<std::int32_t>(rows_obj, "rows"),
                  chk.integers<std::int8_t>(signs_obj, "signs")};
    if (p.rows.ndim() != 2 || p.rows.shape(0) != m)
        chk.fail_value("rows must have shape (m, zeta) = (" + std::to_string(m) +
                       ", zeta), got " + shape_str(shape_of(p.rows)));
    if (p.rows.shape(1) < 1 || p.rows.shape(1) > std::numeric_limits<int>::max())
        chk.fail_value("rows must have at least one column (zeta >= 1)");
    p.zeta = static_cast<int>(p.rows.shape(1));
    chk.check_shape(p.signs, "signs", shape_of(p.rows), "of rows");
    const std::int32_t* r = p.rows.data();
    const std::int8_t* g = p.signs.data();
    const auto limit = static_cast<std::uint32_t>(std::min<index_t>(s, index_t(1) << 31));
    unsigned bad = 0;  // (a branch-free or-reduction: vectorised)
    for (index_t k = 0; k < m * p.zeta; ++k)
        bad |= static_cast<unsigned>(static_cast<std::uint32_t>(r[k]) >= limit) |
               static_cast<unsigned>(g[k] * g[k] != 1);
    if (bad)
        chk.fail_value("rows entries must lie in [0, s) = [0, " + std::to_string(s) +
                       ") and signs entries must be +1 or -1");
    return p;
}

template <typename T, typename I>
py::array sparse_sign_csc_typed(const ArgChecker& chk, const py::object& indptr,
                                const py::object& indices, const py::object& data, index_t m,
                                index_t s, const py::object& rows, const py::object& signs,
                                double scale) {
    const Pattern<I> c = pattern<I>(chk, indptr, indices, m, "row indices", "m");
    const carray<T> v = pattern_values<T>(chk, data, c.nnz(),
                                          "indices and data must be 1-D of equal length");
    const SignPattern sg = sign_pattern(chk, rows, signs, m, s);
    const index_t n = c.n;
    py::array_t<T, py::array::f_style> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::sparse_sign_csc<T, I>(m, n, c.indptr.data(), c.indices.data(), v.data(), s,
                                     sg.zeta, sg.rows.data(), sg.signs.data(), scale, o, nt);
    }
    return out;
}

py::array sparse_sign_csc(const py::object& indptr, const py::object& indices,
                          const py::object& data, index_t m, index_t s, const py::object& rows,
                          const py::object& signs, double scale) {
    const ArgChecker chk("sparse_sign_csc");
    if (s < 1 || m < 0) chk.fail_value("s must be >= 1 and m >= 0");
    const bool i32 = int32_pattern(indptr, indices);
    if (is_float32(data))
        return i32 ? sparse_sign_csc_typed<float, std::int32_t>(chk, indptr, indices, data, m, s,
                                                               rows, signs, scale)
                   : sparse_sign_csc_typed<float, std::int64_t>(chk, indptr, indices, data, m, s,
                                                               rows, signs, scale);
    return i32 ? sparse_sign_csc_typed<double, std::int32_t>(chk, indptr, indices, data, m, s,
                                                            rows, signs, scale)
               : sparse_sign_csc_typed<double, std::int64_t>(chk, indptr, indices, data, m, s,
                                                            rows, signs, scale);
}

template <typename T, typename I>
py::array sparse_sign_csr_typed(const ArgChecker& chk, const py::object& indptr,
                                const py::object& indices, const py::object& data, index_t n,
                                index_t s, const py::object& rows, const py::object& signs,
                                double scale) {
    const Pattern<I> c = pattern<I>(chk, indptr, indices, n, "column indices", "n");
    const carray<T> v = pattern_values<T>(chk, data, c.nnz(),
                                          "indices and data must be 1-D of equal length");
    const index_t m = c.n;
    const SignPattern sg = sign_pattern(chk, rows, signs, m, s);
    py::array_t<T> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::sparse_sign_csr<T, I>(m, n, c.indptr.data(), c.indices.data(), v.data(), s,
                                     sg.zeta, sg.rows.data(), sg.signs.data(), scale, o, nt,
                                     std::size_t(256) << 20);
    }
    return out;
}

py::array sparse_sign_csr(const py::object& indptr, const py::object& indices,
                          const py::object& data, index_t n, index_t s, const py::object& rows,
                          const py::object& signs, double scale) {
    const ArgChecker chk("sparse_sign_csr");
    if (s < 1 || n < 0) chk.fail_value("s must be >= 1 and n >= 0");
    const bool i32 = int32_pattern(indptr, indices);
    if (is_float32(data))
        return i32 ? sparse_sign_csr_typed<float, std::int32_t>(chk, indptr, indices, data, n, s,
                                                               rows, signs, scale)
                   : sparse_sign_csr_typed<float, std::int64_t>(chk, indptr, indices, data, n, s,
                                                               rows, signs, scale);
    return i32 ? sparse_sign_csr_typed<double, std::int32_t>(chk, indptr, indices, data, n, s,
                                                            rows, signs, scale)
               : sparse_sign_csr_typed<double, std::int64_t>(chk, indptr, indices, data, n, s,
                                                            rows, signs, scale);
}

template <typename T>
py::array sparse_sign_dense_typed(const ArgChecker& chk, const py::object& A_obj, index_t s,
                                  const py::object& rows, const py::object& signs,
                                  double scale) {
    const carray<T> A = chk.values<T>(A_obj, "A");
    chk.check_ndim(A, "A", 2, "(m, n)");
    const index_t m = A.shape(0), n = A.shape(1);
    const SignPattern sg = sign_pattern(chk, rows, signs, m, s);
    py::array_t<T, py::array::c_style> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    {
        py::gil_scoped_release nogil;
        eagle::sparse_sign_dense<T>(m, n, A.data(), s, sg.zeta, sg.rows.data(),
                                    sg.signs.data(), scale, o, nt);
    }
    return out;
}

py::array sparse_sign_dense(const py::object& A, index_t s, const py::object& rows,
                            const py::object& signs, double scale) {
    const ArgChecker chk("sparse_sign_dense");
    if (s < 1) chk.fail_value("s must be >= 1");
    if (is_float32(A)) return sparse_sign_dense_typed<float>(chk, A, s, rows, signs, scale);
    return sparse_sign_dense_typed<double>(chk, A, s, rows, signs, scale);
}

// The SRHT's D and R: signs (m,) of the data's type, idx (s,) rows of the m2-point
// transform, m2 a power of two >= m.
template <typename T>
struct SrhtPattern {
    carray<T> signs;
    carray<std::int64_t> idx;
};

template <typename T>
SrhtPattern<T> srht_pattern(const ArgChecker& chk, const py::object& signs,
                            const py::object& idx_obj, index_t m, index_t m2) {
    if (m2 < 1 || (m2 & (m2 - 1)) != 0 || m2 < m)
        chk.fail_value("m2 must be a power of two >= m = " + std::to_string(m) + ", got " +
                       std::to_string(m2));
    SrhtPattern<T> p{chk.values<T>(signs, "signs"), chk.integers<std::int64_t>(idx_obj, "idx")};
    chk.check_shape(p.signs, "signs", {m}, "(m,)");
    chk.check_ndim(p.idx, "idx", 1, "(s,)");
    const std::int64_t* ix = p.idx.data();
    bool ok = true;
    for (index_t k = 0; k < p.idx.shape(0); ++k) ok &= ix[k] >= 0 && ix[k] < m2;
    if (!ok) chk.fail_value("idx entries must lie in [0, m2) = [0, " + std::to_string(m2) + ")");
    return p;
}

template <typename T>
py::array srht_dense_typed(const ArgChecker& chk, const py::object& A_obj,
                           const py::object& signs, const py::object& idx, index_t m2,
                           double scale) {
    const carray<T> A = chk.values<T>(A_obj, "A");
    chk.check_ndim(A, "A", 2, "(m, n)");
    const index_t m = A.shape(0), n = A.shape(1);
    const SrhtPattern<T> p = srht_pattern<T>(chk, signs, idx, m, m2);
    const index_t s = p.idx.shape(0);
    py::array_t<T> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    py::gil_scoped_release nogil;
    eagle::srht_dense<T>(m, n, A.data(), p.signs.data(), m2, s, p.idx.data(), scale, o, nt);
    return out;
}

py::array srht_dense(const py::object& A, const py::object& signs, const py::object& idx,
                     index_t m2, double scale) {
    const ArgChecker chk("srht_dense");
    if (is_float32(A)) return srht_dense_typed<float>(chk, A, signs, idx, m2, scale);
    return srht_dense_typed<double>(chk, A, signs, idx, m2, scale);
}

template <typename T, typename I>
py::array srht_csc_typed(const ArgChecker& chk, const py::object& indptr,
                         const py::object& indices, const py::object& data, index_t m,
                         const py::object& signs, const py::object& idx, index_t m2,
                         double scale) {
    const Pattern<I> c = pattern<I>(chk, indptr, indices, m, "row indices", "m");
    const carray<T> v = pattern_values<T>(chk, data, c.nnz(),
                                          "indices and data must be 1-D of equal length");
    const I* ip = c.indptr.data();
    const I* ix = c.indices.data();
    bool sorted = true;  // (the kernel finds a chunk's entries by binary search)
    for (index_t j = 0; j < c.n; ++j)
        for (I k = ip[j] + 1; k < ip[j + 1]; ++k) sorted &= ix[k - 1] <= ix[k];
    if (!sorted)
        chk.fail_value("row indices must be sorted within each column (A.sorted_indices())");
    const SrhtPattern<T> p = srht_pattern<T>(chk, signs, idx, m, m2);
    const index_t s = p.idx.shape(0), n = c.n;
    py::array_t<T> out({s, n});
    T* o = out.mutable_data();
    const int nt = kernel_threads();
    py::gil_scoped_release nogil;
    eagle::srht_csc<T, I>(m, n, ip, ix, v.data(), p.signs.data(), m2, s, p.idx.data(), scale,
                          o, nt);
    return out;
}

py::array srht_csc(const py::object& indptr, const py::object& indices, const py::object& data,
                   index_t m, const py::object& signs, const py::object& idx, index_t m2,
                   double scale) {
    const ArgChecker chk("srht_csc");
    if (m < 0) chk.fail_value("m must be >= 0");
    const bool i32 = int32_pattern(indptr, indices);
    if (is_float32(data))
        return i32 ? srht_csc_typed<float, std::int32_t>(chk, indptr, indices, data, m, signs,
                                                        idx, m2, scale)
                   : srht_csc_typed<float, std::int64_t>(chk, indptr, indices, data, m, signs,
                                                        idx, m2, scale);
    return i32 ? srht_csc_typed<double, std::int32_t>(chk, indptr, indices, data, m, signs, idx,
                                                     m2, scale)
               : srht_csc_typed<double, std::int64_t>(chk, indptr, indices, data, m, signs, idx,
                                                     m2, scale);
}

void fwht_rows(const py::object& W_obj) {
    ArgChecker chk("fwht_rows");
    py::array W = chk.reference(W_obj, "W", true);
    if (W.ndim() < 1 || W.ndim() > 2) chk.fail_value("W must be 1-D or 2-D");
    const index_t m2 = W.shape(0), n = W.ndim() == 2 ? W.shape(1) : 1;
    if (m2 < 1 || (m2 & (m2 - 1)) != 0)
        chk.fail_value("W.shape[0] must be a power of two, got " + std::to_string(m2));
    const int nt = kernel_threads();
    py::gil_scoped_release nogil;
    if (py::array_t<double>::check_(W))
        eagle::fwht_rows<double>(m2, n, wptr<double>(W), nt);
    else
        eagle::fwht_rows<float>(m2, n, wptr<float>(W), nt);
}

// ------------------------------------------------------------------ envelope Cholesky

// The CSR pattern of a square matrix with a permutation of its rows (row i of P A P^T is
// row perm[i] of A); every index the envelope kernels use is checked here.
template <typename I>
struct EnvelopeInput {
    Pattern<I> c;
    carray<std::int64_t> perm;
};

template <typename I>
EnvelopeInput<I> envelope_input(const ArgChecker& chk, const py::object& indptr,
                                const py::object& indices, const py::object& perm_obj) {
    EnvelopeInput<I> e{pattern<I>(chk, indptr, indices, -1, "indices", "n"),
                       chk.integers<std::int64_t>(perm_obj, "perm")};
    const index_t n = e.c.n;
    if (e.perm.ndim() != 1 || e.perm.shape(0) != n)
        chk.fail_value("perm must be 1-D of length n = " + std::to_string(n));
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    const std::int64_t* pp = e.perm.data();
    for (index_t i = 0; i < n; ++i) {
        if (pp[i] < 0 || pp[i] >= n || seen[pp[i]])
            chk.fail_value("perm must be a permutation of range(n)");
        seen[pp[i]] = 1;
    }
    return e;
}

template <typename I>
py::tuple envelope_first_typed(const ArgChecker& chk, const py::object& indptr,
                               const py::object& indices, const py::object& perm) {
    const EnvelopeInput<I> e = envelope_input<I>(chk, indptr, indices, perm);
    py::array_t<std::int64_t> first(e.c.n);
    index_t entries = 0;
    {
        py::gil_scoped_release nogil;
        entries = eagle::envelope_first<I>(e.c.n, e.c.indptr.data(), e.c.indices.data(),
                                           e.perm.data(), first.mutable_data());
    }
    return py::make_tuple(first, entries);
}

py::tuple envelope_first(const py::object& indptr, const py::object& indices,
                         const py::object& perm) {
    const ArgChecker chk("envelope_first");
    if (int32_pattern(indptr, indices))
        return envelope_first_typed<std::int32_t>(chk, indptr, indices, perm);
    return envelope_first_typed<std::int64_t>(chk, indptr, indices, perm);
}

template <typename T, typename I>
py::tuple envelope_cholesky_typed(const ArgChecker& chk, const py::object& indptr,
                                  const py::object& indices, const py::object& data_obj,
                                  const py::object& perm, double rel_pivot) {
    const EnvelopeInput<I> e = envelope_input<I>(chk, indptr, indices, perm);
    const index_t n = e.c.n;
    const carray<T> data = pattern_values<T>(chk, data_obj, e.c.nnz(),
                                             "data must be 1-D, of the length of indices");
    if (!(rel_pivot >= 0.0 && rel_pivot < 1.0)) chk.fail_value("rel_pivot must lie in [0, 1)");
    py::array_t<std::int64_t> first(n), ptr(n + 1);
    std::int64_t* f = first.mutable_data();
    std::int64_t* p = ptr.mutable_data();
    index_t entries = 0;
    {
        py::gil_scoped_release nogil;
        entries = eagle::envelope_first<I>(n, e.c.indptr.data(), e.c.indices.data(),
                                           e.perm.data(), f);
    }
    py::array_t<T> val(entries);
    T* v = val.mutable_data();
    index_t info = 0;
    {
        py::gil_scoped_release nogil;
        p[0] = 0;
        for (index_t i = 0; i < n; ++i) p[i + 1] = p[i] + (i - f[i] + 1);
        info = eagle::envelope_cholesky<T, I>(n, e.c.indptr.data(), e.c.indices.data(),
                                              data.data(), e.perm.data(), f, p, v, rel_pivot);
    }
    return py::make_tuple(first, ptr, val, info);
}

py::tuple envelope_cholesky(const py::object& indptr, const py::object& indices,
                            const py::object& data, const py::object& perm, double rel_pivot) {
    const ArgChecker chk("envelope_cholesky");
    const bool i32 = int32_pattern(indptr, indices);
    if (is_float32(data))
        return i32 ? envelope_cholesky_typed<float, std::int32_t>(chk, indptr, indices, data,
                                                                  perm, rel_pivot)
                   : envelope_cholesky_typed<float, std::int64_t>(chk, indptr, indices, data,
                                                                  perm, rel_pivot);
    return i32 ? envelope_cholesky_typed<double, std::int32_t>(chk, indptr, indices, data, perm,
                                                               rel_pivot)
               : envelope_cholesky_typed<double, std::int64_t>(chk, indptr, indices, data, perm,
                                                               rel_pivot);
}

template <typename T>
py::array envelope_solve_typed(const ArgChecker& chk, const py::object& first_obj,
                               const py::object& ptr_obj, const py::object& val_obj,
                               const py::object& b_obj) {
    const carray<std::int64_t> first = chk.integers<std::int64_t>(first_obj, "first"),
                               ptr = chk.integers<std::int64_t>(ptr_obj, "ptr");
    const carray<T> val = chk.values<T>(val_obj, "val");
    if (val.ndim() != 1) chk.fail_value("val must be 1-D");
    if (first.ndim() != 1 || ptr.ndim() != 1 || ptr.shape(0) != first.shape(0) + 1)
        chk.fail_value("first (n,) and ptr (n + 1,) do not match");
    const index_t n = first.shape(0);
    const std::int64_t* f = first.data();
    const std::int64_t* p = ptr.data();
    if (p[0] != 0 || p[n] != val.shape(0))
        chk.fail_value("ptr must start at 0 and end at len(val)");
    for (index_t i = 0; i < n; ++i)
        if (f[i] < 0 || f[i] > i || p[i + 1] - p[i] != i - f[i] + 1)
            chk.fail_value("first and ptr do not describe a row envelope");
    const carray<T> b = chk.values<T>(b_obj, "b");
    if (b.ndim() < 1 || b.ndim() > 2 || b.shape(0) != n)
        chk.fail_value("b must be (n,) or (n, k) with n = " + std::to_string(n) + ", got " +
                       shape_str(shape_of(b)));
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

py::array envelope_solve(const py::object& first, const py::object& ptr, const py::object& val,
                         const py::object& b) {
    const ArgChecker chk("envelope_solve");
    if (is_float32(val)) return envelope_solve_typed<float>(chk, first, ptr, val, b);
    return envelope_solve_typed<double>(chk, first, ptr, val, b);
}

// ------------------------------------------------------------------ sampled (sketched) step

// Distinct column indices idx (r,) in [0, n).
carray<std::int64_t> sample_indices(const ArgChecker& chk, const py::object& idx_obj,
                                    index_t n) {
    carray<std::int64_t> idx = chk.integers<std::int64_t>(idx_obj, "idx");
    chk.check_ndim(idx, "idx", 1, "(r,)");
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    const std::int64_t* p = idx.data();
    for (index_t k = 0; k < idx.shape(0); ++k) {
        if (p[k] < 0 || p[k] >= n)
            chk.fail_value("idx entries must lie in [0, n) = [0, " + std::to_string(n) + ")");
        if (seen[static_cast<std::size_t>(p[k])]++)
            chk.fail_value("idx entries must be distinct");
    }
    return idx;
}

// The reference A (d, n) of a sketched step, typed.
void sketch_reference(ArgChecker& chk, const py::array& A) {
    chk.check_ndim(A, "A", 2, "(d, n)");
    check_int32(chk, {A.shape(0), A.shape(1)});
}

template <typename T>
void sampled_gram_typed(ArgChecker& chk, const py::array& A, const py::object& idx_obj,
                        const py::object& At, const py::object& G) {
    sketch_reference(chk, A);
    const index_t d = A.shape(0), n = A.shape(1);
    const carray<std::int64_t> idx = sample_indices(chk, idx_obj, n);
    const index_t r = idx.shape(0);
    py::array at = chk.operand<T>(At, "At", true, {d, r}, "");
    py::array g = chk.operand<T>(G, "G", true, {r, r}, "");
    chk.check_overlap();
    py::gil_scoped_release nogil;
    eagle::sampled_gram<T>(d, n, r, rptr<T>(A), idx.data(), wptr<T>(at), wptr<T>(g));
}

void sampled_gram(const py::object& A, const py::object& idx, const py::object& At,
                  const py::object& G) {
    ArgChecker chk("sampled_gram");
    py::array a = chk.reference(A, "A");
    if (py::array_t<double>::check_(a))
        sampled_gram_typed<double>(chk, a, idx, At, G);
    else
        sampled_gram_typed<float>(chk, a, idx, At, G);
}

// B (p, n), C (d, q), D (p, q) of a sketched step on A (d, n), all written.
struct SketchedBlocks {
    index_t p = 0, q = 0;
    py::array b, c, dd;
};

template <typename T>
SketchedBlocks sketched_blocks(ArgChecker& chk, index_t d, index_t n, const py::object& B,
                               const py::object& C, const py::object& D) {
    SketchedBlocks o;
    o.p = chk.extent(B, "B", 2, 0, "(p, n)");
    o.q = chk.extent(C, "C", 2, 1, "(d, q)");
    check_int32(chk, {o.p, o.q});
    o.b = chk.operand<T>(B, "B", true, {o.p, n}, "");
    o.c = chk.operand<T>(C, "C", true, {d, o.q}, "");
    o.dd = chk.operand<T>(D, "D", true, {o.p, o.q}, "");
    return o;
}

template <typename T>
void sampled_update_typed(ArgChecker& chk, const py::array& A, const py::object& B,
                          const py::object& C, const py::object& D, const py::object& idx_obj,
                          const py::object& At, const py::object& G, double eta_rho,
                          double gamma_rho) {
    sketch_reference(chk, A);
    const index_t d = A.shape(0), n = A.shape(1);
    const carray<std::int64_t> idx = sample_indices(chk, idx_obj, n);
    const index_t r = idx.shape(0);
    py::array at = chk.operand<T>(At, "At", false, {d, r}, "");
    py::array g = chk.operand<T>(G, "G", false, {r, r}, "");
    const SketchedBlocks o = sketched_blocks<T>(chk, d, n, B, C, D);
    chk.check_overlap();
    const index_t p = o.p, q = o.q;
    std::vector<T> bt(static_cast<std::size_t>(p * r)), w(static_cast<std::size_t>(r * q)),
        t1(static_cast<std::size_t>(std::max(d, p) * r));
    py::gil_scoped_release nogil;
    eagle::sampled_update<T>(d, n, p, q, r, wptr<T>(A), wptr<T>(o.b), wptr<T>(o.c),
                             wptr<T>(o.dd), idx.data(), rptr<T>(at), rptr<T>(g), eta_rho,
                             gamma_rho, bt.data(), w.data(), t1.data());
}

void sampled_update(const py::object& A, const py::object& B, const py::object& C,
                    const py::object& D, const py::object& idx, const py::object& At,
                    const py::object& G, double eta_rho, double gamma_rho) {
    ArgChecker chk("sampled_update");
    py::array a = chk.reference(A, "A", true);
    if (py::array_t<double>::check_(a))
        sampled_update_typed<double>(chk, a, B, C, D, idx, At, G, eta_rho, gamma_rho);
    else
        sampled_update_typed<float>(chk, a, B, C, D, idx, At, G, eta_rho, gamma_rho);
}

// The dense sketch S (n, r), r <= n, of a sketched step on A (d, n).
template <typename T>
py::array sketch_matrix(ArgChecker& chk, index_t n, const py::object& S, index_t& r) {
    r = chk.extent(S, "S", 2, 1, "(n, r)");
    if (r > n) chk.fail_value("S must have at most n = " + std::to_string(n) + " columns");
    return chk.operand<T>(S, "S", false, {n, r}, "");
}

template <typename T>
void sketched_gram_typed(ArgChecker& chk, const py::array& A, const py::object& S_obj,
                         const py::object& At, const py::object& G) {
    sketch_reference(chk, A);
    const index_t d = A.shape(0), n = A.shape(1);
    index_t r = 0;
    py::array s = sketch_matrix<T>(chk, n, S_obj, r);
    py::array at = chk.operand<T>(At, "At", true, {d, r}, "");
    py::array g = chk.operand<T>(G, "G", true, {r, r}, "");
    chk.check_overlap();
    py::gil_scoped_release nogil;
    eagle::sketched_gram<T>(d, n, r, rptr<T>(A), rptr<T>(s), wptr<T>(at), wptr<T>(g));
}

void sketched_gram(const py::object& A, const py::object& S, const py::object& At,
                   const py::object& G) {
    ArgChecker chk("sketched_gram");
    py::array a = chk.reference(A, "A");
    if (py::array_t<double>::check_(a))
        sketched_gram_typed<double>(chk, a, S, At, G);
    else
        sketched_gram_typed<float>(chk, a, S, At, G);
}

template <typename T>
void sketched_update_typed(ArgChecker& chk, const py::array& A, const py::object& B,
                           const py::object& C, const py::object& D, const py::object& S_obj,
                           const py::object& At, const py::object& G, double eta_rho,
                           double gamma_rho) {
    sketch_reference(chk, A);
    const index_t d = A.shape(0), n = A.shape(1);
    index_t r = 0;
    py::array s = sketch_matrix<T>(chk, n, S_obj, r);
    const SketchedBlocks o = sketched_blocks<T>(chk, d, n, B, C, D);
    py::array at = chk.operand<T>(At, "At", false, {d, r}, "");
    py::array g = chk.operand<T>(G, "G", false, {r, r}, "");
    chk.check_overlap();
    const index_t p = o.p, q = o.q;
    std::vector<T> bt(static_cast<std::size_t>(p * r)), w(static_cast<std::size_t>(r * q)),
        t1(static_cast<std::size_t>(std::max(d, p) * r));
    py::gil_scoped_release nogil;
    eagle::sketched_update<T>(d, n, p, q, r, wptr<T>(A), wptr<T>(o.b), wptr<T>(o.c),
                              wptr<T>(o.dd), rptr<T>(s), rptr<T>(at), rptr<T>(g), eta_rho,
                              gamma_rho, bt.data(), w.data(), t1.data());
}

void sketched_update(const py::object& A, const py::object& B, const py::object& C,
                     const py::object& D, const py::object& S, const py::object& At,
                     const py::object& G, double eta_rho, double gamma_rho) {
    ArgChecker chk("sketched_update");
    py::array a = chk.reference(A, "A", true);
    if (py::array_t<double>::check_(a))
        sketched_update_typed<double>(chk, a, B, C, D, S, At, G, eta_rho, gamma_rho);
    else
        sketched_update_typed<float>(chk, a, B, C, D, S, At, G, eta_rho, gamma_rho);
}

// ------------------------------------------------------------------ CG on CSR

// A private 1-D copy of `a`, unless converting the caller's `original` already made one
// (a fresh array that owns its data and nothing else references).
template <typename T>
py::array_t<T> owned(const carray<T>& a, const py::object& original, bool copy = true) {
    if (!copy || (a.ptr() != original.ptr() && a.owndata() && a.ref_count() == 1))
        return py::reinterpret_borrow<py::array_t<T>>(a);
    py::array_t<T> out(a.shape(0));
    if (a.shape(0) > 0)
        std::memcpy(out.mutable_data(), a.data(), static_cast<std::size_t>(a.nbytes()));
    return out;
}

// A CSR matrix (rows x cols; square unless cols is given), validated once (the pattern is
// checked in O(nnz) here, not on every call of the CG or CGLS loop that follows): int32
// indices where both index arrays are int32, else int64; float32 or float64 values.  It
// holds private copies of the three arrays (made while validating them), so changing or
// freeing the caller's arrays afterwards never reaches the kernels.
class CsrMatrix {
public:
    CsrMatrix(const py::object& indptr, const py::object& indices, const py::object& data,
              index_t cols, const py::object& dtype, bool copy)
        : cols_(cols), copy_(copy) {
        const ArgChecker chk("CsrMatrix");
        if (dtype.is_none()) {
            if (!py::array_t<float>::check_(data) && !py::array_t<double>::check_(data))
                chk.fail_type("data must have dtype float32 or float64 (or pass dtype), got " +
                              (py::isinstance<py::array>(data)
                                   ? dtype_str(py::reinterpret_borrow<py::array>(data))
                                   : std::string(py::str(py::type::of(data).attr("__name__")))));
            f32_ = py::array_t<float>::check_(data);
        } else {
            const py::dtype dt = py::dtype::from_args(dtype);
            if (!dt.is(py::dtype::of<float>()) && !dt.is(py::dtype::of<double>()))
                chk.fail_type("dtype must be float32 or float64, got " + std::string(py::str(dt)));
            f32_ = dt.is(py::dtype::of<float>());
        }
        i32_ = int32_pattern(indptr, indices);
        if (i32_)
            init<std::int32_t>(chk, indptr, indices, data);
        else
            init<std::int64_t>(chk, indptr, indices, data);
    }

    index_t n() const { return n_; }
    py::tuple shape() const { return py::make_tuple(n_, cols_); }
    py::dtype dtype() const { return data_.dtype(); }

    py::array normal_product(const py::object& x, const py::object& q,
                             const py::object& w) const {
        return f32_ ? normal_product_typed<float>(x, q, w)
                    : normal_product_typed<double>(x, q, w);
    }

    py::array matvec(const py::object& x_obj) const {
        return f32_ ? matvec_typed<float>(x_obj) : matvec_typed<double>(x_obj);
    }

    // (G, d): the dense Gram matrix A^T A (cols x cols), column-equilibrated where
    // `equilibrate` (G = D A^T A D, d_j = 1 / ||a_j||, 1 for an empty column; else d = 1).
    py::tuple gram(bool equilibrate) const {
        return f32_ ? gram_typed<float>(equilibrate) : gram_typed<double>(equilibrate);
    }

    // A X (a new rows x k array); X (cols, k).
    py::array matmat(const py::object& x_obj) const {
        return f32_ ? matmat_typed<float>(x_obj) : matmat_typed<double>(x_obj);
    }

    // A^T Y (a new cols x k array); Y (rows, k).
    py::array rmatmat(const py::object& y_obj, index_t max_buffer_bytes) const {
        const std::size_t cap = buffer_bytes("CsrMatrix.rmatmat", max_buffer_bytes);
        return f32_ ? rmatmat_typed<float>(y_obj, cap) : rmatmat_typed<double>(y_obj, cap);
    }

    py::tuple cg(const py::object& inv, const py::object& x, const py::object& r,
                 const py::object& p, const py::object& q, const py::object& state,
                 double thresh, index_t maxiter, bool dilu) {
        return f32_ ? cg_typed<float>(inv, x, r, p, q, state, thresh, maxiter, dilu)
                    : cg_typed<double>(inv, x, r, p, q, state, thresh, maxiter, dilu);
    }

    // Threads the CG loop and its factor run on here (eagle::cg_threads: one on a small
    // matrix; kernel_threads() caps them).
    int loop_threads() const { return eagle::cg_threads(n_, nnz(), kernel_threads()); }

    // Factors the modified D-ILU preconditioner (eagle::dilu_factor) in `blocks` blocks
    // (None: loop_threads()) and keeps it: (0, -1) where it succeeded, else (code, row)
    // and no factor is kept.
    py::tuple dilu(double omega, double rel_pivot, const py::object& v_obj,
                   const py::object& blocks_obj) {
        ArgChecker chk("CsrMatrix.dilu", "the matrix's data");
        if (cols_ != n_) chk.fail_value("needs a square matrix, got " + std::to_string(n_) +
                                        " x " + std::to_string(cols_));
        if (!(omega >= 0 && omega <= 1)) chk.fail_value("omega must lie in [0, 1]");
        if (!(rel_pivot >= 0 && std::isfinite(rel_pivot)))
            chk.fail_value("rel_pivot must be finite and >= 0");
        py::array v;
        if (!v_obj.is_none()) v = chk.operand<double>(v_obj, "v", false, {n_}, "(n,)");
        const double* vp = v_obj.is_none() ? nullptr : rptr<double>(v);
        index_t blocks = loop_threads();
        if (!blocks_obj.is_none()) {
            if (!py::isinstance<py::int_>(blocks_obj) || py::isinstance<py::bool_>(blocks_obj))
                chk.fail_type("blocks must be an int or None, got " +
                              std::string(py::str(py::type::of(blocks_obj).attr("__name__"))));
            blocks = blocks_obj.cast<index_t>();
            if (blocks < 1) chk.fail_value("blocks must be >= 1, got " + std::to_string(blocks));
        }
        dilu_ready_ = false;
        dilu_blocks_ = 0;
        dinv_ = py::array();
        diag_ = py::array();
        z_ = py::array();
        const eagle::DiluStatus st = f32_ ? dilu_typed<float>(omega, rel_pivot, vp, blocks)
                                          : dilu_typed<double>(omega, rel_pivot, vp, blocks);
        return py::make_tuple(st.code, st.row);
    }

    bool has_dilu() const { return dilu_ready_; }

    // The kept factor's blocks (0 where there is none).
    index_t dilu_blocks() const { return dilu_blocks_; }

    // The loop's start (eagle::cg_start): p = M^-1 r and state = (r.r, r.p).
    void cg_start(const py::object& inv, const py::object& r, const py::object& p,
                  const py::object& state, bool dilu) {
        if (f32_)
            cg_start_typed<float>(inv, r, p, state, dilu);
        else
            cg_start_typed<double>(inv, r, p, state, dilu);
    }

    // Bytes the kept D-ILU factor holds (its pivots, diagonal positions and work vector).
    index_t dilu_nbytes() const {
        std::size_t waits = 0;
        for (const auto& w : plan_.fwd) waits += w.size();
        for (const auto& w : plan_.bwd) waits += w.size();
        return static_cast<index_t>(dinv_.nbytes() + diag_.nbytes() + z_.nbytes() +
                                    waits * sizeof(eagle::DiluWait));
    }

    // The diagonal (a new float64 array; 0 where a row stores none, summed duplicates).
    py::array diagonal() const {
        if (f32_) return i32_ ? diagonal_typed<float, std::int32_t>()
                              : diagonal_typed<float, std::int64_t>();
        return i32_ ? diagonal_typed<double, std::int32_t>()
                    : diagonal_typed<double, std::int64_t>();
    }

    // z = M^-1 r for the kept D-ILU factor (a new array).
    py::array dilu_solve(const py::object& r_obj) const {
        return f32_ ? dilu_solve_typed<float>(r_obj) : dilu_solve_typed<double>(r_obj);
    }

private:
    template <typename I>
    void init(const ArgChecker& chk, const py::object& indptr, const py::object& indices,
              const py::object& data) {
        if (cols_ < -1) chk.fail_value("cols must be >= 0 (or -1: square)");
        const Pattern<I> c = pattern<I>(chk, indptr, indices, cols_, "indices", "cols");
        n_ = c.n;
        cols_ = c.bound;
        indptr_ = owned<I>(c.indptr, indptr, copy_);
        indices_ = owned<I>(c.indices, indices, copy_);
        if (f32_)
            data_ = owned<float>(pattern_values<float>(chk, data, c.nnz(),
                                                       "indices and data must be 1-D of equal "
                                                       "length"), data, copy_);
        else
            data_ = owned<double>(pattern_values<double>(chk, data, c.nnz(),
                                                         "indices and data must be 1-D of "
                                                         "equal length"), data, copy_);
    }

    index_t nnz() const { return static_cast<index_t>(indices_.shape(0)); }

    template <typename T>
    eagle::DiluStatus dilu_typed(double omega, double rel_pivot, const double* v,
                                 index_t blocks) {
        py::array_t<T> dinv(n_);
        py::array diag = i32_ ? py::array(py::array_t<std::int32_t>(n_))
                              : py::array(py::array_t<std::int64_t>(n_));
        eagle::DiluStatus st{0, -1};
        const int threads = kernel_threads();
        eagle::DiluPlan plan;
        {
            py::gil_scoped_release nogil;
            T* dv = dinv.mutable_data();
            st = with_pattern([&](const auto* ip, const auto* ix) {
                using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
                return eagle::dilu_factor<T>(n_, ip, ix, rptr<T>(data_), omega, rel_pivot, v,
                                             blocks, threads, dv, wptr<I>(diag), plan);
            });
        }
        if (st.code == 0) {
            dinv_ = dinv;
            diag_ = diag;
            z_ = py::array_t<T>(n_);
            dilu_ready_ = true;
            dilu_blocks_ = plan.blocks;
            plan_ = std::move(plan);
        }
        return st;
    }

    template <typename T, typename I>
    py::array diagonal_typed() const {
        const index_t m = std::min(n_, cols_);
        py::array_t<double> out(m);
        double* o = out.mutable_data();
        const I* p = rptr<I>(indptr_);
        const I* c = rptr<I>(indices_);
        const T* v = rptr<T>(data_);
        for (index_t i = 0; i < m; ++i) {
            double d = 0;
            for (index_t e = p[i]; e < p[i + 1]; ++e)
                if (static_cast<index_t>(c[e]) == i) d += v[e];
            o[i] = d;
        }
        return out;
    }

    // f(indptr, indices) with the pattern's index type (int32 or int64).
    template <typename F>
    decltype(auto) with_pattern(F&& f) const {
        if (i32_) return f(rptr<std::int32_t>(indptr_), rptr<std::int32_t>(indices_));
        return f(rptr<std::int64_t>(indptr_), rptr<std::int64_t>(indices_));
    }

    // The CG loop's preconditioner arguments, checked (cg and cg_start): `inv` (n,) or
    // None, exclusive with `dilu`, which needs a factor; the matrix square.
    template <typename T>
    const T* cg_inv(ArgChecker& chk, const py::object& inv_obj, bool dilu) const {
        if (dilu && !has_dilu()) chk.fail_value("dilu=True needs a D-ILU factor: call dilu() "
                                                "first (and check it)");
        if (dilu && !inv_obj.is_none()) chk.fail_value("inv and dilu=True exclude each other");
        if (cols_ != n_) chk.fail_value("needs a square matrix, got " + std::to_string(n_) +
                                        " x " + std::to_string(cols_));
        if (inv_obj.is_none()) return nullptr;
        return rptr<T>(chk.operand<T>(inv_obj, "inv", false, {n_}, "(n,)"));
    }

    template <typename T, typename I>
    eagle::CgPreconditioner<T, I> preconditioner(const T* inv, bool dilu) {
        eagle::CgPreconditioner<T, I> pre;
        pre.inv = inv;
        if (dilu) {
            pre.dinv = rptr<T>(dinv_);
            pre.diag = rptr<I>(diag_);
            pre.plan = &plan_;
            pre.z = wptr<T>(z_);
        }
        return pre;
    }

    template <typename T>
    py::array dilu_solve_typed(const py::object& r_obj) const {
        ArgChecker chk("CsrMatrix.dilu_solve", "the matrix's data");
        if (!has_dilu()) chk.fail_value("no D-ILU factor: call dilu() first (and check it)");
        py::array r = chk.operand<T>(r_obj, "r", false, {n_}, "(n,)");
        py::array_t<T> z(n_);
        T* zp = z.mutable_data();
        const T* rp = rptr<T>(r);
        const int threads = loop_threads();
        py::gil_scoped_release nogil;
        with_pattern([&](const auto* ip, const auto* ix) {
            using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
            eagle::dilu_apply<T>(n_, ip, ix, rptr<T>(data_), rptr<T>(dinv_), rptr<I>(diag_),
                                 plan_, rp, zp, threads);
        });
        return z;
    }

    // The bound on rmatmat's private buffers (gram_kernels.hpp), checked.
    static std::size_t buffer_bytes(const char* fn, index_t max_buffer_bytes) {
        if (max_buffer_bytes < 0)
            ArgChecker(fn).fail_value("max_buffer_bytes must be >= 0, got " +
                                      std::to_string(max_buffer_bytes));
        return static_cast<std::size_t>(max_buffer_bytes);
    }

    template <typename T>
    py::tuple gram_typed(bool equilibrate) const {
        py::array_t<T> G({cols_, cols_});
        py::array_t<T> d(cols_);
        T* gp = G.mutable_data();
        T* dp = d.mutable_data();
        const T* v = rptr<T>(data_);
        const int nt = kernel_threads();
        {
            py::gil_scoped_release nogil;
            with_pattern([&](const auto* ip, const auto* ix) {
                eagle::csr_gram<T>(n_, cols_, ip, ix, v, equilibrate, gp, dp, nt);
            });
        }
        return py::make_tuple(G, d);
    }

    template <typename T>
    py::array matmat_typed(const py::object& x_obj) const {
        ArgChecker chk("CsrMatrix.matmat", "the matrix's data");
        const index_t k = chk.extent(x_obj, "X", 2, 1, "(cols, k)");
        py::array x = chk.operand<T>(x_obj, "X", false, {cols_, k}, "(cols, k)");
        py::array_t<T> y({n_, k});
        T* yp = y.mutable_data();
        const T* xp = rptr<T>(x);
        const T* v = rptr<T>(data_);
        const int nt = kernel_threads();
        py::gil_scoped_release nogil;
        with_pattern([&](const auto* ip, const auto* ix) {
            eagle::csr_matmat<T>(n_, cols_, ip, ix, v, k, xp, yp, nt);
        });
        return y;
    }

    template <typename T>
    py::array rmatmat_typed(const py::object& y_obj, std::size_t cap) const {
        ArgChecker chk("CsrMatrix.rmatmat", "the matrix's data");
        const index_t k = chk.extent(y_obj, "Y", 2, 1, "(rows, k)");
        py::array y = chk.operand<T>(y_obj, "Y", false, {n_, k}, "(rows, k)");
        py::array_t<T> w({cols_, k});
        T* wp = w.mutable_data();
        const T* yp = rptr<T>(y);
        const T* v = rptr<T>(data_);
        const int nt = kernel_threads();
        py::gil_scoped_release nogil;
        with_pattern([&](const auto* ip, const auto* ix) {
            eagle::csr_rmatmat<T>(n_, cols_, ip, ix, v, k, yp, wp, nt, cap);
        });
        return w;
    }

    template <typename T>
    py::array matvec_typed(const py::object& x_obj) const {
        ArgChecker chk("CsrMatrix.matvec", "the matrix's data");
        py::array x = chk.operand<T>(x_obj, "x", false, {cols_}, "(cols,)");
        py::array_t<T> y(n_);
        T* yp = y.mutable_data();
        const T* xp = rptr<T>(x);
        const T* d = rptr<T>(data_);
        const int threads = loop_threads();
        py::gil_scoped_release nogil;
        with_pattern([&](const auto* ip, const auto* ix) {
            eagle::csr_matvec<T>(n_, ip, ix, d, xp, yp, threads);
        });
        return y;
    }

    template <typename T>
    py::tuple cg_typed(const py::object& inv_obj, const py::object& x_obj,
                       const py::object& r_obj, const py::object& p_obj,
                       const py::object& q_obj, const py::object& state_obj, double thresh,
                       index_t maxiter, bool dilu) {
        ArgChecker chk("CsrMatrix.cg", "the matrix's data");
        const T* inv = cg_inv<T>(chk, inv_obj, dilu);
        const std::vector<index_t> vec{n_};
        py::array x = chk.operand<T>(x_obj, "x", true, vec, "(n,)");
        py::array r = chk.operand<T>(r_obj, "r", true, vec, "(n,)");
        py::array p = chk.operand<T>(p_obj, "p", true, vec, "(n,)");
        py::array q = chk.operand<T>(q_obj, "q", true, vec, "(n,)");
        py::array st = chk.operand<double>(state_obj, "state", true, {2}, "(2,)");
        chk.check_overlap();
        if (maxiter < 0) chk.fail_value("maxiter must be >= 0");
        if (!(thresh >= 0)) chk.fail_value("thresh must be >= 0");
        double* sp = wptr<double>(st);
        eagle::CgState s{sp[0], sp[1]};
        eagle::CgStatus status = eagle::kCgMaxiter;
        index_t its = 0;
        const int threads = loop_threads();
        {
            py::gil_scoped_release nogil;
            its = with_pattern([&](const auto* ip, const auto* ix) {
                using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
                return eagle::cg_csr<T>(n_, ip, ix, rptr<T>(data_), preconditioner<T, I>(inv, dilu),
                                        wptr<T>(x), wptr<T>(r), wptr<T>(p), wptr<T>(q), s,
                                        thresh, maxiter, status, threads);
            });
        }
        sp[0] = s.rr;
        sp[1] = s.rho;
        return py::make_tuple(its, static_cast<int>(status));
    }

    template <typename T>
    void cg_start_typed(const py::object& inv_obj, const py::object& r_obj,
                        const py::object& p_obj, const py::object& state_obj, bool dilu) {
        ArgChecker chk("CsrMatrix.cg_start", "the matrix's data");
        const T* inv = cg_inv<T>(chk, inv_obj, dilu);
        const std::vector<index_t> vec{n_};
        py::array r = chk.operand<T>(r_obj, "r", false, vec, "(n,)");
        py::array p = chk.operand<T>(p_obj, "p", true, vec, "(n,)");
        py::array st = chk.operand<double>(state_obj, "state", true, {2}, "(2,)");
        chk.check_overlap();
        eagle::CgState s{0.0, 0.0};
        const int threads = loop_threads();
        {
            py::gil_scoped_release nogil;
            with_pattern([&](const auto* ip, const auto* ix) {
                using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
                eagle::cg_start<T>(n_, ip, ix, rptr<T>(data_), preconditioner<T, I>(inv, dilu),
                                   rptr<T>(r), wptr<T>(p), s, threads);
            });
        }
        double* sp = wptr<double>(st);
        sp[0] = s.rr;
        sp[1] = s.rho;
    }

    template <typename T>
    py::array normal_product_typed(const py::object& x_obj, const py::object& q_obj,
                                   const py::object& w_obj) const {
        ArgChecker chk("CsrMatrix.normal_product", "the matrix's data");
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
        with_pattern([&](const auto* ip, const auto* ix) {
            eagle::csr_normal_product<T>(n_, cols_, ip, ix, d, k, xp, qp, wp, qqp);
        });
        return qq;
    }

    py::array indptr_, indices_, data_;
    py::array dinv_, diag_, z_;  // the D-ILU factor, where dilu() made one
    eagle::DiluPlan plan_;       // its order's blocks and waits
    index_t n_ = 0, cols_ = -1, dilu_blocks_ = 0;
    bool i32_ = false, f32_ = false, copy_ = true, dilu_ready_ = false;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "Compiled kernels of eagle_sparse (see eagle_sparse.backends.numpy_backend for "
              "the kernel interface; eagle_sparse.backends.native wraps this module).";
    m.attr("__version__") = EAGLE_VERSION;
    load_scipy_blas();
#if defined(__unix__) || defined(__APPLE__)
    pthread_atfork(nullptr, nullptr, &after_fork_in_child);
#endif

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
    m.def("csr_duplicates", &csr_duplicates, py::arg("indptr"), py::arg("indices"),
          py::arg("bound"),
          "Whether a compressed pattern (indptr, indices; minor indices in [0, bound)) "
          "repeats an index within a major slice: scipy.sparse's duplicates. The pattern is "
          "checked (ValueError where it is malformed); O(nnz), no copy of the matrix.");
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
                          "cols is given), validated once, for the compiled CG loop, "
                          "CGLS's fused products and the normal equations' Gram matrix "
                          "and products.")
        .def(py::init<const py::object&, const py::object&, const py::object&, index_t,
                      const py::object&, bool>(),
             py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("cols") = -1,
             py::arg("dtype") = py::none(), py::arg("copy") = true,
             "Validates the pattern (ValueError where an index lies outside the matrix or "
             "indptr is not a non-decreasing run from 0 to len(indices)) and keeps private "
             "copies of the arrays (copy=False: references to them where they already have "
             "the working dtypes; the caller must then not change them while this object "
             "lives); dtype: the working dtype (float32 or float64; default data's, which "
             "must then be one of them), data being converted to it.")
        .def_property_readonly("n", &CsrMatrix::n, "The rows.")
        .def_property_readonly("shape", &CsrMatrix::shape)
        .def_property_readonly("dtype", &CsrMatrix::dtype)
        .def("matvec", &CsrMatrix::matvec, py::arg("x"), "A x (a new array); x (cols,).")
        .def("gram", &CsrMatrix::gram, py::arg("equilibrate") = true,
             "(G, d): the dense Gram matrix A^T A (cols, cols), formed from the rows "
             "(duplicates summed); equilibrate=True: D A^T A D with d_j = 1 / ||a_j|| (1 "
             "for an empty column), else d = 1.  OpenMP over bands of G's rows, each summed "
             "over A's rows in order by one thread: the same bits at any thread count, no "
             "memory beyond G.")
        .def("matmat", &CsrMatrix::matmat, py::arg("X"),
             "A X (a new array); X (cols, k).  OpenMP over rows (bits independent of the "
             "threads).")
        .def("rmatmat", &CsrMatrix::rmatmat, py::arg("Y"),
             py::arg("max_buffer_bytes") = index_t(256) << 20,
             "A^T Y (a new array); Y (rows, k).  OpenMP over fixed blocks of rows, private "
             "sums added in block order (fewer threads where their buffers would exceed "
             "max_buffer_bytes).")
        .def("normal_product", &CsrMatrix::normal_product, py::arg("x"), py::arg("q"),
             py::arg("w"),
             "q = A x and w = A^T q in one pass over A, in place; x (cols, k), q (rows, k), "
             "w (cols, k); returns the float64 column sums of q * q (k,).")
        .def("cg", &CsrMatrix::cg, py::arg("inv"), py::arg("x"), py::arg("r"), py::arg("p"),
             py::arg("q"), py::arg("state"), py::arg("thresh"), py::arg("maxiter"),
             py::arg("dilu") = false,
             "(iterations, status): at most maxiter CG iterations in place on x, r, p "
             "(q scratch; state float64 [r.r, r.z]; inv the diagonal preconditioner or "
             "None; dilu=True: the D-ILU factor dilu() made instead); status 0 converged "
             "(||r|| < thresh), 1 maxiter, 2 breakdown.")
        .def("cg_start", &CsrMatrix::cg_start, py::arg("inv"), py::arg("r"), py::arg("p"),
             py::arg("state"), py::arg("dilu") = false,
             "The loop's start, in place: p = M^-1 r (r, inv * r, or the D-ILU factor's "
             "solve where dilu=True) and state = [r.r, r.p], summed in the loop's fixed "
             "chunk order (the same bits on any thread count).")
        .def("dilu", &CsrMatrix::dilu, py::arg("omega"), py::arg("rel_pivot"),
             py::arg("v") = py::none(), py::arg("blocks") = py::none(),
             "Factors and keeps M = (D + L) D^-1 (D + L^T), L the strictly lower triangle, "
             "d_i = a_ii - sum_j<i a_ij/d_j (a_ij (1 - omega) + omega s_j / v_i), s_j = "
             "sum_k>j a_kj v_k, v (n,) positive, default ones (omega = 1: modified "
             "incomplete Cholesky, M v = A v). "
             "Returns (0, -1), or (1, i): pivot i not above rel_pivot a_ii, or (2, i): row "
             "i has no diagonal entry or is not sorted, or (3, i): v_i not positive and "
             "finite; then no factor is kept.  blocks: the blocks of its twisted order "
             "(contiguous rows cut at 4096-row chunks, at most one per chunk and at most "
             "4; the even ones eliminated forwards, the odd ones backwards, nothing "
             "dropped; each block's sweeps run on their own thread); None: the threads "
             "the loop runs on here (1 on a small matrix or with one thread).  With more "
             "than one block A must be symmetric (both triangles are read).")
        .def_property_readonly("has_dilu", &CsrMatrix::has_dilu)
        .def_property_readonly("dilu_blocks", &CsrMatrix::dilu_blocks,
                               "The kept D-ILU factor's blocks (0 where there is none).")
        .def_property_readonly("threads", &CsrMatrix::loop_threads,
                               "Threads the CG loop runs on here now (1 below a size "
                               "threshold; the thread limits cap them).")
        .def("diagonal", &CsrMatrix::diagonal, "The diagonal (a new float64 array).")
        .def_property_readonly("dilu_nbytes", &CsrMatrix::dilu_nbytes,
                               "Bytes of the kept D-ILU factor and its work vector.")
        .def("dilu_solve", &CsrMatrix::dilu_solve, py::arg("r"),
             "M^-1 r for the kept D-ILU factor (a new array); r (n,).");
    m.def(
        "dilu_blocks",
        [](index_t n, index_t nnz) {
            if (n < 0 || nnz < 0) throw py::value_error("dilu_blocks: n and nnz must be >= 0");
            return eagle::dilu_blocks(n, eagle::cg_threads(n, nnz, kernel_threads()));
        },
        py::arg("n"), py::arg("nnz"),
        "The blocks CsrMatrix.dilu(blocks=None) makes on an n x n matrix with nnz stored "
        "entries here now (from the threads the CG loop runs on: 1 below its size "
        "threshold, at most 4).");
    m.def("srht_dense", &srht_dense, py::arg("A"), py::arg("signs"), py::arg("idx"),
          py::arg("m2"), py::arg("scale"),
          "S A = scale R H D A for dense A (m, n): D = diag(signs) (m,), H the m2-point "
          "Walsh-Hadamard transform (m2 a power of two >= m), R the rows idx (s,); returns "
          "(s, n), C order.  Chunks of rows transformed in cache, only the s rows kept "
          "(no m2-row buffer).  OpenMP over column blocks or chunks.");
    m.def("srht_csc", &srht_csc, py::arg("indptr"), py::arg("indices"), py::arg("data"),
          py::arg("m"), py::arg("signs"), py::arg("idx"), py::arg("m2"), py::arg("scale"),
          "srht_dense for CSC A (m, n) with row indices sorted within each column, int32 or "
          "int64; A is never densified beyond one chunk per thread.");
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

    m.def("kernel_pass", &kernel_pass, py::arg("X"), py::arg("Z"), py::arg("kind"),
          py::arg("gamma"), py::arg("coef0"), py::arg("degree"), py::arg("mode"),
          py::arg("V") = py::none(), py::arg("w") = py::none(), py::arg("Y") = py::none(),
          py::arg("single") = false,
          "Fused kernel pass (Falkon): K^T diag(w) K V ('gram'), K^T diag(w) Y ('rhs') or "
          "K V ('apply') for K = kernel(X, Z), without forming K.");
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
