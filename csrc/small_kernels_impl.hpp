// Loop kernels for one small EAGLE problem -- NOT an ordinary header.
//
// Each small_kernels_<isa>.cpp includes this file inside an anonymous namespace after
// defining EAGLE_VEC_BYTES (the native SIMD width of its -m flags), so every variant gets
// its own internal-linkage copy.  Nothing here may call an inline function or template
// from another header (std::min, std::sqrt, ...): such functions are shared between
// translation units by the linker, and the copy compiled with AVX-512 could then be run
// by the baseline variant on a CPU without it.  Hence the __builtin_* calls (EAGLE_MEMCPY,
// EAGLE_SQRT, ...: see the portable mode below).
//
// All products are register-blocked outer products: an accumulator block of kRows rows
// times kVecs SIMD vectors stays in registers while the inner dimension streams through
// L1, the row-major operand is read one contiguous row at a time, and the other operand
// is broadcast one scalar at a time.  Nothing relies on reassociating a floating-point
// sum except the explicit multi-accumulator dot products.

#ifndef EAGLE_VEC_BYTES
#error "define EAGLE_VEC_BYTES before including small_kernels_impl.hpp"
#endif

// Portable mode (MSVC, which has neither GCC's vector extensions nor its __builtin_*
// functions, or -DEAGLE_PORTABLE_KERNELS=ON in CMake): the "vectors" are scalars (L = 1)
// and the builtins their <cstring>/<cmath> equivalents; every kernel keeps its code path.
// Only the generic variant is built then, so the ODR caution above does not apply.
#if !defined(EAGLE_PORTABLE_KERNELS) && defined(_MSC_VER) && !defined(__clang__)
#define EAGLE_PORTABLE_KERNELS 1
#endif
#if defined(EAGLE_PORTABLE_KERNELS)
#define EAGLE_MEMCPY std::memcpy
#define EAGLE_SQRT std::sqrt
#define EAGLE_HUGE_VAL HUGE_VAL
#else
#define EAGLE_MEMCPY __builtin_memcpy
#define EAGLE_SQRT __builtin_sqrt
#define EAGLE_HUGE_VAL __builtin_huge_val()
#endif

using eagle::index_t;

#if defined(EAGLE_PORTABLE_KERNELS)
// One lane with the arithmetic and subscript of a vector-extension type.
template <typename T>
struct Lane1 {
    T x;
    T& operator[](int) { return x; }
    T operator[](int) const { return x; }
    Lane1& operator+=(Lane1 o) { x += o.x; return *this; }
    Lane1& operator-=(Lane1 o) { x -= o.x; return *this; }
    Lane1& operator*=(Lane1 o) { x *= o.x; return *this; }
};
template <typename T> inline Lane1<T> operator+(Lane1<T> a, Lane1<T> b) { return {a.x + b.x}; }
template <typename T> inline Lane1<T> operator-(Lane1<T> a, Lane1<T> b) { return {a.x - b.x}; }
template <typename T> inline Lane1<T> operator*(Lane1<T> a, Lane1<T> b) { return {a.x * b.x}; }
template <typename T> inline Lane1<T> operator+(Lane1<T> a, T b) { return {a.x + b}; }
template <typename T> inline Lane1<T> operator-(Lane1<T> a, T b) { return {a.x - b}; }
template <typename T> inline Lane1<T> operator*(Lane1<T> a, T b) { return {a.x * b}; }
template <typename T> inline Lane1<T> operator*(T a, Lane1<T> b) { return {a * b.x}; }
template <typename T> inline Lane1<T> operator+(T a, Lane1<T> b) { return {a + b.x}; }
template <typename T> inline Lane1<T> operator-(T a, Lane1<T> b) { return {a - b.x}; }
template <typename T>
struct Simd {
    typedef Lane1<T> vec;
    static constexpr int L = 1;
};
#else
template <typename T>
struct Simd {
    typedef T vec __attribute__((vector_size(EAGLE_VEC_BYTES)));
    static constexpr int L = EAGLE_VEC_BYTES / static_cast<int>(sizeof(T));
};
#endif
template <typename T>
using vec_t = typename Simd<T>::vec;

#ifndef EAGLE_KERNEL_ROWS
#define EAGLE_KERNEL_ROWS 4
#endif
// Accumulator block: kRows x kVecs SIMD registers, sized so that the block plus the
// operand registers fit the register file (16 vector registers up to AVX2, 32 with
// AVX-512) and there are enough independent FMA chains to cover the FMA latency.
constexpr int kRows = EAGLE_KERNEL_ROWS;
constexpr int kVecs = 2;

inline index_t imin(index_t a, index_t b) { return a < b ? a : b; }

template <typename T>
inline vec_t<T> loadu(const T* p) {
    vec_t<T> v;
    EAGLE_MEMCPY(&v, p, sizeof v);
    return v;
}
template <typename T>
inline void storeu(T* p, vec_t<T> v) {
    EAGLE_MEMCPY(p, &v, sizeof v);
}
// __builtin_shufflevector: GCC >= 12 and Clang.  Older compilers get the same results
// through memory (slower: stores followed by narrower reloads stall store forwarding).
#ifndef EAGLE_HAVE_SHUFFLEVECTOR
#if defined(EAGLE_PORTABLE_KERNELS)
#define EAGLE_HAVE_SHUFFLEVECTOR 0
#elif defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define EAGLE_HAVE_SHUFFLEVECTOR 1
#else
#define EAGLE_HAVE_SHUFFLEVECTOR 0
#endif
#endif

template <int... I>
struct IndexSeq {};
template <int N, int... I>
struct MakeIndexSeq : MakeIndexSeq<N - 1, N - 1, I...> {};
template <int... I>
struct MakeIndexSeq<0, I...> {
    using type = IndexSeq<I...>;
};

