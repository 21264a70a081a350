/**
 * Ed25519 points the literature warns about (Wycheproof's "small order" and
 * "non-canonical" key groups; Chalkias et al., "Taming the many EdDSAs",
 * 2020), derived here from the curve equation rather than copied from a table,
 * with arithmetic of its own (projective extended coordinates), independent
 * of src/identity/ed25519.ts.
 */

const P = 2n ** 255n - 19n;
const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const mod = (a: bigint) => ((a % P) + P) % P;
const pow = (b: bigint, e: bigint): bigint => {
  let r = 1n;
  for (b = mod(b); e > 0n; e >>= 1n, b = (b * b) % P) if (e & 1n) r = (r * b) % P;
  return r;
};
const inv = (a: bigint) => pow(a, P - 2n);
const D = mod(-121665n * inv(121666n));
const I = pow(2n, (P - 1n) / 4n);

type Ext = [x: bigint, y: bigint, z: bigint, t: bigint];
const IDENTITY: Ext = [0n, 1n, 1n, 0n];

function add([x1, y1, z1, t1]: Ext, [x2, y2, z2, t2]: Ext): Ext {
  const a = mod((y1 - x1) * (y2 - x2));
  const b = mod((y1 + x1) * (y2 + x2));
  const c = mod(2n * D * t1 * t2);
  const d = mod(2n * z1 * z2);
  const e = b - a,
    f = d - c,
    g = d + c,
    h = b + a;
  return [mod(e * f), mod(g * h), mod(f * g), mod(e * h)];
}

function times(k: bigint, p: Ext): Ext {
  let r = IDENTITY;
  for (let q = p; k > 0n; k >>= 1n, q = add(q, q)) if (k & 1n) r = add(r, q);
  return r;
}

function affine([x, y, z]: Ext): { x: bigint; y: bigint } {
  const zi = inv(z);
  return { x: mod(x * zi), y: mod(y * zi) };
}

/** A point with this y, if there is one (x even). */
function pointWithY(y: bigint): Ext | undefined {
  const x2 = mod((y * y - 1n) * inv(D * y * y + 1n));
  let x = pow(x2, (P + 3n) / 8n);
  if (mod(x * x) !== x2) x = mod(x * I);
  if (mod(x * x) !== x2) return undefined;
  return [x, y, 1n, mod(x * y)];
}

/** 32 bytes, little-endian y, the top bit the sign (low bit) of x. */
export function encode(y: bigint, signBit: number): Buffer {
  const out = Buffer.alloc(32);
  let v = y;
  for (let i = 0; i < 32; i++, v >>= 8n) out[i] = Number(v & 0xffn);
  out[31] = (out[31]! & 0x7f) | (signBit << 7);
  return out;
}

/**
 * The 8 points of small order (the torsion subgroup): [L]Q is in it for any
 * point Q, and generates all of it when it has order 8.
 */
export function smallOrderPoints(): { encoding: Buffer; order: number }[] {
  for (let y = 2n; ; y++) {
    const q = pointWithY(y);
    if (!q) continue;
    const t = times(L, q);
    const same = (a: Ext, b: Ext) => mod(a[0] * b[2] - b[0] * a[2]) === 0n && mod(a[1] * b[2] - b[1] * a[2]) === 0n;
    if (same(times(4n, t), IDENTITY)) continue;
    const points: { encoding: Buffer; order: number }[] = [];
    for (let k = 0n; k < 8n; k++) {
      const { x, y: py } = affine(times(k, t));
      const order = [1, 2, 4, 8].find((n) => same(times(BigInt(n), times(k, t)), IDENTITY))!;
      points.push({ encoding: encode(py, Number(x & 1n)), order });
    }
    return points;
  }
}

/**
 * Non-canonical encodings: every y >= p that fits in 255 bits (y = p .. p + 18,
 * with either sign bit), and the x = 0 points (y = 1, y = -1) with the sign bit set.
 */
export function nonCanonicalEncodings(): { encoding: Buffer; what: string }[] {
  const out: { encoding: Buffer; what: string }[] = [];
  for (let k = 0n; P + k < 2n ** 255n; k++) {
    for (const s of [0, 1]) out.push({ encoding: encode(P + k, s), what: `y = p + ${k}, sign ${s}` });
  }
  out.push({ encoding: encode(1n, 1), what: 'identity with the sign bit set' });
  out.push({ encoding: encode(P - 1n, 1), what: 'order 2 point (0, -1) with the sign bit set' });
  return out;
}

/** The compact JWS signature R = identity, S = 0: it verifies against a small-order key [k]A = identity. */
export function identitySignature(): string {
  return Buffer.concat([encode(1n, 0), Buffer.alloc(32)]).toString('base64url');
}
