// The OpenMP helpers the drivers share (internal to csrc/; not for the per-ISA loop
// kernels, whose translation units must not share inline functions: small_kernels_impl.hpp).
#pragma once

#include <cstddef>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace eagle::detail {

// Threads for a driver: `requested` where positive (the bindings pass kernel_threads()),
// else the OpenMP default.
inline int default_threads(int requested) {
    if (requested > 0) return requested;
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

inline int thread_id() {
#if defined(_OPENMP)
    return omp_get_thread_num();
#else
    return 0;
#endif
}

// Threads of the current team (1 outside a parallel region).
inline int team_size() {
#if defined(_OPENMP)
    return omp_get_num_threads();
#else
    return 1;
#endif
}

// Elements of one thread's scratch block, padded to whole cache lines plus one, so that
// threads never share a line.
template <typename T>
std::ptrdiff_t padded(std::ptrdiff_t elems) {
    const std::ptrdiff_t per_line = 64 / static_cast<std::ptrdiff_t>(sizeof(T));
    return (elems + per_line - 1) / per_line * per_line + per_line;
}

}  // namespace eagle::detail
