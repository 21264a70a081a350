/**
 * The Ed25519 signature check every token goes through. libsodium
 * (sodium-native's prebuilt binary) verifies in about 44 µs where node:crypto
 * takes about 100 µs on the same machine, on Node 20 and 24 alike (measured:
 * docs/design/benchmarks.md); it also refuses small-order keys and R values
 * and non-canonical S by design. Where the binary cannot load (musl, an old
 * glibc) node:crypto does the same check: keys are vetted on import either way
 * (identity/ed25519.ts), so the two agree on every token (tested with both).
 */
import { createRequire } from 'node:module';
import { verify as nodeVerify, type KeyObject } from 'node:crypto';

export interface Ed25519Verifier {
  readonly name: 'libsodium' | 'node:crypto' | 'node:crypto on the thread pool';
  /** True when `signature` (exactly 64 bytes) is `key`'s signature of `message`. */
  verify(this: void, message: Buffer, signature: Buffer, key: KeyObject): boolean;
  /** The same check off the event loop, where this verifier has one (agent tokens use it: one per call). */
  verifyAsync?(this: void, message: Buffer, signature: Buffer, key: KeyObject): Promise<boolean>;
}

interface Sodium {
  crypto_sign_verify_detached(signature: Buffer, message: Buffer, publicKey: Buffer): boolean;
}

const viaNode: Ed25519Verifier = {
  name: 'node:crypto',
  verify: (message, signature, key) => signature.length === 64 && nodeVerify(null, message, key, signature),
};

/**
 * node:crypto's check on libuv's thread pool (the callback form of verify):
 * the event loop only hands the bytes over, so a sidecar given two cores
 * serves more calls, at about twice libsodium's CPU per verify (measured:
 * docs/design/benchmarks.md). For pods with more than one CPU to spend.
 */
const onPool: Ed25519Verifier = {
  name: 'node:crypto on the thread pool',
  verify: viaNode.verify,
  verifyAsync: (message, signature, key) =>
    signature.length !== 64
      ? Promise.resolve(false)
      : new Promise((resolve) => nodeVerify(null, message, key, signature, (err, ok) => resolve(err === null && ok))),
};

/** A key's 32 raw bytes, exported once per imported key. */
const rawKeys = new WeakMap<KeyObject, Buffer>();

function rawKey(key: KeyObject): Buffer {
  let raw = rawKeys.get(key);
  if (!raw) {
    raw = Buffer.from(String(key.export({ format: 'jwk' }).x), 'base64url');
    rawKeys.set(key, raw);
  }
  return raw;
}

function viaSodium(sodium: Sodium): Ed25519Verifier {
  return {
    name: 'libsodium',
    // Exact lengths: libsodium reads the first 64 bytes of a longer signature (Wycheproof's "signature with garbage").
    verify: (message, signature, key) => {
      if (signature.length !== 64) return false;
      const pk = rawKey(key);
      return pk.length === 32 && sodium.crypto_sign_verify_detached(signature, message, pk);
    },
  };
}

/** The verifier to use: libsodium unless AGENTS_CHAIN_ED25519=node (or =pool: node:crypto off the event loop) or the binary does not load. */
export function loadVerifier(prefer = process.env.AGENTS_CHAIN_ED25519): { verifier: Ed25519Verifier; fallbackReason?: string } {
  if (prefer === 'node') return { verifier: viaNode };
  if (prefer === 'pool') return { verifier: onPool };
  try {
    const sodium = createRequire(import.meta.url)('sodium-native') as Sodium;
    return { verifier: viaSodium(sodium) };
  } catch (err) {
    return { verifier: viaNode, fallbackReason: (err as Error).message.split('\n')[0] };
  }
}

/** Chosen once, when the process first verifies; the log says which (sidecar/start.ts). */
export const ED25519 = loadVerifier();
