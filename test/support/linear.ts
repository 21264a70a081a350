import { expect } from 'vitest';

/**
 * Asserts that `make(n)` builds a check whose cost grows linearly with n, without a wall-clock bound
 * (a busy CI machine slows everything alike; a fixed "under 100 ms" failed there at 140 ms).
 * It times one run at size n against sixteen runs at n/16 (the same total work if linear), interleaved,
 * best of three: linear gives a ratio near 1, quadratic near 16. It fails above 4.
 */
export async function expectLinear(make: (n: number) => () => unknown, n: number, what = ''): Promise<void> {
  const small = Math.floor(n / 16);
  const whole = make(n);
  const part = make(small);
  const timed = async (f: () => unknown, times: number): Promise<number> => {
    const start = performance.now();
    for (let i = 0; i < times; i++) await f();
    return performance.now() - start;
  };
  await timed(part, 2); // warm the JIT on the same code path
  let big = Infinity;
  let parts = Infinity;
  for (let i = 0; i < 3; i++) {
    parts = Math.min(parts, await timed(part, 16));
    big = Math.min(big, await timed(whole, 1));
  }
  // + 5 ms: sub-millisecond checks are below timer and GC noise; a quadratic one at 1 MB takes seconds.
  expect(big, `${what}: one run at ${n} took ${big.toFixed(1)} ms, sixteen at ${small} took ${parts.toFixed(1)} ms`).toBeLessThan(4 * parts + 5);
}
