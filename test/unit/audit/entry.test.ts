import { describe, expect, it } from 'vitest';
import { entryHead, newEntryId, type AuditEntry } from '../../../src/audit/entry.js';

const base: AuditEntry = {
  id: 'e1',
  agentId: 'bot',
  agentName: 'Bot',
  capability: 'createInvoice',
  args: { a: 1 },
  result: 'success',
  jti: 'j1',
  timestamp: 1_764_470_000_000,
  durationMs: 3,
  method: 'POST',
  path: '/invoices',
  status: 200,
  requestId: 'r1',
};
const withoutArgs = ({ args: _args, ...rest }: AuditEntry) => rest;

describe('entryHead', () => {
  it('is the entry without its args, as JSON missing only the closing brace', () => {
    const entries: AuditEntry[] = [
      base,
      {
        ...base,
        agentId: null,
        agentName: null,
        capability: null,
        jti: null,
        result: 'denied',
        denialReason: 'constraint_violated',
        status: 403,
        permission: 'constraint_violated',
      },
      { ...base, upstreamStatus: 502, responseBytes: 0, result: 'error', event: 'forwarding' },
      { ...base, agentName: 'Zoë 🤖 "quoted" \\ back', path: '/a\u0000b\nc\u007f\u2028', requestId: 'ü' },
      { ...base, durationMs: Number.NaN, timestamp: Number.POSITIVE_INFINITY },
    ];
    for (const e of entries) {
      const head = entryHead(e);
      expect(JSON.parse(`${head}}`)).toEqual(JSON.parse(JSON.stringify(withoutArgs(e))));
    }
  });

  it('is ASCII whatever the entry holds, so the sealer can copy it byte for byte', () => {
    const head = entryHead({ ...base, agentName: 'Zoë 🤖', path: '/caf\u00e9', jti: '\ud800' });
    expect(head).toMatch(/^[\x20-\x7e]*$/);
    expect(JSON.parse(`${head}}`)).toMatchObject({ agentName: 'Zoë 🤖', path: '/caf\u00e9', jti: '\ud800' });
  });
});

describe('entryHead with a field missing at run time', () => {
  it('writes null, never the text "undefined" (an approval read back from a store is not type-checked)', () => {
    const e = { ...base, agentName: undefined } as unknown as AuditEntry;
    expect(JSON.parse(`${entryHead(e)}}`).agentName).toBeNull();
  });
});

describe('newEntryId', () => {
  it('is an RFC 9562 UUIDv8, distinct on every call', () => {
    const ids = Array.from({ length: 10_000 }, () => newEntryId());
    for (const id of ids.slice(0, 100)) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
