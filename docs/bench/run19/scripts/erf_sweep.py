"""Run 19 call 5: fast_math's erf pieces with the GPU's own ex2.approx.ftz.f32, on every f32 u with
2^-24 <= |u| <= 6 (both signs), against float64 erf / erfc on the device. Writes erf_sweep.cu from
compiler/fast_math.py's coefficients (so the sweep is of the landed constants):

    python3 docs/bench/run19/scripts/erf_sweep.py > .devrun/erf_sweep.cu       # here
    nvcc -O3 -arch=sm_90a -o /tmp/s .devrun/erf_sweep.cu && /tmp/s              # on the GPU machine

Printed: the max absolute error of (a) the one-piece 1 + erf(u) (emit_one_plus_erf), (b) the
two-piece erf (emit_erf) plus 1 in f32, (c) the two-piece erf alone; and the max relative error
of (a) and (b) for u < 0 where the value is not 0. Each with ex2 correctly rounded (double exp2,
as the numpy mirrors in fast_math.py) and with the hardware's ex2.approx.ftz.f32."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from compiler import fast_math as fm  # noqa: E402  (the checkout's own module, no install needed)


def arr(name, cs):
    return f"__constant__ float {name}[{len(cs)}] = {{{', '.join(repr(float(c)) + 'f' for c in cs)}}};"


print(f"""#include <cstdio>
#include <cstring>
{arr("P1", fm.ONE_PLUS_ERF)}
{arr("PS", fm.ERF_SMALL)}
{arr("PL", fm.ERF_LARGE)}
__device__ unsigned long long M[10];
__device__ float ex2(float r, int hw) {{
  float e; if (hw) asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(r)); else e = (float)exp2((double)r); return e; }}
__device__ float horner(const float *c, int n, float x) {{
  float r = c[n - 1]; for (int i = n - 2; i >= 0; i--) r = fmaf(r, x, c[i]); return r; }}
__device__ float one_plus_erf(float u, int hw) {{  // emit_one_plus_erf
  float a = fabsf(u), r = horner(P1, {len(fm.ONE_PLUS_ERF)}, a);
  r = fminf(r, fmaf(a, -{fm.FLUSH!r}f, {fm.FLUSH * fm.ERFC_CLAMP!r}f));
  float e = ex2(r, hw); return u < 0.f ? e : 2.f - e; }}
__device__ float erf2(float x, int hw) {{  // emit_erf
  float ax = fabsf(x), small = x * horner(PS, {len(fm.ERF_SMALL)}, x * x);
  float t = fminf(ax, {fm.CLAMP!r}f), large = 1.f - ex2(horner(PL, {len(fm.ERF_LARGE)}, t), hw);
  float sgn = x < 0.f ? -large : large; return !(ax >= {fm.SPLIT!r}f) ? small : sgn; }}
__device__ void mx(int i, double v) {{ atomicMax(&M[i], (unsigned long long)__double_as_longlong(v)); }}
__global__ void k(unsigned lo, unsigned n, unsigned sign) {{
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
  float u = __uint_as_float((lo + i) | sign);
  double p = erfc(-(double)u), e = erf((double)u);
  for (int hw = 0; hw < 2; hw++) {{
    float a = one_plus_erf(u, hw), b = 1.f + erf2(u, hw), c = erf2(u, hw);
    mx(5 * hw + 0, fabs(a - p)); mx(5 * hw + 1, fabs(b - p)); mx(5 * hw + 2, fabs(c - e));
    if (u < 0.f && a > 0.f) mx(5 * hw + 3, fabs(a - p) / p);
    if (u < 0.f && b > 0.f) mx(5 * hw + 4, fabs(b - p) / p); }} }}
int main() {{
  unsigned lo = 0x33800000u, hi = 0x40c00000u, n = hi - lo + 1;  // 2^-24 .. 6
  for (unsigned s = 0; s < 2; s++) k<<<(n + 255) / 256, 256>>>(lo, n, s ? 0x80000000u : 0u);
  cudaDeviceSynchronize();
  unsigned long long h[10]; cudaMemcpyFromSymbol(h, M, sizeof h);
  const char *what[5] = {{"abs 1+erf one piece", "abs 1+erf two-piece erf + 1", "abs erf two-piece",
                          "rel u<0 one piece", "rel u<0 two-piece erf + 1"}};
  for (int hw = 0; hw < 2; hw++) for (int j = 0; j < 5; j++) {{
    double d; memcpy(&d, &h[5 * hw + j], 8); printf("%s ex2, %s: %.4g\\n", hw ? "hardware" : "exact", what[j], d); }}
  printf("%s\\n", cudaGetErrorString(cudaGetLastError())); }}""")
