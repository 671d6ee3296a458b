"""Special functions for the elementwise kernels, written with Triton's core math only.

Triton's interpreter (CPU mode, the simulated device) cannot run libdevice calls, so an op built
on ``libdevice.atan`` or ``lgamma`` would run on a GPU and nowhere else. These functions use only
``exp log sqrt sin cos erf floor`` and arithmetic, so CPU mode tests exactly the code a GPU
compiles. Each takes a block in the compute dtype (fp32, or fp64 for fp64) and returns the same
dtype; ``lgamma``/``digamma``/``polygamma`` work in fp64 whatever the input (their shift-and-
subtract forms cancel near their roots: fp32 would lose the digits fp32 results keep), and cast
back. Constants enter through arithmetic with a block (never ``tl.where`` of two Python floats,
which would be fp32 constants in an fp64 computation).
"""
from __future__ import annotations

import triton
import triton.language as tl

PI: tl.constexpr = tl.constexpr(3.141592653589793)  # a JIT function may read a global only as a constexpr


@triton.jit
def signbit(x):
    """The sign bit itself: true for -0.0 (atan2's quadrant of a signed zero)."""
    if x.dtype == tl.float64:
        s = x.to(tl.int64, bitcast=True) < 0
    else:
        s = x.to(tl.int32, bitcast=True) < 0
    return s


@triton.jit
def log1p(x):
    u = x + 1.0
    return tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))


@triton.jit
def expm1(x):
    # Kahan: (u - 1) * x / log(u) cancels exp's rounding error, accurate near 0.
    u = tl.exp(x)
    um1 = u - 1.0
    r = tl.where(u == 1.0, x, um1 * x / tl.log(u))
    r = tl.where(um1 == -1.0, -1.0, r)
    return tl.where(u == float("inf"), u, r)


@triton.jit
def atan(x):
    """Cephes' atan: reduced to |t| <= tan(pi/8)-ish by pi/2 - atan(1/|x|) or pi/4 + atan((|x|-1)/(|x|+1)),
    then a rational approximation good to fp64 (the reduction's pi/2, pi/4 carry their low bits)."""
    ax = tl.abs(x)
    big = ax > 2.414213562373095
    mid = (ax > 0.66) & (ax <= 2.414213562373095)
    t = tl.where(big, -1.0 / ax, tl.where(mid, (ax - 1.0) / (ax + 1.0), ax))
    bigf = big.to(x.dtype)
    midf = mid.to(x.dtype)
    base = bigf * 1.5707963267948966 + midf * 0.7853981633974483
    more = bigf * 6.123233995736766e-17 + midf * 3.061616997868383e-17
    z = t * t
    p = (((-8.750608600031904e-01 * z - 1.615753718733365e+01) * z - 7.500855792314705e+01) * z
         - 1.228866684490136e+02) * z - 6.485021904942025e+01
    q = ((((z + 2.485846490142306e+01) * z + 1.650270098316988e+02) * z + 4.328810604912903e+02) * z
         + 4.853903996359137e+02) * z + 1.945506571482614e+02
    r = base + (t * (z * p / q) + more + t)
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))  # a NaN falls through: every comparison is false


@triton.jit
def atan2(y, x):
    """The angle of (x, y) in [-pi, pi], with IEEE's signed zeros and infinities (C's atan2)."""
    ay = tl.abs(y)
    ax = tl.abs(x)
    inf = float("inf")
    t = tl.where((ay == inf) & (ax == inf), 1.0, ay / ax)  # exact constants: safe in tl.where
    t = tl.where((ay == 0) & (ax == 0), 0.0, t)
    q = atan(t)
    r = tl.where(signbit(x), -q + PI, q)  # the block first: the interpreter cannot take a block from a constexpr
    r = tl.where(signbit(y), -r, r)
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def asin(x):
    return atan2(x, tl.sqrt((1.0 - x) * (1.0 + x)))


@triton.jit
def acos(x):
    return atan2(tl.sqrt((1.0 - x) * (1.0 + x)), x)


@triton.jit
def sinh(x):
    ax = tl.abs(x)
    e = expm1(ax)
    small = 0.5 * (e + e / (e + 1.0))  # e^x - e^-x without cancellation near 0
    h = tl.exp(ax * 0.5)
    r = tl.where(ax > 20.0, (0.5 * h) * h, small)  # e^-x is below an ulp there; halves keep e^x from overflowing early
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))


@triton.jit
def cosh(x):
    ax = tl.abs(x)
    e = tl.exp(ax)
    h = tl.exp(ax * 0.5)
    return tl.where(ax > 20.0, (0.5 * h) * h, 0.5 * e + 0.5 / e)


