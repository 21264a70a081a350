import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestAgent } from '../support/fixture.js';
import { call, type Reply } from '../support/http.js';
import { ADMIN_TOKEN, startApprovalEnv, type ApprovalEnv } from '../support/approvals.js';
import { REDIS_URL, testPrefix } from '../support/redis.js';
import { until } from '../support/until.js';
import type { SidecarOptions } from '../../src/sidecar/start.js';

/** A call signed by `bot` for the audience `aud`. */
async function callAs(
  env: ApprovalEnv,
  bot: TestAgent,
  opts: { method?: string; path: string; aud: string; body?: unknown; headers?: Record<string, string> },
): Promise<Reply> {
  const { aud, ...rest } = opts;
  return call(env, { ...rest, token: await bot.signer.sign(aud) });
}

const sendSms = (env: ApprovalEnv, to: string, bot = env.bot) =>
  callAs(env, bot, { method: 'POST', path: '/sms', aud: 'send_sms', body: { to, body: 'hello' } });
const askPermission = (env: ApprovalEnv, to: string, bot = env.bot, headers: Record<string, string> = {}) =>
  callAs(env, bot, {
    method: 'POST',
    path: '/agent/request-permission',
    aud: 'request_permission',
    headers,
    body: { capability: 'send_sms', args: { to, body: 'User asked me to notify this number' }, reason: 'The user explicitly asked for this number' },
  });

