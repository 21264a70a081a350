import { describe, expect, it } from 'vitest';
import { extractToken, MAX_TOKEN_BYTES, tokenSent } from '../../../src/auth/extract.js';

const TOKEN = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhIn0.c2ln';

describe('extractToken from Authorization', () => {
  it('takes the token from "Bearer <token>"', () => {
    expect(extractToken(['Host', 'x', 'Authorization', `Bearer ${TOKEN}`], 'authorization')).toBe(TOKEN);
  });

  it('matches the scheme and the header name case-insensitively, with extra spaces', () => {
    expect(extractToken(['AUTHORIZATION', `bearer   ${TOKEN}`], 'Authorization')).toBe(TOKEN);
    expect(extractToken(['authorization', `BEARER ${TOKEN}`], 'authorization')).toBe(TOKEN);
  });

  it('answers token_missing when there is no header or it is empty', () => {
    expect(extractToken(['Host', 'x'], 'authorization')).toMatchObject({ denied: true, code: 'token_missing' });
    expect(extractToken([], 'authorization')).toMatchObject({ code: 'token_missing' });
    expect(extractToken(['Authorization', ''], 'authorization')).toMatchObject({ code: 'token_missing' });
    expect(extractToken(['Authorization', '   '], 'authorization')).toMatchObject({ code: 'token_missing' });
  });

  it('answers token_missing for another scheme', () => {
    expect(extractToken(['Authorization', 'Basic dXNlcjpwYXNz'], 'authorization')).toMatchObject({ code: 'token_missing' });
    expect(extractToken(['Authorization', TOKEN], 'authorization')).toMatchObject({ code: 'token_missing' });
    expect(extractToken(['Authorization', 'Bearer'], 'authorization')).toMatchObject({ code: 'token_missing' });
  });

  it.each([
    ['same case', ['Authorization', `Bearer ${TOKEN}`, 'Authorization', `Bearer ${TOKEN}`]],
    ['different case', ['Authorization', `Bearer ${TOKEN}`, 'authorization', 'Bearer other']],
    ['separated by other headers', ['AUTHORIZATION', `Bearer ${TOKEN}`, 'Host', 'x', 'authorization', `Bearer ${TOKEN}`]],
    ['second one not a bearer', ['Authorization', `Bearer ${TOKEN}`, 'Authorization', 'Basic eA==']],
  ])('answers token_invalid for two Authorization headers (%s)', (_name, raw) => {
    expect(extractToken(raw, 'authorization')).toMatchObject({ denied: true, code: 'token_invalid' });
  });

  it('answers token_invalid for two Authorization headers when the first is empty', () => {
    expect(extractToken(['Authorization', '', 'Authorization', `Bearer ${TOKEN}`], 'authorization')).toMatchObject({
      code: 'token_invalid',
    });
  });

  it('answers token_invalid for two Authorization headers when the last is empty', () => {
    expect(extractToken(['Authorization', `Bearer ${TOKEN}`, 'Authorization', ''], 'authorization')).toMatchObject({
      code: 'token_invalid',
    });
  });

  it('accepts a token of exactly the maximum length', () => {
    const t = 'a'.repeat(MAX_TOKEN_BYTES);
    expect(MAX_TOKEN_BYTES).toBe(4096);
    expect(extractToken(['Authorization', `Bearer ${t}`], 'authorization')).toBe(t);
  });

  it('accepts a maximum-length token whatever the spacing after "Bearer"', () => {
    const t = 'a'.repeat(MAX_TOKEN_BYTES);
    expect(extractToken(['Authorization', `bearer   ${t}`], 'authorization')).toBe(t);
  });

  it('answers token_invalid for a token longer than 4096 characters', () => {
    const t = 'a'.repeat(MAX_TOKEN_BYTES + 1);
    expect(extractToken(['Authorization', `Bearer ${t}`], 'authorization')).toMatchObject({ code: 'token_invalid' });
    expect(extractToken(['Authorization', `Bearer ${'a'.repeat(100_000)}`], 'authorization')).toMatchObject({ code: 'token_invalid' });
  });
});

describe('extractToken from a custom header', () => {
  it('accepts a raw token', () => {
    expect(extractToken(['X-Agent-Token', TOKEN], 'x-agent-token')).toBe(TOKEN);
    expect(extractToken(['x-agent-token', `  ${TOKEN}  `], 'X-Agent-Token')).toBe(TOKEN);
  });

  it('also accepts "Bearer <token>"', () => {
    expect(extractToken(['X-Agent-Token', `Bearer ${TOKEN}`], 'x-agent-token')).toBe(TOKEN);
  });

  it('ignores Authorization when another header is configured', () => {
    expect(extractToken(['Authorization', `Bearer ${TOKEN}`], 'x-agent-token')).toMatchObject({ code: 'token_missing' });
  });

  it('answers token_invalid for a value with inner whitespace, a repeat, or an oversized token', () => {
    expect(extractToken(['X-Agent-Token', 'Basic abc'], 'x-agent-token')).toMatchObject({ code: 'token_invalid' });
    expect(extractToken(['X-Agent-Token', TOKEN, 'x-agent-token', TOKEN], 'x-agent-token')).toMatchObject({ code: 'token_invalid' });
    expect(extractToken(['X-Agent-Token', 'a'.repeat(MAX_TOKEN_BYTES + 1)], 'x-agent-token')).toMatchObject({ code: 'token_invalid' });
  });
});

describe('tokenSent (Envoy allow_missing)', () => {
  it('counts a Bearer credential, even malformed, and a repeated header as sent; no header or another scheme as not sent', () => {
    expect(tokenSent([], 'authorization')).toBe(false);
    expect(tokenSent(['Authorization', 'Basic dXNlcjpwYXNz'], 'authorization')).toBe(false);
    expect(tokenSent(['Authorization', ''], 'authorization')).toBe(false);
    expect(tokenSent(['Authorization', 'Bearer a, Bearer b'], 'authorization')).toBe(true);
    expect(tokenSent(['authorization', 'bearer'], 'authorization')).toBe(true);
    expect(tokenSent(['Authorization', 'Basic x', 'authorization', 'Basic y'], 'authorization')).toBe(true);
    expect(tokenSent(['X-Agent-Token', 'abc'], 'x-agent-token')).toBe(true);
    expect(tokenSent(['X-Agent-Token', ' '], 'x-agent-token')).toBe(false);
  });
});