@triton.jit
def asinh(x):
    ax = tl.abs(x)
    a2 = ax * ax
    small = log1p(ax + a2 / (1.0 + tl.sqrt(1.0 + a2)))
    r = tl.where(ax > 268435456.0, tl.log(ax) + 0.6931471805599453, small)  # 1/(4 x^2) below an fp64 ulp
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))


@triton.jit
def acosh(x):
    t = x - 1.0
    small = log1p(t + tl.sqrt(2.0 * t + t * t))  # NaN below 1: sqrt of a negative
    return tl.where(x > 268435456.0, tl.log(x) + 0.6931471805599453, small)


@triton.jit
def atanh(x):
    ax = tl.abs(x)
    r = 0.5 * log1p(2.0 * ax / (1.0 - ax))  # NaN beyond 1: log of a negative
    r = tl.where(ax == 1.0, ax * float("inf"), r)
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))


@triton.jit
def erfinv(x):
    """Giles' single-precision approximation ("Approximating the erfinv function", GPU Gems 2010),
    then, in fp64, Newton steps on erf(r) = x (quadratic: three take it to fp64's precision)."""
    w = -tl.log((1.0 - x) * (1.0 + x))
    ws = w - 2.5
    p1 = 3.43273939e-07 + 2.81022636e-08 * ws
    p1 = -3.5233877e-06 + p1 * ws
    p1 = -4.39150654e-06 + p1 * ws
    p1 = 0.00021858087 + p1 * ws
    p1 = -0.00125372503 + p1 * ws
    p1 = -0.00417768164 + p1 * ws
    p1 = 0.246640727 + p1 * ws
    p1 = 1.50140941 + p1 * ws
    wl = tl.sqrt(w) - 3.0
    p2 = 0.000100950558 - 0.000200214257 * wl
    p2 = 0.00134934322 + p2 * wl
    p2 = -0.00367342844 + p2 * wl
    p2 = 0.00573950773 + p2 * wl
    p2 = -0.0076224613 + p2 * wl
    p2 = 0.00943887047 + p2 * wl
    p2 = 1.00167406 + p2 * wl
    p2 = 2.83297682 + p2 * wl
    r = tl.where(w < 5.0, p1, p2) * x
    if x.dtype == tl.float64:
        for _ in tl.static_range(3):
            r = r - (tl.erf(r) - x) / (1.1283791670955126 * tl.exp(-r * r))
    return tl.where(tl.abs(x) == 1.0, x * float("inf"), r)


@triton.jit
def _shift_up(x, k: tl.constexpr):
    """(z, prod, recip): z = x + m with m the fewest steps (up to 10) taking x to 10 or more,
    prod = x (x+1) ... (x+m-1), recip = the sum of their reciprocals (x > 0, fp64)."""
    z = x
    prod = tl.zeros_like(x) + 1.0  # (x * 0.0 would be NaN at infinity)
    recip = tl.zeros_like(x)
    for _ in tl.static_range(10):
        s = z < 10.0
        if k == 0:
            prod = tl.where(s, prod * z, prod)
        else:
            recip = tl.where(s, recip + 1.0 / z, recip)
        z = tl.where(s, z + 1.0, z)
    return z, prod, recip


@triton.jit
def _abs_sinpi(x):
    """|sin(pi x)|, the fraction taken first so large |x| keeps its digits."""
    r = x - tl.floor(x + 0.5)
    return tl.abs(tl.sin(r * PI))


@triton.jit
def _lgamma_pos(x):
    """log Gamma(x), x >= 0: Stirling's series at z = x + m >= 10, less log(x (x+1) ... (x+m-1))."""
    z, prod, _r = _shift_up(x, 0)
    zi = 1.0 / z
    z2 = zi * zi
    series = zi * (0.08333333333333333 + z2 * (-0.002777777777777778 + z2 * (0.0007936507936507937 + z2 * (
        -0.0005952380952380953 + z2 * (0.0008417508417508417 + z2 * (-0.0019175269175269176
                                                                      + z2 * 0.00641025641025641))))))
    return (z - 0.5) * tl.log(z) - z + 0.9189385332046728 + series - tl.log(prod)


@triton.jit
def lgamma(x0):
    """log |Gamma(x)|; below 0 by reflection, log(pi / |sin(pi x)|) - lgamma(1 - x); +inf at the poles."""
    x = x0.to(tl.float64)
    neg = x < 0
    lp = _lgamma_pos(tl.where(neg, 1.0 - x, x))
    r = tl.where(neg, tl.log((1.0 / _abs_sinpi(x)) * PI) - lp, lp)
    inf = float("inf")
    r = tl.where((neg & (x == tl.floor(x))) | (tl.abs(x) == inf), inf, r)
    r = tl.where((x == 1.0) | (x == 2.0), 0.0, r)  # the roots, exactly (the series leaves an ulp of 15 there)
    return r.to(x0.dtype)


