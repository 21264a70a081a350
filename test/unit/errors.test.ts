import { describe, expect, it } from 'vitest';
import { DENIAL_STATUS, DENIALS, deny, denialBody, guidanceFor, isDenial, outcomeOf, statusOf, type DenialCode } from '../../src/errors.js';

describe('denial status table', () => {
  it('gives every code an HTTP error status', () => {
    const codes = Object.keys(DENIAL_STATUS) as DenialCode[];
    expect(codes.length).toBeGreaterThan(0);
    for (const c of codes) {
      expect(Number.isInteger(statusOf(c)), c).toBe(true);
      expect(statusOf(c), c).toBeGreaterThanOrEqual(400);
      expect(statusOf(c), c).toBeLessThan(600);
    }
  });

  it.each([
    ['token_missing', 401],
    ['token_invalid', 401],
    ['token_expired', 401],
    ['token_replayed', 401],
    ['agent_not_found', 401],
    ['capability_denied', 403],
    ['constraint_violated', 403],
    ['unknown_route', 404],
    ['body_too_large', 413],
    ['unsupported_media_type', 415],
    ['upstream_unavailable', 502],
    ['replay_store_unavailable', 503],
    ['invalid_path', 400],
    ['invalid_query', 400],
    ['invalid_header', 400],
    ['invalid_body', 400],
    ['internal_error', 500],
  ] as const)('%s -> %i', (c, status) => {
    expect(statusOf(c)).toBe(status);
  });

  it('answers 401 for every token_* code', () => {
    const tokenCodes = (Object.keys(DENIAL_STATUS) as DenialCode[]).filter((c) => c.startsWith('token_'));
    expect(tokenCodes.length).toBeGreaterThanOrEqual(4);
    for (const c of tokenCodes) expect(statusOf(c), c).toBe(401);
  });
});

describe('deny / isDenial / denialBody', () => {
  it('builds a denial and recognises it', () => {
    const d = deny('invalid_path', 'bad');
    expect(d).toEqual({ denied: true, code: 'invalid_path', message: 'bad' });
    expect(isDenial(d)).toBe(true);
    expect(isDenial({ path: '/' })).toBe(false);
    expect(isDenial(null)).toBe(false);
    expect(isDenial(new Map())).toBe(false);
  });

  it('puts violations in the body only when there are some', () => {
    const v = { field: 'amount', constraint: 'max' as const, expected: 10, actual: 20, message: 'amount must be <= 10, got 20' };
    expect(denialBody(deny('constraint_violated', 'no', [v]))).toEqual({ error: 'constraint_violated', message: 'no', violations: [v] });
    expect(denialBody(deny('token_missing', 'none'))).toEqual({ error: 'token_missing', message: 'none' });
    expect(denialBody(deny('token_missing', 'none'))).not.toHaveProperty('violations');
  });
});

describe('the denial catalogue', () => {
  it('holds the admin and socket codes too, each with its own status, outside the agent-port table', () => {
    expect(DENIALS.admin_disabled).toMatchObject({ status: 403, where: 'admin' });
    expect(DENIALS.unauthorized).toMatchObject({ status: 401, where: 'admin' });
    expect(DENIALS.too_many_attempts).toMatchObject({ status: 429, where: 'admin' });
    expect(DENIALS.request_timeout).toMatchObject({ status: 408, where: 'socket' });
    expect(DENIALS.invalid_request).toMatchObject({ status: 400, where: 'socket' });
    expect(Object.keys(DENIAL_STATUS)).not.toContain('admin_disabled');
    expect(Object.keys(DENIAL_STATUS)).toContain('shutting_down');
    for (const [code, f] of Object.entries(DENIALS)) if (f.where === 'call') expect(DENIAL_STATUS[code as keyof typeof DENIAL_STATUS], code).toBe(f.status);
  });

  it('says which codes are failures (error in the audit trail and metrics) and which are refusals', () => {
    const errors = (Object.keys(DENIALS) as DenialCode[]).filter((c) => outcomeOf(c) === 'error').sort();
    expect(errors).toEqual([
      'audit_unavailable',
      'client_closed_request',
      'internal_error',
      'overloaded',
      'replay_store_unavailable',
      'shutting_down',
      'upstream_unavailable',
    ]);
  });

  it('gives every code guidance a model can act on, naming the capability where it matters', () => {
    for (const code of Object.keys(DENIALS) as DenialCode[]) {
      const text = guidanceFor(deny(code, `msg of ${code}`), { capability: 'send_sms', requestPermission: false });
      expect(text.length, code).toBeGreaterThan(0);
    }
    expect(guidanceFor(deny('capability_denied', 'no grant'), { capability: 'send_sms', requestPermission: false })).toContain('send_sms');
  });

  it("carries extra body members and headers of a denial (a pending request's status URL) into the body", () => {
    const d = { ...deny('shutting_down', 'bye'), extra: { body: { statusUrl: '/agent/request-permission/ar_1' } } };
    expect(denialBody(d)).toEqual({ error: 'shutting_down', message: 'bye', statusUrl: '/agent/request-permission/ar_1' });
  });
});