#if defined(EAGLE_PORTABLE_KERNELS)
template <typename T>
inline T hsum(vec_t<T> v) {
    return v.x;
}
#else
// Horizontal sum by halving (log2 L vector adds rather than L scalar ones).
template <typename T, int BYTES>
struct HalvingSum {
    typedef T full __attribute__((vector_size(BYTES)));
    typedef T half __attribute__((vector_size(BYTES / 2)));
    static constexpr int H = BYTES / static_cast<int>(2 * sizeof(T));
#if EAGLE_HAVE_SHUFFLEVECTOR
    template <int... I>
    static inline T split(full v, IndexSeq<I...>) {
        return HalvingSum<T, BYTES / 2>::run(__builtin_shufflevector(v, v, I...) +
                                             __builtin_shufflevector(v, v, (I + H)...));
    }
    static inline T run(full v) { return split(v, typename MakeIndexSeq<H>::type{}); }
#else
    static inline T run(full v) {
        half lo, hi;
        EAGLE_MEMCPY(&lo, &v, sizeof lo);
        EAGLE_MEMCPY(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
        return HalvingSum<T, BYTES / 2>::run(lo + hi);
    }
#endif
};
template <typename T>
struct HalvingSum<T, static_cast<int>(2 * sizeof(T))> {
    typedef T full __attribute__((vector_size(2 * sizeof(T))));
    static inline T run(full v) { return v[0] + v[1]; }
};
template <typename T>
inline T hsum(vec_t<T> v) {
    return HalvingSum<T, EAGLE_VEC_BYTES>::run(v);
}
#endif

// out[r, 0:U*L] = alpha * sum_k x[r*xr + k*xk] * y[k*yk + 0:U*L] (+ out if accumulate),
// for r < R.  x and y are the two operands of a small product; xr, xk are x's strides
// along the output row and the inner dimension.
template <typename T, int R, int U>
inline void micro_block(index_t K, const T* __restrict x, index_t xr, index_t xk,
                        const T* __restrict y, index_t yk, T* __restrict out, index_t ldo,
                        T alpha, bool accumulate) {
    constexpr int L = Simd<T>::L;
    if constexpr (R == 1) {
        // One output row has only U accumulator chains, too few to hide the FMA latency
        // over a long K: interleave kSplit partial sums over k and add them at the end.
        constexpr int kSplit = 4;
        vec_t<T> part[kSplit][U];
        for (int s = 0; s < kSplit; ++s)
            for (int u = 0; u < U; ++u) part[s][u] = vec_t<T>{};
        index_t k = 0;
        for (; k + kSplit <= K; k += kSplit) {
            for (int s = 0; s < kSplit; ++s) {
                const T xs = x[(k + s) * xk];
                for (int u = 0; u < U; ++u) part[s][u] += xs * loadu(y + (k + s) * yk + u * L);
            }
        }
        for (; k < K; ++k) {
            const T xs = x[k * xk];
            for (int u = 0; u < U; ++u) part[0][u] += xs * loadu(y + k * yk + u * L);
        }
        for (int u = 0; u < U; ++u) {
            T* o = out + u * L;
            vec_t<T> res = ((part[0][u] + part[1][u]) + (part[2][u] + part[3][u])) * alpha;
            if (accumulate) res += loadu(o);
            storeu(o, res);
        }
        return;
    }
    vec_t<T> acc[R][U];
    for (int r = 0; r < R; ++r)
        for (int u = 0; u < U; ++u) acc[r][u] = vec_t<T>{};
    for (index_t k = 0; k < K; ++k) {
        const T* yrow = y + k * yk;
        vec_t<T> yv[U];
        for (int u = 0; u < U; ++u) yv[u] = loadu(yrow + u * L);
        const T* xcol = x + k * xk;
        for (int r = 0; r < R; ++r) {
            const T xs = xcol[r * xr];
            for (int u = 0; u < U; ++u) acc[r][u] += xs * yv[u];
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int u = 0; u < U; ++u) {
            T* o = out + r * ldo + u * L;
            vec_t<T> res = acc[r][u] * alpha;
            if (accumulate) res += loadu(o);
            storeu(o, res);
        }
    }
}

// The same for the last ncols < L columns, in scalar code.
template <typename T, int R>
inline void micro_tail(index_t K, const T* __restrict x, index_t xr, index_t xk,
                       const T* __restrict y, index_t yk, int ncols, T* __restrict out,
                       index_t ldo, T alpha, bool accumulate) {
    T acc[R][Simd<T>::L];
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < ncols; ++j) acc[r][j] = T(0);
    for (index_t k = 0; k < K; ++k) {
        const T* yrow = y + k * yk;
        const T* xcol = x + k * xk;
        for (int r = 0; r < R; ++r) {
            const T xs = xcol[r * xr];
            for (int j = 0; j < ncols; ++j) acc[r][j] += xs * yrow[j];
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j < ncols; ++j) {
            T* o = out + r * ldo + j;
            *o = accumulate ? *o + alpha * acc[r][j] : alpha * acc[r][j];
        }
    }
}

// R output rows starting at row i0, all N columns.  With UPPER, column blocks lying
// entirely left of the diagonal are skipped (their entries are filled by symmetry).
template <typename T, int R, bool UPPER>
inline void row_block(index_t i0, index_t N, index_t K, const T* x, index_t xr, index_t xk,
                      const T* y, index_t yk, T* out, index_t ldo, T alpha, bool accumulate) {
    constexpr int L = Simd<T>::L;
    constexpr int NB = kVecs * L;
    index_t j0 = 0;
    for (; j0 + NB <= N; j0 += NB) {
        if (UPPER && j0 + NB <= i0) continue;
        micro_block<T, R, kVecs>(K, x, xr, xk, y + j0, yk, out + j0, ldo, alpha, accumulate);
    }
    for (; j0 + L <= N; j0 += L) {
        if (UPPER && j0 + L <= i0) continue;
        micro_block<T, R, 1>(K, x, xr, xk, y + j0, yk, out + j0, ldo, alpha, accumulate);
    }
    if (j0 < N) {
        micro_tail<T, R>(K, x, xr, xk, y + j0, yk, static_cast<int>(N - j0), out + j0, ldo,
                         alpha, accumulate);
    }
}