@triton.jit
def digamma(x0):
    """psi(x): the asymptotic series at z = x + m >= 10, less the shifted reciprocals; below 0 by
    reflection, psi(1 - x) - pi / tan(pi x). -inf at +0, +inf at -0, NaN at the negative integers (torch)."""
    x = x0.to(tl.float64)
    neg = x < 0
    z, _p, recip = _shift_up(tl.where(neg, 1.0 - x, x), 1)
    zi = 1.0 / z
    z2 = zi * zi
    psi = tl.log(z) - 0.5 * zi - z2 * (0.08333333333333333 - z2 * (0.008333333333333333 - z2 * (
        0.003968253968253968 - z2 * (0.004166666666666667 - z2 * (0.007575757575757576 - z2 * (
            0.021092796092796094 - z2 * 0.08333333333333333))))))
    psi = psi - recip
    r = x - tl.floor(x + 0.5)
    psi = tl.where(neg, psi - tl.cos(r * PI) / tl.sin(r * PI) * PI, psi)
    psi = tl.where(neg & (x == tl.floor(x)), float("nan"), psi)
    psi = tl.where(x == 0, tl.where(signbit(x), float("inf"), float("-inf")), psi)
    return psi.to(x0.dtype)


@triton.jit
def polygamma(x0, n):
    """The n-th derivative of psi, n >= 1: (-1)^(n+1) n! zeta(n+1, x), Hurwitz's zeta as the sum of
    (x+k)^-(n+1) until x+k >= 20 + 2n, then its Euler-Maclaurin tail (Bernoulli terms to B14).
    Poles at x = 0, -1, -2 ...: +inf for odd n, -inf for even n (torch)."""
    x = x0.to(tl.float64)
    nf = n.to(tl.float64)
    s = nf + 1.0
    thr = 20.0 + 2.0 * nf
    steps = tl.max(tl.maximum(tl.ceil(thr - x), 0.0), axis=0).to(tl.int32)
    s_odd = (n % 2) == 0
    z = x
    acc = tl.zeros_like(x)
    for _ in range(0, steps):
        sh = z < thr
        t = tl.exp(-s * tl.log(tl.abs(z)))
        t = tl.where((z < 0) & s_odd, -t, t)
        acc = tl.where(sh, acc + t, acc)
        z = tl.where(sh, z + 1.0, z)
    zi = 1.0 / z
    z2 = zi * zi
    zs = tl.exp(-s * tl.log(z))
    tail = zs * z / (s - 1.0) + 0.5 * zs
    f = s * zs * zi
    tail += f * 0.08333333333333333
    f = f * (s + 1.0) * (s + 2.0) * z2
    tail -= f * 0.001388888888888889
    f = f * (s + 3.0) * (s + 4.0) * z2
    tail += f * 3.306878306878307e-05
    f = f * (s + 5.0) * (s + 6.0) * z2
    tail -= f * 8.267195767195767e-07
    f = f * (s + 7.0) * (s + 8.0) * z2
    tail += f * 2.08767569878681e-08
    f = f * (s + 9.0) * (s + 10.0) * z2
    tail -= f * 5.284190138687493e-10
    f = f * (s + 11.0) * (s + 12.0) * z2
    tail += f * 1.3382536530684679e-11
    fact = tl.zeros_like(x) + 1.0
    for i in range(1, n + 1):
        fact = fact * i
    sign = 1.0 - 2.0 * s_odd.to(tl.float64)  # (-1)^(n+1)
    r = sign * fact * (acc + tail)
    r = tl.where((x <= 0) & (x == tl.floor(x)), sign * float("inf"), r)
    r = tl.where(x == float("inf"), 0.0, r)
    return r.to(x0.dtype)



@triton.jit
def erfc(x0):
    """1 - erf(x) without the cancellation: 1 - erf(x) below 2 (|erfc| > 4.6e-3, so erf's rounding
    stays an ulp of the result), above it exp(-x^2) / sqrt(pi) times the continued fraction
    1 / (x + (1/2) / (x + 1 / (x + (3/2) / ...))), 60 terms (converged to fp64 from x = 2). In fp64."""
    x = x0.to(tl.float64)
    big = x >= 2.0
    xs = tl.where(big, x, 2.0)  # lanes that take 1 - erf run the fraction at 2 (finite, then dropped)
    t = xs
    for k in range(60):  # from the 60th term up
        t = xs + ((60 - k) * 0.5) / t
    cf = tl.exp(-xs * xs) * 0.5641895835477563 / t
    r = tl.where(big, cf, 1.0 - tl.erf(x))
    return r.to(x0.dtype)


