/**
 * Ed25519 public-key validation (RFC 8032 §5.1.3), run once per key import,
 * never per call. OpenSSL 3.0's verify (node:crypto on Node 20) accepts public keys of small
 * order and non-canonical encodings; against such a key a signature with
 * R = identity and S = 0 verifies for every message (identity key), or for 1 in
 * 2, 4 or 8 messages (the other torsion points), so anyone could forge tokens
 * without a private key. Here a key must be a canonical encoding of a point on
 * the curve that is not of small order ([8]P is not the identity). Plain BigInt
 * field arithmetic: well under a millisecond per key.
 */

const P = 2n ** 255n - 19n;
/** d = -121665 / 121666 (mod p). */
const D = mod(-121665n * pow(121666n, P - 2n));
/** sqrt(-1) = 2^((p-1)/4) (mod p). */
const SQRT_M1 = pow(2n, (P - 1n) / 4n);

/** Why a 32-byte encoding is not a safe Ed25519 public key, or undefined when it is one. */
export function ed25519KeyProblem(bytes: Uint8Array): string | undefined {
  if (bytes.length !== 32) return 'an Ed25519 public key is 32 bytes';
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? bytes[i]! & 0x7f : bytes[i]!);
  const sign = bytes[31]! >> 7;
  if (y >= P) return 'non-canonical encoding (y is not below 2^255 - 19)';
  const x = recoverX(y, sign);
  if (typeof x === 'string') return x;
  // [8]P in projective coordinates (no inversions); the identity is (0 : Z : Z).
  let q: [bigint, bigint, bigint] = [x, y, 1n];
  for (let i = 0; i < 3; i++) q = double(q);
  if (q[0] === 0n && q[1] === q[2]) return x === 0n && y === 1n ? 'the identity point (small order)' : 'a point of small order (one of the 8 torsion points)';
  return undefined;
}

/** RFC 8032 §5.1.3: x with x^2 = u / v (u = y^2 - 1, v = d y^2 + 1) and the sign given, with one exponentiation. */
function recoverX(y: bigint, sign: number): bigint | string {
  const u = mod(y * y - 1n);
  const v = mod(D * y * y + 1n);
  const v3 = mod(v * v * v);
  let x = mod(u * v3 * pow(mod(u * v3 * v3 * v), (P - 5n) / 8n));
  const vx2 = mod(v * x * x);
  if (vx2 !== u) {
    if (vx2 !== mod(-u)) return 'not a point on the curve';
    x = mod(x * SQRT_M1);
  }
  if (x === 0n && sign === 1) return 'non-canonical encoding (x is 0 but its sign bit is set)';
  return Number(x & 1n) === sign ? x : P - x;
}

/** Projective doubling on -x^2 + y^2 = 1 + d x^2 y^2 (dbl-2008-bbjlp, a = -1); complete on this curve. */
function double([X, Y, Z]: [bigint, bigint, bigint]): [bigint, bigint, bigint] {
  const B = mod((X + Y) * (X + Y));
  const C = mod(X * X);
  const Y2 = mod(Y * Y);
  const E = P - C;
  const F = mod(E + Y2);
  const J = mod(F - 2n * Z * Z);
  return [mod((B - C - Y2) * J), mod(F * (E - Y2)), mod(F * J)];
}

function mod(a: bigint): bigint {
  const r = a % P;
  return r >= 0n ? r : r + P;
}

function pow(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = mod(base);
  for (let e = exp; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
  }
  return result;
}