// The last rest < kRows rows, with a block of exactly that many rows.
template <typename T, int R, bool UPPER>
inline void rest_rows(index_t rest, index_t i0, index_t N, index_t K, const T* x, index_t xr,
                      index_t xk, const T* y, index_t yk, T* out, index_t ldo, T alpha,
                      bool accumulate) {
    if constexpr (R > 0) {
        if (rest == R) {
            row_block<T, R, UPPER>(i0, N, K, x, xr, xk, y, yk, out, ldo, alpha, accumulate);
        } else {
            rest_rows<T, R - 1, UPPER>(rest, i0, N, K, x, xr, xk, y, yk, out, ldo, alpha,
                                       accumulate);
        }
    }
}

// out (M x N, leading dimension ldo) = alpha * X Y (+ out if accumulate), where
// X(i, k) = x[i*xr + k*xk] and row k of Y starts at y + k*yk.  K == 0 gives zeros.
template <typename T, bool UPPER = false>
void small_gemm(index_t M, index_t N, index_t K, const T* x, index_t xr, index_t xk, const T* y,
                index_t yk, T* out, index_t ldo, T alpha, bool accumulate) {
    index_t i0 = 0;
    for (; i0 + kRows <= M; i0 += kRows) {
        row_block<T, kRows, UPPER>(i0, N, K, x + i0 * xr, xr, xk, y, yk, out + i0 * ldo, ldo,
                                   alpha, accumulate);
    }
    if (i0 < M) {
        rest_rows<T, kRows - 1, UPPER>(M - i0, i0, N, K, x + i0 * xr, xr, xk, y, yk,
                                       out + i0 * ldo, ldo, alpha, accumulate);
    }
}

// Transposing reduction: v[0..L) become one vector whose lane r is the sum of the lanes
// of v[r].  Level H adds lane blocks of width H of vector pairs, interleaving them, so
// the L - 1 pair combinations cost two shuffles and an add each (instead of a log2(L)
// deep horizontal sum per vector).
template <int H, int L>
constexpr int lo_lane(int j) {
    return (j % (2 * H)) < H ? j / (2 * H) * 2 * H + j % (2 * H)
                             : L + j / (2 * H) * 2 * H + j % (2 * H) - H;
}
template <int H, int L>
constexpr int hi_lane(int j) {
    return (j % (2 * H)) < H ? j / (2 * H) * 2 * H + H + j % (2 * H)
                             : L + j / (2 * H) * 2 * H + j % (2 * H);
}
template <typename T, int H, int... I>
inline vec_t<T> combine_pair(vec_t<T> a, vec_t<T> b, IndexSeq<I...>) {
#if EAGLE_HAVE_SHUFFLEVECTOR && !defined(EAGLE_PORTABLE_KERNELS)
    constexpr int L = Simd<T>::L;
    return __builtin_shufflevector(a, b, lo_lane<H, L>(I)...) +
           __builtin_shufflevector(a, b, hi_lane<H, L>(I)...);
#else
    return a + b;  // not reached: transpose_sum reduces lane by lane instead
#endif
}
template <typename T, int H = 1>
inline vec_t<T> transpose_sum(vec_t<T>* v) {
    constexpr int L = Simd<T>::L;
#if !EAGLE_HAVE_SHUFFLEVECTOR && !defined(EAGLE_PORTABLE_KERNELS)
    if constexpr (H == 1) {
        vec_t<T> sums;
        for (int r = 0; r < L; ++r) sums[r] = hsum<T>(v[r]);
        return sums;
    }
#endif
    if constexpr (H < L) {
        for (int m = 0; m < L / H / 2; ++m)
            v[m] = combine_pair<T, H>(v[2 * m], v[2 * m + 1], typename MakeIndexSeq<L>::type{});
        return transpose_sum<T, 2 * H>(v);
    } else {
        return v[0];
    }
}

// out[k*ldo + j] = alpha * <X row k, Y row j> (+ out if accumulate) for k < M, j < Q,
// rows of length N.  Used when the other dimension (q, or a single vector) is too
// narrow to fill a SIMD vector, so the vectors run along the inner dimension: L rows of
// X at a time accumulate lane-wise, and one transposing reduction yields their L sums.
template <typename T>
void small_rowdots(index_t M, index_t Q, index_t N, const T* X, index_t ldx, const T* Y,
                   index_t ldy, T* out, index_t ldo, T alpha, bool accumulate) {
    constexpr int L = Simd<T>::L;
    const index_t Nv = N / L * L;
    for (index_t j = 0; j < Q; ++j) {
        const T* __restrict yrow = Y + j * ldy;
        index_t k = 0;
        for (; k + L <= M; k += L) {
            const T* __restrict xk = X + k * ldx;
            vec_t<T> acc[L];
            for (int r = 0; r < L; ++r) acc[r] = vec_t<T>{};
            for (index_t i = 0; i < Nv; i += L) {
                const vec_t<T> yv = loadu(yrow + i);
                for (int r = 0; r < L; ++r) acc[r] += loadu(xk + r * ldx + i) * yv;
            }
            vec_t<T> sums = transpose_sum<T>(acc);
            for (index_t i = Nv; i < N; ++i)
                for (int r = 0; r < L; ++r) sums[r] += xk[r * ldx + i] * yrow[i];
            if (ldo == 1) {
                T* o = out + k + j;
                vec_t<T> res = sums * alpha;
                if (accumulate) res += loadu(o);
                storeu(o, res);
            } else {
                for (int r = 0; r < L; ++r) {
                    T* o = out + (k + r) * ldo + j;
                    *o = accumulate ? *o + alpha * sums[r] : alpha * sums[r];
                }
            }
        }
        for (; k < M; ++k) {
            const T* __restrict xrow = X + k * ldx;
            vec_t<T> a = vec_t<T>{};
            for (index_t i = 0; i < Nv; i += L) a += loadu(xrow + i) * loadu(yrow + i);
            T s = hsum<T>(a);
            for (index_t i = Nv; i < N; ++i) s += xrow[i] * yrow[i];
            T* o = out + k * ldo + j;
            *o = accumulate ? *o + alpha * s : alpha * s;
        }
    }
}

