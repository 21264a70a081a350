import { beforeAll, describe, expect, it } from 'vitest';
import { deny, isDenial, violationDenial, type Denial, type DenialCode } from '../../../src/errors.js';
import { readMessage, type McpMessage } from '../../../src/mcp/message.js';
import { ENVELOPE_META_KEY, presentMcpDenial, type RpcContext } from '../../../src/mcp/present.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import type { Policy } from '../../../src/policy/types.js';

const policyText = (extra: string) => `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
${extra}
mcp:
  - path: /mcp
    session: billing.mcp
    tools: [{ name: refund }]
    prompts: [{ name: summarize }]
    resources: [{ uri: "invoice://{id}", capability: invoice.read }]
`;

let plain: Policy;
let aware: Policy;
let awareWithRequests: Policy;
beforeAll(async () => {
  plain = await loadPolicyText(policyText(''), 'p.yaml');
  aware = await loadPolicyText(policyText('constraintAware: true'), 'p.yaml');
  awareWithRequests = await loadPolicyText(policyText('constraintAware: true\naccessRequests: { ttl: 5m }'), 'p.yaml');
});

/** The message as the sidecar reads it (from the real policy). */
function message(policy: Policy, method: string, params: Record<string, unknown>, permissionTool = false): McpMessage {
  const route = policy.routes.find((r) => r.kind === 'capability' && r.mcp);
  if (route?.kind !== 'capability' || !route.mcp) throw new Error('no MCP server');
  const m = readMessage(route.mcp, { jsonrpc: '2.0', id: 4, method, params }, permissionTool);
  if (isDenial(m)) throw new Error(m.message);
  return m;
}
const refundCall = (p: Policy) => message(p, 'tools/call', { name: 'refund', arguments: { amount: 500 } });
const violation = violationDenial([{ field: 'amount', constraint: 'max', expected: 100, actual: 500, message: 'amount 500 is greater than 100' }]);

describe('presentMcpDenial: JSON-RPC errors', () => {
  const CODES: [DenialCode, number][] = [
    ['invalid_body', -32600],
    ['unknown_mcp_method', -32601],
    ['unknown_tool', -32602],
    ['capability_denied', -32010],
    ['constraint_violated', -32011],
    ['approval_not_needed', -32012],
    ['not_found', -32013],
    ['access_request_limit', -32014],
  ];
  it.each(CODES)('%s -> HTTP 200, JSON-RPC error %i, the denial body as data', (code, rpcCode) => {
    const d = deny(code, 'why');
    const p = presentMcpDenial(plain, { id: 'r-1', message: undefined }, 'refund', undefined, d);
    expect(p).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 'r-1', error: { code: rpcCode, message: `${code}: why`, data: { error: code, message: 'why' } } },
    });
  });

  it('keeps the id as sent (0, a string) and the violations in data', () => {
    const p = presentMcpDenial(plain, { id: 0, message: refundCall(plain) }, 'refund', { amount: { max: 100 } }, violation);
    expect(p?.body).toMatchObject({ id: 0, error: { code: -32011, data: { error: 'constraint_violated', violations: violation.violations } } });
  });

  it("merges a denial's extra body members into data", () => {
    const d: Denial = { ...deny('not_found', 'no such request'), extra: { body: { status_url: '/x' } } };
    expect(presentMcpDenial(plain, { id: 1, message: undefined }, undefined, undefined, d)?.body).toMatchObject({
      error: { data: { error: 'not_found', status_url: '/x' } },
    });
  });

  it('answers nothing (an HTTP error) when the id is undefined: a notification or an unread body', () => {
    for (const code of ['invalid_body', 'unknown_tool', 'capability_denied', 'constraint_violated'] as const) {
      expect(presentMcpDenial(plain, { id: undefined, message: undefined }, 'refund', undefined, deny(code, 'x'))).toBeUndefined();
      expect(presentMcpDenial(aware, { id: undefined, message: refundCall(aware) }, 'refund', undefined, deny(code, 'x'))).toBeUndefined();
    }
  });

  it.each([
    'token_invalid',
    'token_missing',
    'token_replayed',
    'body_too_large',
    'replay_store_unavailable',
    'batch_refused',
    'internal_error',
    'upstream_unavailable',
  ] as const)('%s stays an HTTP error, even with an id and in constraint-aware mode', (code) => {
    expect(presentMcpDenial(plain, { id: 1, message: undefined }, 'refund', undefined, deny(code, 'x'))).toBeUndefined();
    expect(presentMcpDenial(aware, { id: 1, message: refundCall(aware) }, 'refund', undefined, deny(code, 'x'))).toBeUndefined();
  });
});

