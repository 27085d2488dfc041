"""``eagle_steps`` with the steps fused, in array-module operations (the numba and
cupy backends; the native core has the same algebra in C++, csrc/eagle_kernels.cpp).

Each step multiplies ``A`` and ``B`` on the right by ``P_j = scale_j (I - eta_j
G_j + zeta_j G_j^2)``, a polynomial in the iterate's Gram.  So after ``j`` steps ``A_j = A Q_j``
with ``Q_j = P_0 ... P_{j-1}`` (n x n), the next Gram is ``G_j = P_{j-1} G_{j-1}
P_{j-1}`` (two n x n products instead of a SYRK with ``A``), and the C/D update of
step ``j`` uses ``A_j^T C = Q_j^T (A^T C)`` and ``A_j U = A (Q_j U)``.  One SYRK and
one product with ``A`` (and ``B``) then serve all ``k`` steps:
``3 d n^2 + 2 p n^2 + (k - 1) (6 n^3 + 4 n^2 q)`` flops (plus the C/D updates every
step takes) instead of ``k (3 d n^2 + 2 p n^2)``, a saving when
``3 d + 2 p > 6 n + 4 q``.  The values are those of ``k`` plain steps up to
rounding: ``B A^+`` is invariant under any common right factor, so rounding in
``Q`` only perturbs the polynomial that is applied, never the answer.

Calls chain (the drivers' deferred steps, executors.py): ``defer`` leaves ``A_out``
and ``B_out`` unwritten (the iterate is ``A Q``); ``resume`` continues from such a
call's ``G``, ``P`` and ``Q`` as a step ``j > 0`` of one call does (no SYRK).
"""

from __future__ import annotations

from ._device import array_module


def eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                gamma_rho, scale, zeta_rho2=None, *, resume=False, defer=False):
    xp = array_module(A)
    k = len(eta_rho)
    n = A.shape[1]
    if not resume:  # (resumed: from the G, P, Q a deferred call left)
        xp.matmul(A.T, A, out=G)
    for j in range(k):
        chained = j > 0 or resume
        if chained:  # G <- P G P, symmetrised through the scratch T
            xp.matmul(G, P, out=T)
            xp.matmul(P, T, out=G)
            xp.add(G, G.T, out=T)
            xp.multiply(T, 0.5, out=G)
        traces[j] = float(G.trace())
        xp.matmul(A.T, C, out=W)
        if chained:
            xp.matmul(Q.T, W, out=W2)
            xp.matmul(Q, W2, out=W)
        # Python floats: NumPy scalars would promote float32 arrays to float64
        g, e, sc = float(gamma_rho[j]), float(eta_rho[j]), float(scale[j])
        C -= g * (A @ W)
        D += g * (B @ W)
        if j + 1 < k:
            Dsnap[j] = D
        xp.multiply(G, -sc * e, out=P)
        P.reshape(-1)[:: n + 1] += sc
        z = 0.0 if zeta_rho2 is None else float(zeta_rho2[j])
        if z:  # a quintic step: + zeta G^2, through the scratch T
            xp.matmul(G, G, out=T)
            T *= sc * z
            P += T
        if not chained:
            Q[...] = P
        else:
            xp.matmul(Q, P, out=T)
            Q[...] = T
    if defer:  # the iterate stays A Q
        return
    xp.matmul(A, Q, out=A_out)
    xp.matmul(B, Q, out=B_out)