template <typename T>
void step_small(const eagle::StepShape& s, const T* A, const T* B, T* C, T* D, T* A_out,
                T* B_out, T* G, T* W, T* P, double eta_rho, double gamma_rho, double scale,
                double zeta_rho2, T* scratch) {
    const index_t d = s.d, n = s.n, p = s.p, q = s.q;
    const T one = T(1);
    const T gr = static_cast<T>(gamma_rho);

    // G = A^T A: X = A^T (X(i, k) = A[k*n + i]), Y = A; upper triangle only.
    small_gemm<T, true>(n, n, d, A, 1, n, A, n, G, n, one, false);

    // W = A^T C, then C -= gr A W and D += gr B W (W from the input C).
    if (q >= Simd<T>::L) {
        small_gemm<T>(n, q, d, A, 1, n, C, q, W, q, one, false);
        small_gemm<T>(d, q, n, A, n, 1, W, q, C, q, -gr, true);
        small_gemm<T>(p, q, n, B, n, 1, W, q, D, q, gr, true);
    } else if (q > 0) {
        // Narrow right-hand side: form W^T = C^T A (rows of length n, SIMD along n) and
        // take the updates as dot products with its rows.  For q == 1, W^T is W.
        T* Wt = q == 1 ? W : scratch;
        small_gemm<T>(q, n, d, C, 1, q, A, n, Wt, n, one, false);
        if (q > 1) {
            for (index_t i = 0; i < n; ++i)
                for (index_t j = 0; j < q; ++j) W[i * q + j] = Wt[j * n + i];
        }
        small_rowdots<T>(d, q, n, A, n, Wt, n, C, q, -gr, true);
        small_rowdots<T>(p, q, n, B, n, Wt, n, D, q, gr, true);
    }

    // Mirror G's upper triangle and form P = scale (I - eta_rho G) in the same pass; the
    // coefficient is rounded once to T, as the oracle's (-scale * eta_rho) * G does.
    const T coef = static_cast<T>(-scale * eta_rho);
    const T diag = static_cast<T>(scale);
    // (P's strict lower part comes from the transposed upper part, not from the entries
    // just stored into G: reloading those as a vector would stall on store forwarding.)
    for (index_t i = 0; i < n; ++i) {
        T* __restrict gi = G + i * n;
        T* __restrict pi = P + i * n;
        for (index_t j = 0; j < i; ++j) {
            const T g = G[j * n + i];
            gi[j] = g;
            pi[j] = coef * g;
        }
        for (index_t j = i; j < n; ++j) pi[j] = coef * gi[j];
        pi[i] += diag;
    }
    // A quintic step: P += scale zeta_rho2 G G (G is whole now).
    if (zeta_rho2 != 0.0)
        small_gemm<T>(n, n, n, G, n, 1, G, n, P, n, static_cast<T>(scale * zeta_rho2), true);

    // A_out = A P, B_out = B P.
    small_gemm<T>(d, n, n, A, n, 1, P, n, A_out, n, one, false);
    small_gemm<T>(p, n, n, B, n, 1, P, n, B_out, n, one, false);
}

// The true residual of one least-squares problem and its column norms: R = Y - M X
// (M m x n, Y and R m x k, X n x k, all row-major) and, per column c, nr[c] = ||R[:, c]||,
// nx[c] = ||X[:, c]||, ng[c] = ||M^T R[:, c]||, the norms accumulated in double (squares
// of small float32 entries would underflow).  `scratch` holds 2 n k elements.
template <typename T>
void residual_small(index_t m, index_t n, index_t k, const T* M, const T* Y, const T* X, T* R,
                    double* nr, double* nx, double* ng, T* scratch) {
    for (index_t i = 0; i < m * k; ++i) R[i] = Y[i];
    T* g = scratch;  // M^T R: (n x k), or its transpose (k x n) when k is narrow
    const bool narrow = k < Simd<T>::L;
    if (!narrow) {
        small_gemm<T>(m, k, n, M, n, 1, X, k, R, k, T(-1), true);
        small_gemm<T>(n, k, m, M, 1, n, R, k, g, k, T(1), false);
    } else {
        // Rows of X^T are X's columns, contiguous: dot products along n with SIMD.
        T* Xt = scratch + n * k;
        for (index_t j = 0; j < n; ++j)
            for (index_t c = 0; c < k; ++c) Xt[c * n + j] = X[j * k + c];
        small_rowdots<T>(m, k, n, M, n, Xt, n, R, k, T(-1), true);
        small_gemm<T>(k, n, m, R, 1, k, M, n, g, n, T(1), false);  // g^T = R^T M
    }
    for (index_t c = 0; c < k; ++c) {
        double sr = 0.0, sx = 0.0, sg = 0.0;
        for (index_t i = 0; i < m; ++i) {
            const double v = static_cast<double>(R[i * k + c]);
            sr += v * v;
        }
        for (index_t j = 0; j < n; ++j) {
            const double v = static_cast<double>(X[j * k + c]);
            const double w = static_cast<double>(narrow ? g[c * n + j] : g[j * k + c]);
            sx += v * v;
            sg += w * w;
        }
        nr[c] = EAGLE_SQRT(sr);
        nx[c] = EAGLE_SQRT(sx);
        ng[c] = EAGLE_SQRT(sg);
    }
}

template <typename T>
double norm_small(index_t d, index_t n, const T* A, const T* v0, int maxiter, double rtol,
                  T* scratch) {
    T* u = scratch;
    T* z = u + d;
    T* v = z + n;
    for (index_t i = 0; i < n; ++i) v[i] = v0[i];
    double lam = 0.0, lam_old = 0.0;
    for (int it = 1; it <= maxiter; ++it) {
        small_rowdots<T>(d, 1, n, A, n, v, n, u, 1, T(1), false);    // u = A v
        small_gemm<T>(1, n, d, u, 0, 1, A, n, z, n, T(1), false);    // z = A^T u
        double vz = 0.0, zz = 0.0;
        for (index_t i = 0; i < n; ++i) {
            vz += static_cast<double>(v[i]) * static_cast<double>(z[i]);
            zz += static_cast<double>(z[i]) * static_cast<double>(z[i]);
        }
        lam = vz;  // Rayleigh quotient of A^T A, <= ||A||^2
        const double nz = EAGLE_SQRT(zz);
        if (nz == 0.0) return 0.0;
        const T tnz = static_cast<T>(nz);
        for (index_t i = 0; i < n; ++i) v[i] = z[i] / tnz;
        const double change = lam > lam_old ? lam - lam_old : lam_old - lam;
        if (change <= rtol * lam) break;
        lam_old = lam;
    }
    return lam > 0.0 ? EAGLE_SQRT(lam) : 0.0;
}

