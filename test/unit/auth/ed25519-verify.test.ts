import { createPrivateKey, createPublicKey, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ED25519, loadVerifier } from '../../../src/auth/ed25519-verify.js';
import { generateAgentKeyPair, importAgentKey } from '../../../src/identity/keys.js';
import { identitySignature, smallOrderPoints } from '../../support/ed25519.js';

const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const sodium = loadVerifier('libsodium');
const node = loadVerifier('node');
const pool = loadVerifier('pool');

/** S + L in place of S: the same point equation, a second spelling of the signature (malleability). */
function withSPlusL(signature: Buffer): Buffer {
  let s = 0n;
  for (let i = 31; i >= 0; i--) s = (s << 8n) | BigInt(signature[32 + i]!);
  let t = s + L;
  const out = Buffer.from(signature);
  for (let i = 0; i < 32; i++) {
    out[32 + i] = Number(t & 0xffn);
    t >>= 8n;
  }
  return out;
}

describe('the Ed25519 verifier', () => {
  it('is libsodium here (the prebuilt binary for linux-x64 glibc), node:crypto on request, and the process uses libsodium', () => {
    expect(sodium.verifier.name).toBe('libsodium');
    expect(sodium.fallbackReason).toBeUndefined();
    expect(node.verifier.name).toBe('node:crypto');
    expect(ED25519.verifier.name).toBe(process.env.AGENTS_CHAIN_ED25519 === 'node' ? 'node:crypto' : 'libsodium');
    expect(pool.verifier.name).toBe('node:crypto on the thread pool');
    expect(sodium.verifier.verifyAsync).toBeUndefined(); // the agent token's check stays on the event loop
  });

  it('both accept a good signature and refuse a changed message, a flipped bit, a short, an over-long (garbage) and an S + L signature', async () => {
    const keys = await generateAgentKeyPair();
    const key = await importAgentKey(keys.publicJwk as Record<string, unknown>);
    const message = Buffer.from('eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhIn0');
    const good = sign(null, message, createPrivateKey({ key: keys.privateJwk as never, format: 'jwk' }));
    const flipped = Buffer.from(good);
    flipped[10]! ^= 1;
    for (const { verifier } of [sodium, node]) {
      expect(verifier.verify(message, good, key), verifier.name).toBe(true);
      expect(verifier.verify(Buffer.from('other'), good, key), verifier.name).toBe(false);
      expect(verifier.verify(message, flipped, key), verifier.name).toBe(false);
      expect(verifier.verify(message, good.subarray(0, 63), key), verifier.name).toBe(false);
      expect(verifier.verify(message, Buffer.concat([good, Buffer.from([0])]), key), verifier.name).toBe(false);
      expect(verifier.verify(message, withSPlusL(good), key), verifier.name).toBe(false);
    }
    // Off the event loop: the same answers.
    const check = pool.verifier.verifyAsync!;
    expect(await check(message, good, key)).toBe(true);
    for (const bad of [flipped, good.subarray(0, 63), Buffer.concat([good, Buffer.from([0])]), withSPlusL(good)])
      expect(await check(message, bad, key)).toBe(false);
    expect(await check(Buffer.from('other'), good, key)).toBe(false);
  });

  it('libsodium refuses the identity forgery against every small-order key (which the importer refuses anyway)', () => {
    const forged = Buffer.from(identitySignature(), 'base64url');
    for (const { encoding } of smallOrderPoints()) {
      const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: encoding.toString('base64url') }, format: 'jwk' });
      for (let i = 0; i < 16; i++) expect(sodium.verifier.verify(Buffer.from(`m-${i}`), forged, key)).toBe(false);
    }
  });
});
