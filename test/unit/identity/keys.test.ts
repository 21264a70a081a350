import { createPrivateKey, sign, type JsonWebKey } from 'node:crypto';
import { calculateJwkThumbprint, compactVerify, importJWK, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { generateAgentKeyPair, importAgentKey, thumbprintOf } from '../../../src/identity/keys.js';

// RFC 8037, appendix A.1, A.3 and A.4.
const RFC_X = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo';
const RFC_D = 'nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A';
const RFC_PUBLIC = { kty: 'OKP', crv: 'Ed25519', x: RFC_X };
const RFC_THUMBPRINT = 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k';
const RFC_SIGNING_INPUT = 'eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc';
const RFC_SIGNATURE = 'hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg';
const RFC_JWS = `${RFC_SIGNING_INPUT}.${RFC_SIGNATURE}`;

describe('RFC 8037 test vectors', () => {
  it('computes the RFC 7638 thumbprint of the example key (A.3)', async () => {
    expect(await thumbprintOf(RFC_PUBLIC)).toBe(RFC_THUMBPRINT);
  });

  it('ignores optional members when computing the thumbprint', async () => {
    expect(await thumbprintOf({ ...RFC_PUBLIC, kid: 'k1', use: 'sig', alg: 'EdDSA' })).toBe(RFC_THUMBPRINT);
  });

  it('verifies the example JWS with the imported key (A.4)', async () => {
    const key = await importAgentKey(RFC_PUBLIC);
    const { payload, protectedHeader } = await compactVerify(RFC_JWS, key, { algorithms: ['EdDSA'] });
    expect(new TextDecoder().decode(payload)).toBe('Example of Ed25519 signing');
    expect(protectedHeader).toEqual({ alg: 'EdDSA' });
  });

  it('reproduces the example signature from the private key (Ed25519 is deterministic)', () => {
    const key = createPrivateKey({ key: { ...RFC_PUBLIC, d: RFC_D } as JsonWebKey, format: 'jwk' });
    expect(sign(null, Buffer.from(RFC_SIGNING_INPUT), key).toString('base64url')).toBe(RFC_SIGNATURE);
  });

  it('refuses the example JWS once its payload is altered', async () => {
    const key = await importAgentKey(RFC_PUBLIC);
    const altered = `eyJhbGciOiJFZERTQSJ9.${Buffer.from('Example of Ed25519 signinG').toString('base64url')}.${RFC_SIGNATURE}`;
    await expect(compactVerify(altered, key, { algorithms: ['EdDSA'] })).rejects.toThrow();
  });
});

describe('importAgentKey', () => {
  it('accepts a public key with optional members', async () => {
    await expect(importAgentKey({ ...RFC_PUBLIC, kid: 'k', use: 'sig', alg: 'EdDSA' })).resolves.toBeDefined();
  });

  it('refuses a private key ("d" present)', async () => {
    await expect(importAgentKey({ ...RFC_PUBLIC, d: RFC_D })).rejects.toThrow(/private key/);
  });

  it.each([
    ['crv X25519', { kty: 'OKP', crv: 'X25519', x: RFC_X }],
    ['crv Ed448', { kty: 'OKP', crv: 'Ed448', x: RFC_X }],
    ['kty EC', { kty: 'EC', crv: 'Ed25519', x: RFC_X }],
    ['no x', { kty: 'OKP', crv: 'Ed25519' }],
    ['x not a string', { kty: 'OKP', crv: 'Ed25519', x: 5 }],
  ])('refuses %s', async (_name, jwk) => {
    await expect(importAgentKey(jwk)).rejects.toThrow(/Ed25519/);
  });

  it.each([
    ['31 bytes', Buffer.alloc(31, 1).toString('base64url')],
    ['33 bytes', Buffer.alloc(33, 1).toString('base64url')],
    ['padded', `${RFC_X}=`],
    ['standard base64 alphabet', Buffer.from(RFC_X, 'base64url').toString('base64')],
    ['empty', ''],
  ])('refuses x of the wrong form: %s', async (_name, x) => {
    await expect(importAgentKey({ kty: 'OKP', crv: 'Ed25519', x })).rejects.toThrow(/32 bytes/);
  });
});

describe('generateAgentKeyPair', () => {
  it('returns a usable pair whose public half has no private material', async () => {
    const pair = await generateAgentKeyPair();
    expect(pair.publicJwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
    expect(pair.publicJwk).not.toHaveProperty('d');
    expect(pair.privateJwk).toHaveProperty('d');
    expect(pair.privateJwk.x).toBe(pair.publicJwk.x);
    expect(pair.thumbprint).toBe(await thumbprintOf(pair.publicJwk as Record<string, unknown>));
    await expect(importAgentKey(pair.publicJwk as Record<string, unknown>)).resolves.toBeDefined();
  });

  it('gives what jose computes and accepts: the same thumbprint, and a private key jose signs with (the oracle)', async () => {
    for (let i = 0; i < 20; i++) {
      const pair = await generateAgentKeyPair();
      expect(pair.thumbprint).toBe(await calculateJwkThumbprint(pair.publicJwk, 'sha256'));
      const jws = await new SignJWT({}).setProtectedHeader({ alg: 'EdDSA' }).sign(await importJWK(pair.privateJwk, 'EdDSA'));
      await expect(compactVerify(jws, await importAgentKey(pair.publicJwk as Record<string, unknown>))).resolves.toBeDefined();
    }
  });

  it('returns a different key each time', async () => {
    const [a, b] = await Promise.all([generateAgentKeyPair(), generateAgentKeyPair()]);
    expect(a.thumbprint).not.toBe(b.thumbprint);
  });
});