// ---------------------------------------------------------------- envelope Cholesky
// The row-envelope (profile) Cholesky factorisation of eagle_kernels.hpp's
// envelope_cholesky: row i of L holds columns first[i] .. i, contiguous, at val + ptr[i].
// Every entry is a dot product of two contiguous row segments, which is what is
// vectorised here (four independent vector accumulators cover the FMA latency).

template <typename T>
inline T envelope_dot(index_t len, const T* __restrict a, const T* __restrict b) {
    constexpr int L = Simd<T>::L;
    vec_t<T> s0{}, s1{}, s2{}, s3{};
    index_t k = 0;
    for (; k + 4 * L <= len; k += 4 * L) {
        s0 += loadu(a + k) * loadu(b + k);
        s1 += loadu(a + k + L) * loadu(b + k + L);
        s2 += loadu(a + k + 2 * L) * loadu(b + k + 2 * L);
        s3 += loadu(a + k + 3 * L) * loadu(b + k + 3 * L);
    }
    for (; k + L <= len; k += L) s0 += loadu(a + k) * loadu(b + k);
    T s = hsum<T>((s0 + s1) + (s2 + s3));
    for (; k < len; ++k) s += a[k] * b[k];
    return s;
}

template <typename T>
inline T envelope_sqrt(T v) {
    return static_cast<T>(EAGLE_SQRT(static_cast<double>(v)));  // (correctly rounded for float)
}

// A 4 x 2 block of dot products, out0[r] = sum_k a_r[k] c0[k] and out1[r] = sum_k a_r[k]
// c1[k] for r < 4: six loads for eight multiply-adds (eight accumulator chains, the FMA
// latency covered without unrolling; fourteen vector registers).
template <typename T>
inline void envelope_dot42(index_t len, const T* __restrict a0, const T* __restrict a1,
                           const T* __restrict a2, const T* __restrict a3,
                           const T* __restrict c0, const T* __restrict c1, T* out0, T* out1) {
    constexpr int L = Simd<T>::L;
    vec_t<T> s0{}, s1{}, s2{}, s3{}, t0{}, t1{}, t2{}, t3{};
    index_t k = 0;
    for (; k + L <= len; k += L) {
        const vec_t<T> x0 = loadu(c0 + k), x1 = loadu(c1 + k);
        const vec_t<T> y0 = loadu(a0 + k), y1 = loadu(a1 + k), y2 = loadu(a2 + k), y3 = loadu(a3 + k);
        s0 += y0 * x0; t0 += y0 * x1;
        s1 += y1 * x0; t1 += y1 * x1;
        s2 += y2 * x0; t2 += y2 * x1;
        s3 += y3 * x0; t3 += y3 * x1;
    }
    T r0 = hsum<T>(s0), r1 = hsum<T>(s1), r2 = hsum<T>(s2), r3 = hsum<T>(s3);
    T q0 = hsum<T>(t0), q1 = hsum<T>(t1), q2 = hsum<T>(t2), q3 = hsum<T>(t3);
    for (; k < len; ++k) {
        const T x0 = c0[k], x1 = c1[k];
        r0 += a0[k] * x0; q0 += a0[k] * x1;
        r1 += a1[k] * x0; q1 += a1[k] * x1;
        r2 += a2[k] * x0; q2 += a2[k] * x1;
        r3 += a3[k] * x0; q3 += a3[k] * x1;
    }
    out0[0] = r0; out0[1] = r1; out0[2] = r2; out0[3] = r3;
    out1[0] = q0; out1[1] = q1; out1[2] = q2; out1[3] = q3;
}

// A row's own head of a dot product (columns before the block's common start), often
// empty.
template <typename T>
inline T envelope_head(index_t len, const T* a, const T* b) {
    return len > 0 ? envelope_dot<T>(len, a, b) : T(0);
}

// L[i, j] for one row i (starting at column fi, entries at Li) and one earlier column
// j (row j of L starting at column fj, entries at Lj): (A[i, j] - L[i, :j] L[j, :j]) /
// L[j, j], the dot product over the columns both rows hold; inv_j = 1 / L[j, j].
template <typename T>
inline void envelope_entry(T* Li, index_t fi, const T* Lj, index_t fj, index_t j, T inv_j) {
    const index_t k0 = fi > fj ? fi : fj;
    Li[j - fi] = (Li[j - fi] - envelope_dot<T>(j - k0, Li + (k0 - fi), Lj + (k0 - fj))) * inv_j;
}