@triton.jit
def _bessel_i(x0, NU: tl.constexpr):
    """The modified Bessel function I_nu(x), nu = 0 or 1: the power series sum (x/2)^(2k+nu) / (k! (k+nu)!),
    60 terms (positive terms, converged to fp64) up to |x| = 20; above it Hankel's asymptotic series
    e^|x| / sqrt(2 pi |x|) sum_k prod_j -(4 nu^2 - (2j-1)^2) / (j 8|x|), 20 terms. I_1 is odd. In fp64.
    I_0(+-inf) is inf (NumPy's, the limit); torch's Chebyshev form gives inf / inf = NaN there."""
    x = x0.to(tl.float64)
    ax = tl.abs(x)
    small = ax <= 20.0
    xs = tl.where(small, ax, 0.0)
    q = xs * xs * 0.25
    term = tl.zeros_like(x) + 1.0
    if NU == 1:
        term = xs * 0.5
    acc = term
    for k in range(1, 60):
        term = term * q / (k * (k + NU))
        acc += term
    xl = tl.where(small, 21.0, ax)
    mu = 4.0 * NU * NU
    t = tl.zeros_like(x) + 1.0
    s = t
    for k in range(1, 20):
        t = -t * (mu - (2 * k - 1) * (2 * k - 1)) / (k * 8.0 * xl)
        s += t
    big = tl.exp(xl - 0.5 * tl.log(xl * (2.0 * PI))) * s  # e^x / sqrt(2 pi x) without e^x's early overflow
    r = tl.where(small, acc, tl.where(ax == float("inf"), ax, big))  # inf - log(inf) would be NaN
    if NU == 1:
        r = tl.where(x < 0, -r, r)
    return r.to(x0.dtype)


@triton.jit
def i0(x):
    return _bessel_i(x, 0)


@triton.jit
def i1(x):
    return _bessel_i(x, 1)


@triton.jit
def igamma(a0, x0, UPPER: tl.constexpr):
    """The regularized incomplete gamma functions in fp64: P(a, x) (UPPER false) and Q(a, x) = 1 - P.
    Below x = a + 1 the series P = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)), above it
    Legendre's continued fraction for Q (modified Lentz), each run until every lane of the block has
    converged to fp64 (at most 2,000 steps: a up to some 10^5). The complement is taken from the side
    computed, so neither loses its small tail.
    torch's special values: NaN for a < 0 or x < 0, a = 0 gives P = 1 for x > 0, x = 0 gives P = 0,
    an infinite x gives P = 1 (NaN if a is infinite too), an infinite a P = 0."""
    a = a0.to(tl.float64)
    x = x0.to(tl.float64)
    inf = float("inf")
    ok = (a > 0) & (x > 0) & (a < inf) & (x < inf)
    a_ = tl.where(ok, a, 1.0)
    x_ = tl.where(ok, x, 1.0)
    pref = tl.exp(a_ * tl.log(x_) - x_ - lgamma(a_))  # x^a e^-x / Gamma(a)
    use_series = x_ < a_ + 1.0
    # the series, on every lane (those of the fraction at a point where it converges: x = a / 2)
    xs = tl.where(use_series, x_, a_ * 0.5)
    ap = a_
    term = 1.0 / a_
    acc = term
    n = 0
    while (n < 2000) & (tl.max(term / acc, axis=0) > 1e-17):
        ap += 1.0
        term = term * xs / ap
        acc += term
        n += 1
    p_series = acc * tl.exp(a_ * tl.log(xs) - xs - lgamma(a_))
    # the fraction, on every lane (those of the series at x = a + 2)
    xc = tl.where(use_series, a_ + 2.0, x_)
    tiny = 1e-300
    b = xc + 1.0 - a_
    c = tl.zeros_like(a_) + 1.0 / tiny
    d = 1.0 / b
    h = d
    delta = h  # the last step's factor: 1 once converged
    i = 1
    while (i < 2000) & (tl.max(tl.abs(delta - 1.0), axis=0) > 5e-16):  # two ulps of 1
        an = -i * (i - a_)
        b += 2.0
        d = an * d + b
        d = tl.where(tl.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = tl.where(tl.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        i += 1
    q_cf = pref * h
    p = tl.where(use_series, p_series, 1.0 - q_cf)
    q = tl.where(use_series, 1.0 - p_series, q_cf)
    r = q if UPPER else p
    # torch's special values (calc_igamma / calc_igammac)
    lo = 1.0 if UPPER else 0.0  # the value at x = 0 and at an infinite a
    hi = 1.0 - lo  # ... and at an infinite x, and P's at a = 0
    r = tl.where(a == inf, lo, r)
    r = tl.where(x == inf, tl.where(a == inf, float("nan"), hi), r)
    r = tl.where(x == 0, lo, r)
    r = tl.where(a == 0, tl.where(x > 0, hi, float("nan")), r)
    r = tl.where((a < 0) | (x < 0) | (a != a) | (x != x), float("nan"), r)
    return r.to(a0.dtype)
