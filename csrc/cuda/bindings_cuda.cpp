// pybind11 bindings of the CUDA kernels: module eagle_sparse._cuda.
//
// Arrays arrive as raw device pointers (CuPy's ``a.data.ptr``) and a stream handle
// (``cupy.cuda.get_current_stream().ptr``), with the dtype named once per call
// ("float32" or "float64"); eagle_sparse/backends/cupy_backend.py does the checks
// (contiguity, dtype, device) before calling in.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "eagle_cuda.hpp"

namespace py = pybind11;
using eagle::cuda::index_t;
using eagle::cuda::StepShape;

namespace {

template <typename T>
T* ptr(std::uintptr_t p) {
    return reinterpret_cast<T*>(p);
}

cudaStream_t stream_of(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

bool is_f64(const std::string& dtype) {
    if (dtype == "float64") return true;
    if (dtype == "float32") return false;
    throw std::invalid_argument("dtype must be 'float32' or 'float64', got '" + dtype + "'");
}

// Calls fn<float> or fn<double> with the GIL released.
template <typename F>
auto dispatch(const std::string& dtype, F&& fn) {
    const bool f64 = is_f64(dtype);
    py::gil_scoped_release release;
    return f64 ? fn(double{}) : fn(float{});
}

}  // namespace

PYBIND11_MODULE(_cuda, m) {
    m.doc() = "CUDA kernels of eagle_sparse (raw device pointers and streams)";

    m.def("device_count", &eagle::cuda::device_count, "CUDA devices visible (0 without a driver)");
    m.def("build_info", &eagle::cuda::build_info, "CUDA runtime / cuBLAS / architectures built");

    m.def(
        "eagle_step",
        [](const std::string& dtype, index_t d, index_t n, index_t p, index_t q, std::uintptr_t A,
           std::uintptr_t B, std::uintptr_t C, std::uintptr_t D, std::uintptr_t A_out,
           std::uintptr_t B_out, std::uintptr_t G, std::uintptr_t W, std::uintptr_t P,
           double eta_rho, double gamma_rho, double scale, std::uintptr_t stream, bool tf32,
           double zeta_rho2) {
            const StepShape s{d, n, p, q};
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::eagle_step<T>(s, ptr<T>(A), ptr<T>(B), ptr<T>(C), ptr<T>(D),
                                           ptr<T>(A_out), ptr<T>(B_out), ptr<T>(G), ptr<T>(W),
                                           ptr<T>(P), eta_rho, gamma_rho, scale,
                                           stream_of(stream), tf32, zeta_rho2);
                return 0;
            });
        },
        py::arg("dtype"), py::arg("d"), py::arg("n"), py::arg("p"), py::arg("q"), py::arg("A"),
        py::arg("B"), py::arg("C"), py::arg("D"), py::arg("A_out"), py::arg("B_out"),
        py::arg("G"), py::arg("W"), py::arg("P"), py::arg("eta_rho"), py::arg("gamma_rho"),
        py::arg("scale"), py::arg("stream"), py::arg("tf32") = false,
        py::arg("zeta_rho2") = 0.0);

    m.def(
        "eagle_step_batched",
        [](const std::string& dtype, index_t batch, index_t d, index_t n, index_t p, index_t q,
           std::uintptr_t A, std::uintptr_t B, std::uintptr_t C, std::uintptr_t D,
           std::uintptr_t A_out, std::uintptr_t B_out, std::uintptr_t G, std::uintptr_t W,
           std::uintptr_t P, std::uintptr_t eta_rho, std::uintptr_t gamma_rho,
           std::uintptr_t scale, std::uintptr_t active, std::uintptr_t stream, bool tf32,
           std::uintptr_t zeta_rho2) {
            const StepShape s{d, n, p, q};
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::eagle_step_batched<T>(
                    batch, s, ptr<T>(A), ptr<T>(B), ptr<T>(C), ptr<T>(D), ptr<T>(A_out),
                    ptr<T>(B_out), ptr<T>(G), ptr<T>(W), ptr<T>(P), ptr<const double>(eta_rho),
                    ptr<const double>(gamma_rho), ptr<const double>(scale),
                    ptr<const std::uint8_t>(active), stream_of(stream), tf32,
                    ptr<const double>(zeta_rho2));
                return 0;
            });
        },
        py::arg("dtype"), py::arg("batch"), py::arg("d"), py::arg("n"), py::arg("p"),
        py::arg("q"), py::arg("A"), py::arg("B"), py::arg("C"), py::arg("D"), py::arg("A_out"),
        py::arg("B_out"), py::arg("G"), py::arg("W"), py::arg("P"), py::arg("eta_rho"),
        py::arg("gamma_rho"), py::arg("scale"), py::arg("active"), py::arg("stream"),
        py::arg("tf32") = false, py::arg("zeta_rho2") = 0);

    m.def(
        "spectral_norm_estimate",
        [](const std::string& dtype, index_t d, index_t n, std::uintptr_t A, int maxiter,
           double rtol, std::uint64_t seed, std::uintptr_t stream) {
            int its = 0;
            const double sigma = dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                return eagle::cuda::spectral_norm_estimate<T>(d, n, ptr<const T>(A), maxiter, rtol,
                                                              seed, &its, stream_of(stream));
            });
            return std::make_pair(sigma, its);
        },
        py::arg("dtype"), py::arg("d"), py::arg("n"), py::arg("A"), py::arg("maxiter"),
        py::arg("rtol"), py::arg("seed"), py::arg("stream"));

    m.def(
        "spectral_norm_estimate_batched",
        [](const std::string& dtype, index_t batch, index_t d, index_t n, std::uintptr_t A,
           int maxiter, std::uint64_t seed, std::uintptr_t sigma, std::uintptr_t stream) {
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::spectral_norm_estimate_batched<T>(batch, d, n, ptr<const T>(A),
                                                               maxiter, seed, ptr<double>(sigma),
                                                               stream_of(stream));
                return 0;
            });
        },
        py::arg("dtype"), py::arg("batch"), py::arg("d"), py::arg("n"), py::arg("A"),
        py::arg("maxiter"), py::arg("seed"), py::arg("sigma"), py::arg("stream"));

    m.def(
        "sparse_sign_dense",
        [](const std::string& dtype, index_t m_, index_t n, index_t s, int k, std::uintptr_t rows,
           std::uintptr_t signs, double scale, std::uintptr_t A, std::uintptr_t out,
           std::uintptr_t stream) {
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::sparse_sign_dense<T>(m_, n, s, k, ptr<const std::int32_t>(rows),
                                                  ptr<const std::int8_t>(signs), scale,
                                                  ptr<const T>(A), ptr<T>(out), stream_of(stream));
                return 0;
            });
        },
        py::arg("dtype"), py::arg("m"), py::arg("n"), py::arg("s"), py::arg("k"), py::arg("rows"),
        py::arg("signs"), py::arg("scale"), py::arg("A"), py::arg("out"), py::arg("stream"));

    m.def(
        "sparse_sign_csr",
        [](const std::string& dtype, index_t m_, index_t n, index_t s, int k,
           std::uintptr_t indptr, std::uintptr_t indices, std::uintptr_t data,
           std::uintptr_t rows, std::uintptr_t signs, double scale, std::uintptr_t out,
           std::uintptr_t stream) {
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::sparse_sign_csr<T>(
                    m_, n, s, k, ptr<const std::int64_t>(indptr), ptr<const std::int32_t>(indices),
                    ptr<const T>(data), ptr<const std::int32_t>(rows),
                    ptr<const std::int8_t>(signs), scale, ptr<T>(out), stream_of(stream));
                return 0;
            });
        },
        py::arg("dtype"), py::arg("m"), py::arg("n"), py::arg("s"), py::arg("k"),
        py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("rows"), py::arg("signs"),
        py::arg("scale"), py::arg("out"), py::arg("stream"));

    m.def(
        "gaussian_sketch",
        [](const std::string& dtype, index_t m_, index_t n, index_t s, std::uint64_t seed,
           double scale, std::uintptr_t A, std::uintptr_t omega, std::uintptr_t out,
           std::uintptr_t stream, bool tf32) {
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::gaussian_sketch<T>(m_, n, s, seed, scale, ptr<const T>(A),
                                                ptr<T>(omega), ptr<T>(out), stream_of(stream),
                                                tf32);
                return 0;
            });
        },
        py::arg("dtype"), py::arg("m"), py::arg("n"), py::arg("s"), py::arg("seed"),
        py::arg("scale"), py::arg("A"), py::arg("omega"), py::arg("out"), py::arg("stream"),
        py::arg("tf32") = false);

    m.def(
        "sample_rows",
        [](const std::string& dtype, index_t n, index_t r, std::uintptr_t idx, double scale,
           std::uintptr_t A, std::uintptr_t out, std::uintptr_t stream) {
            dispatch(dtype, [&](auto tag) {
                using T = decltype(tag);
                eagle::cuda::sample_rows<T>(n, r, ptr<const std::int64_t>(idx), scale,
                                            ptr<const T>(A), ptr<T>(out), stream_of(stream));
                return 0;
            });
        },
        py::arg("dtype"), py::arg("n"), py::arg("r"), py::arg("idx"), py::arg("scale"),
        py::arg("A"), py::arg("out"), py::arg("stream"));
}