describe('context-aware mode and human approval (the send_sms story)', () => {
  let env: ApprovalEnv;
  beforeAll(async () => {
    env = await startApprovalEnv({ agents: 5 });
  });
  afterAll(async () => {
    await env.close();
  });

  it('violation → request_permission → approve (scope value) → executed → next call passes untouched', async () => {
    const seen = env.app.requests.length;
    const denied = await sendSms(env, '+9999999');
    expect(denied.status).toBe(403);
    expect(denied.json).toMatchObject({
      success: false,
      permission: 'constraint_violated',
      capability: 'send_sms',
      error: 'constraint_violated',
      violations: [{ field: 'to', constraint: 'in', expected: ['+254700000001', '+254700000002'], actual: '+9999999' }],
      activeConstraints: { to: { in: ['+254700000001', '+254700000002'] } },
    });
    expect(denied.json.guidance).toContain('request_permission');
    expect(env.app.requests.length).toBe(seen);

    const waiting = askPermission(env, '+9999999');
    const note = await env.inbox.nextRequest();
    expect(note).toMatchObject({ agentId: env.bot.id, capability: 'send_sms', args: { to: '+9999999' }, reason: 'The user explicitly asked for this number' });
    expect(env.app.requests.length).toBe(seen); // nothing runs before a human decides

    const approved = await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code, scope: 'value' });
    expect(approved.status).toBe(200);
    expect(approved.json.state).toBe('approved');

    const result = await waiting;
    expect(result.status).toBe(200);
    expect(result.json).toMatchObject({
      success: true,
      permission: 'approved',
      capability: 'send_sms',
      grant: { requestId: note.requestId, scope: 'value', values: { to: '+9999999' } },
      result: { sent: true, path: '/sms', by: env.bot.id, permission: 'approved' },
    });
    const executed = env.app.requests.at(-1)!;
    expect(JSON.parse(executed.body.toString())).toEqual({ to: '+9999999', body: 'User asked me to notify this number' });
    expect(executed.headers['x-agent-capability']).toBe('send_sms');

    const again = await sendSms(env, '+9999999');
    expect(again.status).toBe(200);
    expect(again.headers['agent-permission']).toBe('not_required');
    expect(again.json.sent).toBe(true);

    // The value approval is listed and revocable; after revocation the value is refused again.
    const grants = await env.admin('GET', '/approvals/grants');
    const grant = grants.json.grants.find((g: any) => g.requestId === note.requestId);
    expect(grant).toMatchObject({ agentId: env.bot.id, capability: 'send_sms', values: { to: '+9999999' } });
    // Times in RFC 3339, like every other admin answer.
    expect(grant.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(grant.expiresAt)).toBeGreaterThan(Date.parse(grant.createdAt));
    expect((await env.admin('DELETE', `/approvals/grants/${grant.id}`)).status).toBe(200);
    expect((await sendSms(env, '+9999999')).status).toBe(403);
  });

  it('scope once: the approved call runs, the next one with the same value is refused again', async () => {
    const waiting = askPermission(env, '+1111111');
    const note = await env.inbox.nextRequest();
    expect((await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code })).status).toBe(200);
    expect((await waiting).json.grant.scope).toBe('once');
    expect((await sendSms(env, '+1111111')).json.permission).toBe('constraint_violated');
  });

  it('deny: the agent gets permission denied with the human reason; nothing reaches the app', async () => {
    const seen = env.app.requests.length;
    const waiting = askPermission(env, '+2222222');
    const note = await env.inbox.nextRequest();
    expect((await env.admin('POST', `/approvals/${note.requestId}/deny`, { code: note.code, reason: 'not a customer number' })).status).toBe(200);
    const r = await waiting;
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ success: false, permission: 'denied', reason: 'not a customer number', capability: 'send_sms' });
    expect(env.app.requests.length).toBe(seen);
  });

  it('a wrong code neither resolves nor burns the request; then a code cannot be used twice', async () => {
    const waiting = askPermission(env, '+3333333');
    const note = await env.inbox.nextRequest();
    const wrong = await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: 'WRONGCODE1' });
    expect(wrong.status).toBe(403);
    expect(wrong.json.error).toBe('invalid_code');
    expect((await env.admin('GET', `/approvals/${note.requestId}`)).json.state).toBe('pending');
    expect((await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code })).status).toBe(200);
    await waiting;
    const reuse = await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code });
    expect(reuse.status).toBe(409);
    expect(reuse.json.error).toBe('already_resolved');
    expect((await env.admin('POST', `/approvals/${note.requestId}/deny`, { code: note.code })).status).toBe(409);
  });

  it('rate-limits wrong codes', async () => {
    const waiting = askPermission(env, '+3334444', env.bot, { prefer: 'respond-async' });
    const { json } = await waiting;
    await env.inbox.nextRequest();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await env.admin('POST', `/approvals/${json.requestId}/approve`, { code: `BAD${i}` })).status);
    expect(statuses).toEqual([403, 403, 403, 403, 403, 429]);
  });

  it('two approvals at once resolve the request once', async () => {
    const waiting = askPermission(env, '+3335555');
    const note = await env.inbox.nextRequest();
    const both = await Promise.all([
      env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code }),
      env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code }),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    expect((await waiting).status).toBe(200);
  });

  it('Prefer: respond-async answers 202 and the status URL reports the outcome', async () => {
    const accepted = await askPermission(env, '+4444444', env.bot, { prefer: 'respond-async' });
    expect(accepted.status).toBe(202);
    expect(accepted.json).toMatchObject({ status: 'pending', statusUrl: `/agent/request-permission/${accepted.json.requestId}` });
    const note = await env.inbox.nextRequest();
    expect(note.requestId).toBe(accepted.json.requestId);
    const poll = () => callAs(env, env.bot, { path: accepted.json.statusUrl, aud: 'request_permission' });
    expect((await poll()).status).toBe(202);
    await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code });
    let final = await poll();
    await until(async () => (final = await poll()).status !== 202, 2_000); // the approved call runs, then the status says so
    expect(final.status).toBe(200);
    expect(final.json).toMatchObject({ permission: 'approved', result: { sent: true } });
    // Another agent cannot read it.
    expect((await callAs(env, env.bots[1]!, { path: accepted.json.statusUrl, aud: 'request_permission' })).status).toBe(404);
  });

  it('many agents can wait at once, each released by its own approval', async () => {
    const waits = env.bots.map((b, i) => askPermission(env, `+55500000${i}`, b));
    const notes = await Promise.all(env.bots.map(() => env.inbox.nextRequest()));
    expect((await env.admin('GET', '/approvals')).json.requests.length).toBeGreaterThanOrEqual(env.bots.length);
    for (const n of notes.reverse()) await env.admin('POST', `/approvals/${n.requestId}/approve`, { code: n.code });
    const results = await Promise.all(waits);
    expect(results.map((r) => r.status)).toEqual(env.bots.map(() => 200));
    expect(results.map((r) => r.json.result.by)).toEqual(env.bots.map((b) => b.id));
  });

  it('answers 409 approval_not_needed for a call within limits', async () => {
    const r = await askPermission(env, '+254700000001');
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ success: false, error: 'approval_not_needed', capability: 'send_sms' });
    expect(r.json.guidance).toContain('call send_sms directly');
  });

  it('needs a path for capabilities with parameters, and refuses a path of another capability', async () => {
    const body = (path?: string) => ({ capability: 'list_messages', args: {}, reason: 'need more', ...(path ? { path } : {}) });
    const ask = (b: unknown) => callAs(env, env.bot, { method: 'POST', path: '/agent/request-permission', aud: 'request_permission', body: b });
    expect((await ask(body('/messages/m-1'))).json.error).toBe('invalid_path');
    const accepted = await callAs(env, env.bot, {
      method: 'POST',
      path: '/agent/request-permission',
      aud: 'request_permission',
      body: body('/messages?limit=50'),
      headers: { prefer: 'respond-async' },
    });
    expect(accepted.status).toBe(202);
    const note = await env.inbox.nextRequest();
    expect(note.violations[0]).toMatchObject({ field: 'limit', constraint: 'max', actual: '50' });
    await env.admin('POST', `/approvals/${note.requestId}/deny`, { code: note.code });
  });

  it('keeps the admin API off the agent port and behind the admin token', async () => {
    const onAgentPort = await call(env, { path: '/approvals', token: await env.bot.signer.sign('send_sms') });
    expect(onAgentPort.status).toBe(404);
    expect(onAgentPort.json.error).toBe('unknown_route');
    expect((await env.admin('GET', '/approvals', undefined, 'wrong')).status).toBe(401);
    expect((await env.admin('GET', '/approvals', undefined, await env.bot.signer.sign('send_sms'))).status).toBe(401);
    const none = await call(env.adminUrl, { path: '/approvals' });
    expect(none.status).toBe(401);
    expect((await env.admin('GET', '/approvals', undefined, ADMIN_TOKEN)).status).toBe(200);
  });

  it("serves the caller's constraint context as text and JSON", async () => {
    const text = await call(env, { path: '/agent/constraints', token: await env.bot.signer.sign('constraint_context') });
    expect(text.status).toBe(200);
    expect(text.headers['content-type']).toMatch(/^text\/plain/);
    const body = text.text;
    expect(body).toContain('send_sms (POST /sms):\n      to: must be one of ["+254700000001", "+254700000002"]');
    const json = await callAs(env, env.bot, { path: '/agent/constraints', aud: 'constraint_context', headers: { accept: 'application/json' } });
    expect(json.json).toMatchObject({ agentId: env.bot.id, requestPermission: true, text: body });
    expect(json.json.capabilities.map((c: any) => c.capability)).toEqual(['get_message', 'list_messages', 'send_sms']);
    // A token for another audience is refused.
    expect((await callAs(env, env.bot, { path: '/agent/constraints', aud: 'send_sms' })).json.error).toBe('capability_denied');
  });
});

