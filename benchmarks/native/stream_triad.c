/* STREAM's triad, a[i] = b[i] + s * c[i], as the reference for this
   machine's memory bandwidth: plain C, OpenMP across the given threads, the
   inner loop vectorised by the compiler. */
#include <stdint.h>

void stream_triad(float* restrict a, const float* restrict b, const float* restrict c, float s, int64_t n,
                  int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