// Rows [begin, end) of L (those before begin done, their 1 / L[j, j] in inv).  Returns 0,
// or i + 1 where the pivot of row i is not positive (or not above rel_pivot times the
// original diagonal entry): the matrix is not numerically positive definite.  val is
// overwritten by L (rows before i on failure).
//
// Rows go in blocks of four.  The columns j before the block that all four rows hold go
// in pairs: rows j and j + 1 of L are dotted with the four rows at once over the columns
// all six hold (envelope_dot42: each row j read once for four entries), the rows' own
// earlier columns singly, and entry j + 1 takes the term of column j after it; the
// columns only some rows hold, and the triangle inside the block, go one at a time.
// inv (n entries, scratch) keeps 1 / L[j, j]: a product per entry instead of a division
// (short rows are bound by it).  (Measured on one AVX2 core against dotting one row j at
// a time: bcsstk16 7.1-7.6 ms against 8.2-11.9, bcsstk13 14-18.5 against 16-21.)
template <typename T>
index_t envelope_factor_small(index_t begin, index_t end, const std::int64_t* ptr,
                              const std::int64_t* first, T* val, double rel_pivot, T* inv) {
    for (index_t i0 = begin; i0 < end; i0 += 4) {
        const int R = end - i0 < 4 ? static_cast<int>(end - i0) : 4;
        index_t fmin = first[i0], fmax = first[i0];
        for (int r = 1; r < R; ++r) {
            fmin = first[i0 + r] < fmin ? first[i0 + r] : fmin;
            fmax = first[i0 + r] > fmax ? first[i0 + r] : fmax;
        }
        T* Lr[4];
        index_t fr[4];
        for (int r = 0; r < R; ++r) {
            Lr[r] = val + ptr[i0 + r];
            fr[r] = first[i0 + r];
        }
        index_t j = fmin;
        if (R == 4) {
            for (; j < fmax && j < i0; ++j)
                for (int r = 0; r < 4; ++r)
                    if (j >= fr[r])
                        envelope_entry<T>(Lr[r], fr[r], val + ptr[j], first[j], j, inv[j]);
            for (; j + 1 < i0; j += 2) {
                const T* Lj = val + ptr[j];
                const T* Lk = val + ptr[j + 1];
                const index_t fj = first[j], fk = first[j + 1];
                index_t k0 = fmax > fj ? fmax : fj;
                k0 = k0 > fk ? k0 : fk;
                k0 = k0 < j ? k0 : j;  // (row j + 1 may start at column j + 1)
                T d0[4], d1[4];
                envelope_dot42<T>(j - k0, Lr[0] + (k0 - fr[0]), Lr[1] + (k0 - fr[1]),
                                  Lr[2] + (k0 - fr[2]), Lr[3] + (k0 - fr[3]), Lj + (k0 - fj),
                                  Lk + (k0 - fk), d0, d1);
                const T ljk = j >= fk ? Lk[j - fk] : T(0);  // L[j + 1, j]
                for (int r = 0; r < 4; ++r) {
                    const index_t h0 = fr[r] > fj ? fr[r] : fj;
                    const index_t h1 = fr[r] > fk ? fr[r] : fk;
                    const T e0 = (Lr[r][j - fr[r]] - d0[r] -
                                  envelope_head<T>(k0 - h0, Lr[r] + (h0 - fr[r]),
                                                   Lj + (h0 - fj))) * inv[j];
                    Lr[r][j - fr[r]] = e0;
                    Lr[r][j + 1 - fr[r]] =
                        (Lr[r][j + 1 - fr[r]] - d1[r] - e0 * ljk -
                         envelope_head<T>(k0 - h1, Lr[r] + (h1 - fr[r]), Lk + (h1 - fk))) *
                        inv[j + 1];
                }
            }
        }
        for (; j < i0; ++j) {
            const T* Lj = val + ptr[j];
            for (int r = 0; r < R; ++r)
                if (j >= fr[r]) envelope_entry<T>(Lr[r], fr[r], Lj, first[j], j, inv[j]);
        }
        for (int r = 0; r < R; ++r) {
            const index_t i = i0 + r;
            for (index_t jj = i0 > fr[r] ? i0 : fr[r]; jj < i; ++jj)
                envelope_entry<T>(Lr[r], fr[r], val + ptr[jj], first[jj], jj, inv[jj]);
            const T a = Lr[r][i - fr[r]];
            const T d = a - envelope_dot<T>(i - fr[r], Lr[r], Lr[r]);
            if (!(d > static_cast<T>(rel_pivot) * a) ||
                !(d < static_cast<T>(EAGLE_HUGE_VAL)))
                return i + 1;
            const T lii = envelope_sqrt<T>(d);
            Lr[r][i - fr[r]] = lii;
            inv[i] = T(1) / lii;
        }
    }
    return 0;
}

// x <- L^-T L^-1 x (forward then backward substitution with the factor above).
template <typename T>
void envelope_solve_small(index_t n, const std::int64_t* ptr, const std::int64_t* first,
                    const T* val, T* x) {
    for (index_t i = 0; i < n; ++i) {
        const T* Li = val + ptr[i];
        const index_t fi = first[i];
        x[i] = (x[i] - envelope_dot<T>(i - fi, Li, x + fi)) / Li[i - fi];
    }
    constexpr int L = Simd<T>::L;
    for (index_t i = n - 1; i >= 0; --i) {
        const T* Li = val + ptr[i];
        const index_t fi = first[i];
        const T xi = x[i] / Li[i - fi];
        x[i] = xi;
        T* y = x + fi;
        const index_t len = i - fi;
        const vec_t<T> xv = vec_t<T>{} + xi;
        index_t k = 0;
        for (; k + L <= len; k += L) storeu(y + k, loadu(y + k) - xv * loadu(Li + k));
        for (; k < len; ++k) y[k] -= xi * Li[k];
    }
}

// ---------------------------------------------------------------- kernel rows
// One group of samples of a fused kernel pass (kernel_passes.hpp): the group's kernel
// rows are formed in `scratch` (inner products or L1 distances, then the kernel's map
// applied in place), used for the products and dropped.