describe('approval expiry and a notifier that is down', () => {
  let env: ApprovalEnv;
  beforeAll(async () => {
    env = await startApprovalEnv({ ttl: '1s', webhookUrl: 'http://127.0.0.1:9/down' });
  });
  afterAll(async () => {
    await env.close();
  });

  it('expires an unanswered request: permission expired', async () => {
    const r = await askPermission(env, '+6666666');
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ success: false, permission: 'expired', capability: 'send_sms' });
  });

  it('keeps the request approvable when the notifier is down (new code through the admin API)', async () => {
    const accepted = await askPermission(env, '+7777777', env.bot, { prefer: 'respond-async' });
    const id = accepted.json.requestId;
    const listed = await env.admin('GET', '/approvals');
    expect(listed.json.requests.find((r: any) => r.id === id)).toMatchObject({ state: 'pending', agentId: env.bot.id });
    const reissued = await env.admin('POST', `/approvals/${id}/code`, {});
    expect(reissued.json.code).toMatch(/^[A-Z2-9]{10}$/);
    expect((await env.admin('POST', `/approvals/${id}/approve`, { code: reissued.json.code })).status).toBe(200);
  });
});

describe('envelope settings', () => {
  it('envelope: all wraps successful JSON answers; violationStatus 200 is honoured', async () => {
    const env = await startApprovalEnv({ envelope: 'all', violationStatus: 200 });
    try {
      const ok = await sendSms(env, '+254700000001');
      expect(ok.status).toBe(200);
      expect(ok.headers['agent-permission']).toBe('not_required');
      expect(ok.json).toMatchObject({ success: true, permission: 'not_required', capability: 'send_sms', result: { sent: true } });
      const bad = await sendSms(env, '+9');
      expect(bad.status).toBe(200);
      expect(bad.json).toMatchObject({ success: false, permission: 'constraint_violated' });
    } finally {
      await env.close();
    }
  });
});

