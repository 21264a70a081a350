import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, invoice } from '../support/http.js';
import { parseExposition, sample, scrape } from '../support/prom.js';
import { until } from '../support/until.js';

describe('metrics after a mix of allowed, denied and erroring calls', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
    env.app.handler = (r, res) => {
      const failing = r.url.startsWith('/invoices/inv-broken');
      res.writeHead(failing ? 500 : 200, { 'content-type': 'application/json' });
      res.end(failing ? '{"error":"boom"}' : '{"ok":true}');
    };
  });
  afterAll(() => env.close());

  it('counts each call once, by capability and decision, and says why the denied ones were refused', async () => {
    const sign = (cap: string) => env.bot.signer.sign(cap);
    for (let i = 0; i < 3; i++)
      expect((await call(env, { method: 'POST', path: '/invoices', token: await sign('createInvoice'), body: invoice() })).status).toBe(200);
    expect((await call(env, { method: 'POST', path: '/invoices', token: await sign('createInvoice'), body: invoice({ amount: 5000 }) })).status).toBe(403);
    expect(
      (await call(env, { method: 'POST', path: '/invoices', token: await sign('createInvoice'), body: invoice({ amount: 5000, currency: 'GBP' }) })).status,
    ).toBe(403);
    expect((await call(env, { method: 'POST', path: '/invoices', body: invoice() })).status).toBe(401);
    expect((await call(env, { path: '/nowhere' })).status).toBe(404);
    expect((await call(env, { path: '/invoices/inv-broken', token: await sign('getInvoice') })).status).toBe(500);
    expect((await call(env, { path: '/healthz' })).status).toBe(200);

    const { samples: s, contentType } = await scrape(env.sidecar.adminUrl);
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const req = (capability: string, decision: string) => sample(s, 'agents_chain_requests_total', { capability, decision });
    expect(req('createInvoice', 'allowed')).toBe(3);
    expect(req('createInvoice', 'denied')).toBe(3);
    expect(req('getInvoice', 'error')).toBe(1); // the app's 500
    expect(req('(none)', 'denied')).toBe(1);
    expect(req('(public)', 'allowed')).toBe(1);
    const denials = (capability: string, reason: string) => sample(s, 'agents_chain_denials_total', { capability, reason });
    expect(denials('createInvoice', 'constraint_violated')).toBe(2);
    expect(denials('createInvoice', 'token_missing')).toBe(1);
    expect(denials('(none)', 'unknown_route')).toBe(1);
    expect(sample(s, 'agents_chain_constraint_violations_total', { capability: 'createInvoice', field: 'amount' })).toBe(2);
    expect(sample(s, 'agents_chain_constraint_violations_total', { capability: 'createInvoice', field: 'currency' })).toBe(1);
    // Timed: every call the sidecar answered; upstream only for those the app saw.
    expect(sample(s, 'agents_chain_overhead_seconds_count', { capability: 'createInvoice' })).toBe(6);
    expect(sample(s, 'agents_chain_upstream_duration_seconds_count', { capability: 'createInvoice' })).toBe(3);
    expect(sample(s, 'agents_chain_upstream_duration_seconds_count', { capability: 'getInvoice' })).toBe(1);
    expect(sample(s, 'agents_chain_overhead_seconds_bucket', { capability: 'createInvoice', le: '+Inf' })).toBe(6);
    expect(sample(s, 'agents_chain_token_verification_seconds_count')).toBe(6); // the call without a token never got there
    expect(sample(s, 'agents_chain_replay_store_errors_total')).toBe(0);
    const info = [...s].filter(([k]) => k.startsWith('agents_chain_policy_info{'));
    expect(info).toEqual([[expect.stringMatching(/^agents_chain_policy_info\{hash="[0-9a-f]{64}"\}$/), 1]]);
    expect(sample(s, 'agents_chain_policy_reloads_total', { result: 'failure' })).toBe(0);
    expect(s.has('process_cpu_user_seconds_total{}')).toBe(true);
    // No per-agent series unless asked for.
    expect([...s.keys()].some((k) => k.startsWith('agents_chain_agent_requests_total'))).toBe(false);
  });
});

describe('per-agent label', () => {
  it('is opt-in and capped: agents past the cap are counted as _other', async () => {
    const env = await startTestSidecar({ metrics: { perAgent: { maxAgents: 1 }, processMetrics: false } });
    try {
      expect((await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })).status).toBe(200);
      expect((await call(env, { path: '/invoices/inv-1', token: await env.other.signer.sign('getInvoice') })).status).toBe(403);
      const { samples: s } = await scrape(env.sidecar.adminUrl);
      expect(sample(s, 'agents_chain_agent_requests_total', { agent: env.bot.id, capability: 'getInvoice', decision: 'allowed' })).toBe(1);
      expect(sample(s, 'agents_chain_agent_requests_total', { agent: '_other', capability: 'getInvoice', decision: 'denied' })).toBe(1);
      expect(sample(s, 'agents_chain_agent_requests_total', { agent: env.other.id, capability: 'getInvoice', decision: 'denied' })).toBe(0);
    } finally {
      await env.close();
    }
  });
});