describe('presentMcpDenial: constraint-aware mode', () => {
  it('a refused tool call is an isError tool result: guidance and envelope as text, the envelope under _meta, no structuredContent', () => {
    const rpc: RpcContext = { id: 4, message: refundCall(aware) };
    const p = presentMcpDenial(aware, rpc, 'refund', { amount: { max: 100 } }, violation);
    expect(p?.status).toBe(200);
    const body = p?.body as { jsonrpc: string; id: number; result: Record<string, unknown>; error?: unknown };
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 4 });
    expect(body.error).toBeUndefined();
    const { content, isError, _meta, structuredContent } = body.result as {
      content: { type: string; text: string }[];
      isError: boolean;
      _meta: Record<string, Record<string, unknown>>;
      structuredContent?: unknown;
    };
    expect(isError).toBe(true);
    expect(structuredContent).toBeUndefined();
    const envelope = _meta[ENVELOPE_META_KEY];
    expect(envelope).toMatchObject({
      success: false,
      permission: 'constraint_violated',
      violations: violation.violations,
      capability: 'refund',
      activeConstraints: { amount: { max: 100 } },
      error: 'constraint_violated',
    });
    expect(content).toHaveLength(2);
    expect(content.every((c) => c.type === 'text')).toBe(true);
    expect(content[0]?.text).toBe(envelope?.guidance);
    expect(JSON.parse(content[1]?.text ?? '')).toEqual(envelope);
    expect(content[0]?.text).toContain('amount 500 is greater than 100');
    expect(content[0]?.text).toContain('Approval requests are not available');
  });

  it('the guidance offers the request_permission tool when access requests are on', () => {
    const p = presentMcpDenial(awareWithRequests, { id: 4, message: refundCall(awareWithRequests) }, 'refund', { amount: { max: 100 } }, violation);
    const text = (p?.body as { result: { content: { text: string }[] } }).result.content[0]?.text;
    expect(text).toContain('call the tool "request_permission" with {"tool": "refund"');
  });

  it('capability_denied of a tool is a tool result too; empty active constraints are left out', () => {
    const p = presentMcpDenial(aware, { id: 4, message: refundCall(aware) }, 'refund', {}, deny('capability_denied', 'no active grant'));
    const envelope = (p?.body as { result: { _meta: Record<string, Record<string, unknown>> } }).result._meta[ENVELOPE_META_KEY];
    expect(envelope).toMatchObject({ success: false, permission: 'denied', error: 'capability_denied', capability: 'refund' });
    expect(envelope).not.toHaveProperty('activeConstraints');
  });

  it('a refused request_permission call is a tool result as well', () => {
    const m = message(awareWithRequests, 'tools/call', { name: 'request_permission', arguments: {} }, true);
    const p = presentMcpDenial(awareWithRequests, { id: 4, message: m }, 'request_permission', undefined, deny('approval_not_needed', 'within limits'));
    expect(p?.body).toMatchObject({ id: 4, result: { isError: true, _meta: { [ENVELOPE_META_KEY]: { error: 'approval_not_needed' } } } });
  });

  it('prompts, resources, session messages and an unread message get the JSON-RPC error, the envelope as its data', () => {
    const cases: [McpMessage | undefined, string][] = [
      [message(aware, 'prompts/get', { name: 'summarize' }), 'summarize'],
      [message(aware, 'resources/read', { uri: 'invoice://a' }), 'invoice.read'],
      [message(aware, 'ping', {}), 'billing.mcp'],
      [undefined, 'refund'],
    ];
    for (const [m, capability] of cases) {
      const p = presentMcpDenial(aware, { id: 4, message: m }, capability, { id: { in: ['a'] } }, deny('capability_denied', 'no'));
      const envelope = { success: false, permission: 'denied', capability, activeConstraints: { id: { in: ['a'] } }, error: 'capability_denied' };
      expect(p?.body, `${m?.kind} ${capability}`).toMatchObject({ id: 4, error: { code: -32010, message: 'capability_denied: no', data: envelope } });
      const data = (p?.body as { error: { data: { guidance: string } } }).error.data;
      expect(data.guidance).toContain(`You may not call ${capability}`);
    }
  });

  it('without a capability (refused before one was known) the data is the plain denial body', () => {
    for (const m of [refundCall(aware), undefined]) {
      const p = presentMcpDenial(aware, { id: 4, message: m }, undefined, undefined, deny('invalid_body', 'bad'));
      expect(p?.body).toEqual({
        jsonrpc: '2.0',
        id: 4,
        error: { code: -32600, message: 'invalid_body: bad', data: { error: 'invalid_body', message: 'bad' } },
      });
    }
  });

  it('outside constraint-aware mode a refused tool call is a JSON-RPC error with the plain denial body', () => {
    const p = presentMcpDenial(plain, { id: 4, message: refundCall(plain) }, 'refund', { amount: { max: 100 } }, violation);
    expect(p?.body).toEqual({
      jsonrpc: '2.0',
      id: 4,
      error: {
        code: -32011,
        message: `constraint_violated: ${violation.message}`,
        data: { error: 'constraint_violated', message: violation.message, violations: violation.violations },
      },
    });
  });
});