describe('without constraintAware', () => {
  it('keeps the plain error body, with violations also as structuredViolations; no request_permission', async () => {
    const { startTestSidecar } = await import('../support/fixture.js');
    const { invoice } = await import('../support/http.js');
    const env = await startTestSidecar();
    try {
      const r = await call(env, { method: 'POST', path: '/invoices', token: await env.bot.signer.sign('createInvoice'), body: invoice({ amount: 5000 }) });
      expect(r.status).toBe(403);
      expect(Object.keys(r.json).sort()).toEqual(['error', 'message', 'structuredViolations', 'violations']);
      expect(r.json.structuredViolations).toEqual(r.json.violations);
      const ask = await call(env, { method: 'POST', path: '/agent/request-permission', token: await env.bot.signer.sign('request_permission'), body: '{}' });
      expect(ask.status).toBe(404);
      expect(ask.json.error).toBe('unknown_route');
      const ok = await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
      expect(ok.headers['agent-permission']).toBe('not_required');
    } finally {
      await env.close();
    }
  });
});

describe('what a human approves is what runs', () => {
  let env: ApprovalEnv;
  beforeAll(async () => {
    env = await startApprovalEnv();
  });
  afterAll(async () => {
    await env.close();
  });
  const ask = (body: unknown, headers: Record<string, string> = {}) =>
    callAs(env, env.bot, { method: 'POST', path: '/agent/request-permission', aud: 'request_permission', body, headers });

  it('GET capabilities take their arguments in "path" only', async () => {
    const r = await ask({ capability: 'list_messages', args: { limit: 500 }, reason: 'more' });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('invalid_body');
  });

  it('applies the normal request-shape rules to the planned call', async () => {
    expect((await ask({ capability: 'send_sms', path: '/sms?_method=DELETE', args: { to: '+1' }, reason: 'x' })).json.error).toBe('invalid_query');
    expect((await ask({ capability: 'send_sms', path: '/sms?to=%2B254700000001', args: { to: '+1' }, reason: 'x' })).json.error).toBe('invalid_query');
  });

  it.each(['To=%2B254700000001', 'to%00x=%2B254700000001', '%20to=%2B254700000001', '[to]x=%2B254700000001'])(
    'refuses a planned call whose query shadows an "args" field under another reading (%s), as a normal call',
    async (query) => {
      const r = await ask({ capability: 'send_sms', path: `/sms?${query}`, args: { to: '+1' }, reason: 'x' }, { prefer: 'respond-async' });
      expect(r.json.error).toBe('invalid_query');
    },
  );

  it('never remembers an absent field as an approved value', async () => {
    const accepted = await ask({ capability: 'send_sms', args: { body: 'no number' }, reason: 'x' }, { prefer: 'respond-async' });
    expect(accepted.status).toBe(202);
    const note = await env.inbox.nextRequest();
    await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code, scope: 'value' });
    const grants = (await env.admin('GET', '/approvals/grants')).json.grants;
    expect(grants.filter((g: any) => g.requestId === note.requestId)).toEqual([]);
    const later = await callAs(env, env.bot, { method: 'POST', path: '/sms', aud: 'send_sms', body: { body: 'still no number' } });
    expect(later.json.permission).toBe('constraint_violated');
  });

  it("runs the approved call with the caller's headers, and answers with Agent-Permission: approved", async () => {
    const waiting = ask({ capability: 'send_sms', args: { to: '+8888', body: 'b' }, reason: 'x' }, { 'user-agent': 'agent-sdk/1.0', 'accept-language': 'sw' });
    const note = await env.inbox.nextRequest();
    await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code });
    const r = await waiting;
    expect(r.headers['agent-permission']).toBe('approved');
    const executed = env.app.requests.at(-1)!;
    expect(executed.headers['user-agent']).toBe('agent-sdk/1.0');
    expect(executed.headers['accept-language']).toBe('sw');
    expect(executed.headers.prefer).toBeUndefined();
    expect(executed.headers.authorization).toBeUndefined();
  });

  it('a human denial carries no machine error code, and shows the active constraints', async () => {
    const waiting = ask({ capability: 'send_sms', args: { to: '+7', body: 'b' }, reason: 'x' });
    const note = await env.inbox.nextRequest();
    await env.admin('POST', `/approvals/${note.requestId}/deny`, { code: note.code, reason: 'no' });
    const r = await waiting;
    expect(r.json.error).toBeUndefined();
    expect(r.json.activeConstraints).toEqual({ to: { in: ['+254700000001', '+254700000002'] } });
  });
});