describe('access request metrics', () => {
  it('count created, pending and resolved requests and time the decision', async () => {
    const { startApprovalEnv } = await import('../support/approvals.js');
    const env = await startApprovalEnv();
    try {
      const ask = async () => {
        const r = await call(env, {
          method: 'POST',
          path: '/agent/request-permission',
          token: await env.bot.signer.sign('request_permission'),
          headers: { prefer: 'respond-async' },
          body: { capability: 'send_sms', args: { to: '+1', body: 'x' }, reason: 'metrics test' },
        });
        return (r.json as { requestId: string }).requestId;
      };
      const first = await ask();
      const firstNote = await env.inbox.nextRequest();
      await ask();
      await env.inbox.nextRequest();
      let { samples: s } = await scrape(env.sidecar.adminUrl);
      expect(sample(s, 'agents_chain_access_requests_created_total', { capability: 'send_sms' })).toBe(2);
      expect(sample(s, 'agents_chain_access_requests_pending')).toBe(2);
      expect((await env.admin('POST', `/approvals/${first}/deny`, { code: firstNote.code, reason: 'no' })).status).toBe(200);
      await until(async () => sample((await scrape(env.sidecar.adminUrl)).samples, 'agents_chain_access_requests_pending') === 1);
      ({ samples: s } = await scrape(env.sidecar.adminUrl));
      expect(sample(s, 'agents_chain_access_requests_resolved_total', { capability: 'send_sms', outcome: 'denied' })).toBe(1);
      expect(sample(s, 'agents_chain_access_request_decision_seconds_count', { outcome: 'denied' })).toBe(1);
    } finally {
      await env.close();
    }
  });
});

describe('audit delivery metrics', () => {
  it('show failures and a growing lag while the collector fails, and the lag gone once it recovers', async () => {
    const { randomBytes } = await import('node:crypto');
    const { parseKeyring } = await import('../../src/audit/crypto.js');
    const { HttpAuditExporter } = await import('../../src/audit/exporters.js');
    const { startCollector } = await import('../support/collector.js');
    const collector = await startCollector();
    collector.mode = 'fail';
    const exporter = new HttpAuditExporter(collector.url, undefined, 300);
    const env = await startTestSidecar({
      audit: { keyring: parseKeyring(randomBytes(32).toString('base64')), exporters: [exporter], flushIntervalMs: 20, backoffMs: () => 20 },
      metrics: { processMetrics: false },
    });
    try {
      for (let i = 0; i < 3; i++) await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
      await until(
        async () => sample((await scrape(env.sidecar.adminUrl)).samples, 'agents_chain_audit_export_failures_total', { exporter: exporter.name }) >= 2,
      );
      // The lag grows while nothing is delivered.
      await until(async () => sample((await scrape(env.sidecar.adminUrl)).samples, 'agents_chain_audit_oldest_unexported_age_seconds') > 0.04);
      let { samples: s } = await scrape(env.sidecar.adminUrl);
      expect(sample(s, 'agents_chain_audit_entries_total')).toBe(3);
      expect(sample(s, 'agents_chain_audit_spool_bytes')).toBeGreaterThan(0);
      expect(sample(s, 'agents_chain_audit_oldest_unexported_age_seconds')).toBeGreaterThan(0.04);
      expect(sample(s, 'agents_chain_audit_batches_exported_total', { exporter: exporter.name })).toBe(0);
      expect(sample(s, 'agents_chain_audit_available')).toBe(1);

      collector.mode = 'ok';
      await until(async () => sample((await scrape(env.sidecar.adminUrl)).samples, 'agents_chain_audit_spool_bytes') === 0);
      ({ samples: s } = await scrape(env.sidecar.adminUrl));
      expect(sample(s, 'agents_chain_audit_batches_exported_total', { exporter: exporter.name })).toBeGreaterThan(0);
      expect(sample(s, 'agents_chain_audit_oldest_unexported_age_seconds')).toBe(0);
      expect(sample(s, 'agents_chain_audit_entries_buffered')).toBe(0);
    } finally {
      await env.close();
      await collector.close();
    }
  });
});