#if defined(EAGLE_PORTABLE_KERNELS)
template <typename T>
inline vec_t<T> kexp(vec_t<T> x) {
    return {static_cast<T>(std::exp(x.x))};
}
template <typename T>
inline vec_t<T> kabs(vec_t<T> x) {
    return {x.x < T(0) ? -x.x : x.x};
}
template <typename T>
inline vec_t<T> kmax0(vec_t<T> x) {
    return {x.x < T(0) ? T(0) : x.x};  // (NaN stays NaN)
}
template <typename T>
inline vec_t<T> ksign_as(vec_t<T> mag, vec_t<T> s) {
    return {s.x < T(0) ? -mag.x : mag.x};
}
#else
// exp by Cody-Waite reduction x = n ln2 + r (|r| <= ln2 / 2) and a Taylor polynomial of
// e^r (degree 13 in double, 7 in float: truncation below half an ulp), scaled by 2^n
// built in the exponent bits.  x below kLo gives 0, NaN stays NaN.
template <typename T>
struct ExpParams;
template <>
struct ExpParams<double> {
    typedef long long I;
    static constexpr double kLo = -708.0, kHi = 709.0;
    static constexpr double kLog2e = 1.4426950408889634, kShift = 6755399441055744.0;
    static constexpr double kLn2Hi = 6.93147180369123816490e-01;
    static constexpr double kLn2Lo = 1.90821492927058770002e-10;
    static constexpr int kDegree = 13, kMantissa = 52;
    static constexpr I kBias = 1023;
    static constexpr double kCoef[14] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120,
        1.0 / 720, 1.0 / 5040, 1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
        1.0 / 479001600, 1.0 / 6227020800.0};
};
template <>
struct ExpParams<float> {
    typedef int I;
    static constexpr float kLo = -87.0f, kHi = 88.0f;
    static constexpr float kLog2e = 1.44269504f, kShift = 12582912.0f;
    static constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
    static constexpr int kDegree = 7, kMantissa = 23;
    static constexpr I kBias = 127;
    static constexpr float kCoef[8] = {1.0f, 1.0f, 1.0f / 2, 1.0f / 6, 1.0f / 24, 1.0f / 120,
        1.0f / 720, 1.0f / 5040};
};

template <typename T>
inline vec_t<T> kexp(vec_t<T> x) {
    typedef ExpParams<T> P;
    typedef typename P::I ivec __attribute__((vector_size(EAGLE_VEC_BYTES)));
    const vec_t<T> lo = vec_t<T>{} + P::kLo, hi = vec_t<T>{} + P::kHi;
    const auto under = x < lo;
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    const vec_t<T> t = x * P::kLog2e + P::kShift;
    const vec_t<T> nf = t - P::kShift;
    const vec_t<T> r = (x - nf * P::kLn2Hi) - nf * P::kLn2Lo;
    vec_t<T> p = vec_t<T>{} + P::kCoef[P::kDegree];
    for (int k = P::kDegree - 1; k >= 0; --k) p = p * r + P::kCoef[k];
    typename P::I shift_bits;
    const T shift = P::kShift;
    EAGLE_MEMCPY(&shift_bits, &shift, sizeof shift_bits);
    ivec bits;
    EAGLE_MEMCPY(&bits, &t, sizeof bits);
    bits = (bits - shift_bits + P::kBias) << P::kMantissa;
    vec_t<T> scale;
    EAGLE_MEMCPY(&scale, &bits, sizeof scale);
    const vec_t<T> res = p * scale;
    return under ? vec_t<T>{} : res;
}
template <typename T>
inline vec_t<T> kabs(vec_t<T> x) {
    return x < T(0) ? -x : x;
}
template <typename T>
inline vec_t<T> kmax0(vec_t<T> x) {
    return x < T(0) ? vec_t<T>{} : x;  // (NaN stays NaN)
}
template <typename T>
inline vec_t<T> ksign_as(vec_t<T> mag, vec_t<T> s) {
    return s < T(0) ? -mag : mag;
}
#endif

// The laplacian's map on one row of L1 distances, row[j] = exp(-gamma row[j]): whole
// vectors, then the tail through a zero-padded one.
template <typename T>
void laplacian_map_row(const eagle::KernelSpec& k, T* __restrict row, index_t m) {
    constexpr int L = Simd<T>::L;
    const T g = static_cast<T>(k.gamma);
    index_t j = 0;
    for (; j + L <= m; j += L) storeu(row + j, kexp<T>(loadu(row + j) * (-g)));
    if (j < m) {
        T a[L] = {};
        for (index_t i = j; i < m; ++i) a[i - j] = row[i];
        storeu(a, kexp<T>(loadu(a) * (-g)));
        for (index_t i = j; i < m; ++i) row[i] = a[i - j];
    }
}

// The kernel's map on one vector of inner products (KIND is not the laplacian).
template <int KIND, typename T>
inline vec_t<T> kernel_map(vec_t<T> ip, vec_t<T> z, T xn, T g, T c0, int degree) {
    if constexpr (KIND == eagle::kRbf) {
        return kexp<T>(kmax0<T>((z + xn) - (ip + ip)) * (-g));
    } else if constexpr (KIND == eagle::kPolynomial) {
        vec_t<T> base = ip * g + c0;
        vec_t<T> res = vec_t<T>{} + T(1);
        for (int e = degree; e > 0; e >>= 1) {
            if (e & 1) res = res * base;
            if (e > 1) base = base * base;
        }
        return res;
    } else if constexpr (KIND == eagle::kSigmoid) {
        const vec_t<T> a = ip * g + c0;
        const vec_t<T> e = kexp<T>(kabs<T>(a) * T(-2));  // tanh|a| = (1 - e) / (1 + e)
        return ksign_as<T>((T(1) - e) / (T(1) + e), a);
    } else {
        (void)z, (void)xn, (void)g, (void)c0, (void)degree;
        return ip;
    }
}