describe('accessRequests.ttl bounds', () => {
  it('refuses a ttl over 24h at load (an agent holds its request open)', async () => {
    const { loadPolicyText } = await import('../../src/policy/load.js');
    const { smsPolicy } = await import('../support/approvals.js');
    const { testAgent } = await import('../support/fixture.js');
    const text = smsPolicy([await testAgent('a')], { ttl: '25d', webhookUrl: 'http://127.0.0.1:9/x' });
    await expect(loadPolicyText(text, 'p.yaml')).rejects.toThrow(/accessRequests\.ttl: must be at most 24h/);
  });
});

const stores: [string, () => SidecarOptions['redis']][] = [
  ['memory', () => undefined],
  ['Redis', () => ({ url: REDIS_URL, prefix: testPrefix('absent-null') })],
];

describe.each(stores)('scope=value approvals never cover an absent field (%s store)', (_name, redis) => {
  let env: ApprovalEnv;
  beforeAll(async () => {
    env = await startApprovalEnv({ redis: redis() });
  });
  afterAll(async () => {
    await env.close();
  });
  const ask = (args: unknown) =>
    callAs(env, env.bot, {
      method: 'POST',
      path: '/agent/request-permission',
      aud: 'request_permission',
      body: { capability: 'send_sms', args, reason: 'x' },
      headers: { prefer: 'respond-async' },
    });
  const sms = (body: unknown) => callAs(env, env.bot, { method: 'POST', path: '/sms', aud: 'send_sms', body });

  it('an approved `to: null` lets `to: null` through, never a call that leaves `to` out', async () => {
    expect((await ask({ to: null, body: 'null number' })).status).toBe(202);
    const note = await env.inbox.nextRequest();
    expect((await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code, scope: 'value' })).status).toBe(200);
    const grants = (await env.admin('GET', '/approvals/grants')).json.grants;
    expect(grants.find((g: any) => g.requestId === note.requestId)).toMatchObject({ values: { to: null } });

    expect((await sms({ to: null, body: 'approved value' })).status).toBe(200);
    const seen = env.app.requests.length;
    const absent = await sms({ body: 'no number at all' });
    expect(absent.status).toBe(403);
    expect(absent.json.permission).toBe('constraint_violated');
    expect(absent.json.violations).toEqual([expect.objectContaining({ field: 'to', actual: null, absent: true })]);
    expect(env.app.requests.length).toBe(seen); // nothing reached the app
    // Asking for the absent call is a new request, not "approval not needed".
    const again = await ask({ body: 'no number at all' });
    expect(again.status).toBe(202);
    await env.inbox.nextRequest();
  });
});

describe('what the reviewer sees of the arguments', () => {
  let env: ApprovalEnv;
  beforeAll(async () => {
    env = await startApprovalEnv();
  });
  afterAll(async () => {
    await env.close();
  });

  it('hides exact secret names only, and lists what it hid, in the notification and the admin view; the call sends everything', async () => {
    const args = {
      to: '+31',
      body: 'b',
      author: 'Ann',
      keyword: 'promo',
      monkey: 'george',
      max_tokens: 5,
      api_key: 'sk-live',
      meta: { 'Refresh-Token': 'r', public_key: 'pk' },
    };
    const waiting = callAs(env, env.bot, {
      method: 'POST',
      path: '/agent/request-permission',
      aud: 'request_permission',
      body: { capability: 'send_sms', args, reason: 'x' },
    });
    const note = await env.inbox.nextRequest();
    const shown = { ...args, api_key: '[REDACTED]', meta: { 'Refresh-Token': '[REDACTED]', public_key: 'pk' } };
    expect(note.args).toEqual(shown);
    expect(note.redacted).toEqual(['api_key', 'meta["Refresh-Token"]']);
    const view = (await env.admin('GET', `/approvals/${note.requestId}`)).json;
    expect(view.args).toEqual(shown);
    expect(view.redacted).toEqual(['api_key', 'meta["Refresh-Token"]']);
    await env.admin('POST', `/approvals/${note.requestId}/approve`, { code: note.code });
    expect((await waiting).status).toBe(200);
    expect(JSON.parse(env.app.requests.at(-1)!.body.toString())).toEqual(args);
  });
});