/** Counter series (label sets included) of the sidecar's own families in a scrape, but the opt-in per-agent one. */
function counterSeries(text: string): string[] {
  const counters = new Set([...text.matchAll(/^# TYPE (agents_chain_\S+) counter$/gm)].map((m) => m[1]!));
  counters.delete('agents_chain_agent_requests_total');
  return [...parseExposition(text).keys()].filter((k) => counters.has(k.slice(0, k.indexOf('{'))));
}

describe('zero series: the first scrape of a fresh sidecar has every counter series its first events move', () => {
  it('calls allowed, denied (token, route, constraint) and failing move series that were already there at 0', async () => {
    const env = await startTestSidecar({ metrics: { processMetrics: false } });
    env.app.handler = (r, res) => {
      res.writeHead(r.url.startsWith('/invoices/inv-broken') ? 500 : 200, { 'content-type': 'application/json' });
      res.end('{}');
    };
    try {
      const fresh = await scrape(env.sidecar.adminUrl);
      const born = new Set(counterSeries(fresh.text));
      expect(sample(fresh.samples, 'agents_chain_denials_total', { capability: 'createInvoice', reason: 'constraint_violated' })).toBe(0);
      expect(fresh.samples.has('agents_chain_denials_total{capability="createInvoice",reason="constraint_violated"}')).toBe(true);
      const sign = (cap: string) => env.bot.signer.sign(cap);
      expect((await call(env, { method: 'POST', path: '/invoices', token: await sign('createInvoice'), body: invoice() })).status).toBe(200);
      expect(
        (await call(env, { method: 'POST', path: '/invoices', token: await sign('createInvoice'), body: invoice({ amount: 5000, currency: 'GBP' }) })).status,
      ).toBe(403);
      expect((await call(env, { method: 'POST', path: '/invoices', body: invoice() })).status).toBe(401);
      expect((await call(env, { path: '/invoices/inv-1', token: await env.other.signer.sign('getInvoice') })).status).toBe(403);
      expect((await call(env, { path: '/nowhere' })).status).toBe(404);
      expect((await call(env, { path: '/invoices/inv-broken', token: await sign('getInvoice') })).status).toBe(500);
      expect((await call(env, { path: '/healthz' })).status).toBe(200);
      const later = await scrape(env.sidecar.adminUrl);
      const moved = counterSeries(later.text).filter((k) => later.samples.get(k)! > 0);
      expect(moved.length).toBeGreaterThan(8);
      expect(moved.filter((k) => !born.has(k))).toEqual([]);
    } finally {
      await env.close();
    }
  });

  it('the first expired access request moves agents_chain_access_requests_resolved_total{outcome="expired"} from 0', async () => {
    const { startApprovalEnv } = await import('../support/approvals.js');
    const env = await startApprovalEnv({ ttl: '1s' });
    try {
      const fresh = await scrape(env.sidecar.adminUrl);
      expect(fresh.samples.get('agents_chain_access_requests_resolved_total{capability="send_sms",outcome="expired"}')).toBe(0);
      expect(fresh.samples.get('agents_chain_access_requests_created_total{capability="send_sms"}')).toBe(0);
      const r = await call(env, {
        method: 'POST',
        path: '/agent/request-permission',
        token: await env.bot.signer.sign('request_permission'),
        headers: { prefer: 'respond-async' },
        body: { capability: 'send_sms', args: { to: '+1', body: 'x' }, reason: 'expiry test' },
      });
      expect(r.status).toBe(202);
      await until(
        async () =>
          sample((await scrape(env.sidecar.adminUrl)).samples, 'agents_chain_access_requests_resolved_total', {
            capability: 'send_sms',
            outcome: 'expired',
          }) === 1,
      );
      const later = await scrape(env.sidecar.adminUrl);
      const born = new Set(counterSeries(fresh.text));
      expect(counterSeries(later.text).filter((k) => later.samples.get(k)! > 0 && !born.has(k))).toEqual([]);
    } finally {
      await env.close();
    }
  });

  it('a reload that adds a capability creates its series at 0 at once', async () => {
    const { readFile } = await import('node:fs/promises');
    const file = new URL('../../config/examples/sms.yaml', import.meta.url).pathname;
    const text = await readFile(file, 'utf8');
    const env = await startTestSidecar({
      policy: text,
      policyName: file,
      adminToken: 'a'.repeat(32),
      env: { SMS_APPROVAL_WEBHOOK_URL: 'http://127.0.0.1:9/unused' },
      logLevel: 'error',
      metrics: { processMetrics: false },
    });
    const { sidecar } = env;
    try {
      expect((await scrape(sidecar.adminUrl)).samples.has('agents_chain_access_requests_resolved_total{capability="read_message",outcome="expired"}')).toBe(
        false,
      );
      expect(await sidecar.reloadPolicy(text.replaceAll('get_message', 'read_message'))).toMatchObject({ ok: true, changed: true });
      const s = (await scrape(sidecar.adminUrl)).samples;
      expect(s.get('agents_chain_access_requests_resolved_total{capability="read_message",outcome="expired"}')).toBe(0);
      expect(s.get('agents_chain_denials_total{capability="read_message",reason="capability_denied"}')).toBe(0);
      expect(s.get('agents_chain_policy_reloads_total{result="success"}')).toBe(1);
    } finally {
      await env.close();
    }
  });
});