// R kernel rows formed in registers, one block of kVecs vectors of columns at a time:
// inner products over d, the map, stored to `tile` (R x m) and, with V1 (one target),
// dotted with it on the fly (u[r] = <tile row r, V1>).  The columns past the last whole
// vector go through a zero-padded one.
template <int KIND, int R, typename T>
void fused_rows(const eagle::KernelSpec& k, index_t d, const T* __restrict X, index_t m,
                const T* __restrict Zt, const T* __restrict zn, const T* __restrict V1,
                T* __restrict tile, T* __restrict u) {
    constexpr int L = Simd<T>::L;
    constexpr int U = kVecs;
    const T g = static_cast<T>(k.gamma), c0 = static_cast<T>(k.coef0);
    const int degree = k.degree;
    T xn[R] = {};  // (the samples' squared norms: rbf only)
    if constexpr (KIND == eagle::kRbf)
        for (int r = 0; r < R; ++r)
            for (index_t c = 0; c < d; ++c) xn[r] += X[r * d + c] * X[r * d + c];
    vec_t<T> dot[R];
    for (int r = 0; r < R; ++r) dot[r] = vec_t<T>{};
    index_t j0 = 0;
    for (; j0 + U * L <= m; j0 += U * L) {
        vec_t<T> acc[R][U];
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < U; ++v) acc[r][v] = vec_t<T>{};
        for (index_t c = 0; c < d; ++c) {
            vec_t<T> zv[U];
            for (int v = 0; v < U; ++v) zv[v] = loadu(Zt + c * m + j0 + v * L);
            for (int r = 0; r < R; ++r) {
                const T xs = X[r * d + c];
                for (int v = 0; v < U; ++v) acc[r][v] += xs * zv[v];
            }
        }
        for (int v = 0; v < U; ++v) {
            const vec_t<T> z = loadu(zn + j0 + v * L);
            const vec_t<T> vv = V1 != nullptr ? loadu(V1 + j0 + v * L) : vec_t<T>{};
            for (int r = 0; r < R; ++r) {
                const vec_t<T> kv = kernel_map<KIND, T>(acc[r][v], z, xn[r], g, c0, degree);
                storeu(tile + r * m + j0 + v * L, kv);
                dot[r] += kv * vv;
            }
        }
    }
    for (; j0 < m; j0 += L) {  // (one vector at a time; the last one padded with zeros)
        const index_t w = m - j0 < L ? m - j0 : L;
        T zb[L] = {}, nb[L] = {}, vb[L] = {};
        vec_t<T> acc[R];
        for (int r = 0; r < R; ++r) acc[r] = vec_t<T>{};
        for (index_t c = 0; c < d; ++c) {
            for (index_t i = 0; i < w; ++i) zb[i] = Zt[c * m + j0 + i];
            const vec_t<T> zv = loadu(zb);
            for (int r = 0; r < R; ++r) acc[r] += X[r * d + c] * zv;
        }
        for (index_t i = 0; i < w; ++i) {
            nb[i] = zn[j0 + i];
            vb[i] = V1 != nullptr ? V1[j0 + i] : T(0);
        }
        for (int r = 0; r < R; ++r) {
            T kb[L];
            storeu(kb, kernel_map<KIND, T>(acc[r], loadu(nb), xn[r], g, c0, degree));
            for (index_t i = 0; i < w; ++i) tile[r * m + j0 + i] = kb[i];
            for (index_t i = w; i < L; ++i) kb[i] = T(0);
            dot[r] += loadu(kb) * loadu(vb);
        }
    }
    if (u != nullptr)
        for (int r = 0; r < R; ++r) u[r] = hsum<T>(dot[r]);
}

template <int R, typename T>
void fused_rows_kind(const eagle::KernelSpec& k, index_t d, const T* X, index_t m, const T* Zt,
                     const T* zn, const T* V1, T* tile, T* u) {
    switch (k.kind) {
    case eagle::kRbf:
        fused_rows<eagle::kRbf, R, T>(k, d, X, m, Zt, zn, V1, tile, u);
        break;
    case eagle::kPolynomial:
        fused_rows<eagle::kPolynomial, R, T>(k, d, X, m, Zt, zn, V1, tile, u);
        break;
    case eagle::kSigmoid:
        fused_rows<eagle::kSigmoid, R, T>(k, d, X, m, Zt, zn, V1, tile, u);
        break;
    default:
        fused_rows<eagle::kLinear, R, T>(k, d, X, m, Zt, zn, V1, tile, u);
        break;
    }
}

template <typename T>
void kernel_rows_small(const eagle::KernelSpec& k, int mode, index_t g, index_t d, const T* X,
                       index_t m, const T* Zt, const T* zn, index_t t, const T* V, const T* w,
                       const T* C, T* acc, T* out, T* scratch) {
    constexpr int L = Simd<T>::L;
    T* tile = scratch;         // g x m: the group's kernel rows
    T* u = scratch + g * m;    // g x t: K V^T, then its weighted form
    // With one target the products with V are taken while the rows are formed (the
    // inner-product kernels).
    const bool dots = t == 1 && mode != eagle::kRhs && k.kind != eagle::kLaplacian;
    T* uo = mode == eagle::kApply ? out : u;
    index_t r0 = 0;
    if (k.kind != eagle::kLaplacian) {
        for (; r0 + kRows <= g; r0 += kRows)
            fused_rows_kind<kRows, T>(k, d, X + r0 * d, m, Zt, zn, dots ? V : nullptr,
                                      tile + r0 * m, dots ? uo + r0 : nullptr);
        for (; r0 < g; ++r0)
            fused_rows_kind<1, T>(k, d, X + r0 * d, m, Zt, zn, dots ? V : nullptr,
                                  tile + r0 * m, dots ? uo + r0 : nullptr);
    } else {
        for (index_t r = 0; r < g; ++r) {
            T* __restrict row = tile + r * m;
            for (index_t j = 0; j < m; ++j) row[j] = T(0);
            for (index_t c = 0; c < d; ++c) {
                const T xs = X[r * d + c];
                const T* __restrict z = Zt + c * m;
                index_t j = 0;
                for (; j + L <= m; j += L)
                    storeu(row + j, loadu(row + j) + kabs<T>(loadu(z + j) - xs));
                for (; j < m; ++j) {
                    const T diff = z[j] - xs;
                    row[j] += diff < T(0) ? -diff : diff;
                }
            }
            laplacian_map_row<T>(k, row, m);
        }
    }
    if (mode == eagle::kApply) {
        if (!dots) small_rowdots<T>(g, t, m, tile, m, V, m, out, t, T(1), false);
        return;
    }
    const T* coef = C;
    if (mode == eagle::kGram) {
        if (!dots) small_rowdots<T>(g, t, m, tile, m, V, m, u, t, T(1), false);
        for (index_t r = 0; r < g; ++r)
            for (index_t c = 0; c < t; ++c) u[r * t + c] *= w[r];
        coef = u;
    }
    // acc (t x m) += coef^T (t x g) tile (g x m)
    small_gemm<T>(t, m, g, coef, 1, t, tile, m, acc, m, T(1), true);
}