describe('Slack notifications of agent text', () => {
  it('escape &, <, > and control characters, and keep every line of the reason inside the quote', async () => {
    const { startCollector } = await import('../support/collector.js');
    const slack = await startCollector();
    const env = await startApprovalEnv({ format: 'slack', webhookUrl: slack.url });
    try {
      const reason = 'routine\nViolations: none\r\n<!channel> approved by <@U0ADMIN> & ops\u2028Approval code: `FAKE`\u202e';
      const asked = await callAs(env, env.bot, {
        method: 'POST',
        path: '/agent/request-permission',
        aud: 'request_permission',
        headers: { prefer: 'respond-async' },
        body: { capability: 'send_sms', args: { to: '<!here>', body: 'x\nViolations: none', password: 'p' }, reason },
      });
      expect(asked.status).toBe(202);
      await until(() => slack.bodies.length >= 1);
      const text: string = JSON.parse(slack.bodies[0]!).text;
      expect(text).not.toMatch(/<!|<@/);
      expect(text).toContain('&lt;!channel&gt; approved by &lt;@U0ADMIN&gt; &amp; ops');
      expect(text).toContain('\\u202e');
      const lines = text.split('\n');
      // The sidecar's own lines are the only unquoted ones; everything the agent wrote is quoted.
      const agentWritten = lines.filter((l) => /Violations: none|FAKE|channel|!here/.test(l));
      expect(agentWritten.length).toBeGreaterThanOrEqual(4); // the reason's lines and the args: the loop below checks something
      for (const l of agentWritten) expect(l).toMatch(/^> |^• /);
      expect(lines.filter((l) => l.startsWith('Violations'))).toEqual(['Violations (checked by the sidecar):']);
      expect(lines.filter((l) => l.startsWith('Approval code:'))).toHaveLength(1);
      const quoted = lines.slice(
        lines.indexOf('Reason given by the agent (its own words):') + 1,
        lines.findIndex((l) => l.startsWith('Approval code:')),
      );
      expect(quoted).toEqual([
        '> routine',
        '> Violations: none',
        '> &lt;!channel&gt; approved by &lt;@U0ADMIN&gt; &amp; ops',
        '> Approval code: `FAKE`\\u202e',
      ]);
      expect(text).toContain('Hidden here as secrets (the approved call sends their real values): password');
    } finally {
      await env.close();
      await slack.close();
    }
  });
});

describe('the approvals API needs an admin token (library)', () => {
  it('startSidecar refuses a policy with accessRequests and no token, unless adminInsecureNoToken', async () => {
    const { loadPolicyText } = await import('../../src/policy/load.js');
    const { smsPolicy } = await import('../support/approvals.js');
    const { testAgent } = await import('../support/fixture.js');
    const { startSidecar } = await import('../../src/sidecar/start.js');
    const { createLogger } = await import('../../src/log.js');
    const policy = await loadPolicyText(smsPolicy([await testAgent('a')], { webhookUrl: 'http://127.0.0.1:9/x' }), 'p.yaml');
    const base = { policy, upstream: 'http://127.0.0.1:9', listen: '127.0.0.1:0', admin: '127.0.0.1:0', log: createLogger('error', () => {}) };
    await expect(startSidecar(base)).rejects.toThrow(/--admin-insecure-no-token/);
    const open = await startSidecar({ ...base, adminInsecureNoToken: true });
    try {
      expect((await call(open.adminUrl, { path: '/approvals' })).status).toBe(200);
    } finally {
      await open.close();
    }
  });
});
