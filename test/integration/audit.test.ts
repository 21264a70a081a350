import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBatch, parseKeyring, type AuditBatch } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { HttpAuditExporter } from '../../src/audit/exporters.js';
import { verifyChain } from '../../src/audit/verify.js';
import { until } from '../support/until.js';
import { orderedLines, startCollector, type Collector } from '../support/collector.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, invoice } from '../support/http.js';

const KEY = randomBytes(32).toString('base64');
const keys = parseKeyring(KEY);

function entriesOf(c: Collector): AuditEntry[] {
  return orderedLines(c).flatMap((l) => openBatch<AuditEntry>(JSON.parse(l) as AuditBatch, keys));
}

describe('audit trail through an unreliable collector', () => {
  let collector: Collector;
  let env: TestSidecar;
  beforeAll(async () => {
    collector = await startCollector();
    env = await startTestSidecar({
      adminToken: 'audit-test-admin-token', // /stats needs it
      audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url, 'audit-api-key', 300)], flushIntervalMs: 30, backoffMs: () => 30 },
    });
  });
  afterAll(async () => {
    await env.close();
    await collector.close();
  });

  it('delivers every entry exactly once, in order, with an intact chain, through 500s, refusals and stalls', async () => {
    const requestIds: string[] = [];
    const burst = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const ok = i % 2 === 0;
        const r = await call(env, {
          method: 'POST',
          path: '/invoices',
          token: await env.bot.signer.sign('createInvoice'),
          body: invoice(ok ? {} : { amount: 5000, apiKey: 'sk-secret' }),
        });
        requestIds.push(String(r.headers['x-request-id']));
        await new Promise((res) => setTimeout(res, 40)); // spread over several batches
      }
    };
    collector.mode = 'fail';
    await burst(4);
    await collector.stop();
    await burst(4);
    await collector.restart();
    collector.mode = 'stall';
    await burst(3);
    collector.mode = 'ok';
    await burst(3);
    await until(() => entriesOf(collector).length >= requestIds.length);
    await until(async () => {
      const stats = (await (await fetch(`${env.sidecar.adminUrl}/stats`, { headers: { authorization: 'Bearer audit-test-admin-token' } })).json()) as {
        audit: { backlog: number };
      };
      return stats.audit.backlog === 0;
    });

    const entries = entriesOf(collector);
    const ids = entries.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length); // exactly once
    expect(entries.map((e) => e.requestId).sort()).toEqual([...requestIds].sort());
    const seqs = [...collector.batches.keys()].sort((a, b) => a - b);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(verifyChain(orderedLines(collector), keys).problems).toEqual([]);
    expect(collector.received).toBeGreaterThan(collector.batches.size); // it really had to retry

    const denied = entries.find((e) => e.result === 'denied')!;
    expect(denied).toMatchObject({
      agentId: 'agent-billing-bot',
      capability: 'createInvoice',
      denialReason: 'constraint_violated',
      status: 403,
      method: 'POST',
      path: '/invoices',
    });
    expect((denied.args as Record<string, unknown>).apiKey).toBe('[REDACTED]');
    const ok = entries.find((e) => e.result === 'success')!;
    expect(ok).toMatchObject({ status: 200, upstreamStatus: 200, permission: 'not_required' });
    expect(ok.args).toEqual(JSON.parse(invoice())); // the body the app received
    expect(typeof ok.jti).toBe('string');
  }, 30_000);

  it('a call refused for its shape is recorded with its path, and its query (secrets redacted) as args', async () => {
    collector.mode = 'ok';
    const r = await call(env, { path: '/invoices?api_key=sk-secret-123&limit=5', headers: { 'content-type': ['a/b', 'c/d'] } });
    expect(r).toMatchObject({ status: 400, json: { error: 'invalid_header' } });
    const requestId = String(r.headers['x-request-id']);
    await until(() => entriesOf(collector).some((e) => e.requestId === requestId));
    const entry = entriesOf(collector).find((e) => e.requestId === requestId)!;
    expect(entry).toMatchObject({ path: '/invoices', denialReason: 'invalid_header', args: { api_key: '[REDACTED]', limit: '5' } });
    expect(JSON.stringify(entry)).not.toContain('sk-secret-123');
  });
});

describe('a full spool fails closed', () => {
  it('answers 503 audit_unavailable and forwards nothing unaudited; recovers when delivery resumes', async () => {
    const collector = await startCollector();
    await collector.stop();
    const spoolDir = await mkdtemp(join(tmpdir(), 'agents-chain-spool-'));
    const env = await startTestSidecar({
      audit: {
        keyring: keys,
        exporters: [new HttpAuditExporter(collector.url, undefined, 200)],
        spoolDir,
        spoolMaxBytes: 4000,
        flushIntervalMs: 10,
        backoffMs: () => 20,
      },
    });
    try {
      const statuses: number[] = [];
      // Until the spool is found full (a few dozen calls; more on a busy machine, where batches seal differently).
      for (let i = 0; i < 300 && !statuses.includes(503); i++) {
        const r = await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
        statuses.push(r.status);
        if (r.status === 503) expect(r.json.error).toBe('audit_unavailable');
        await new Promise((res) => setTimeout(res, 15));
      }
      expect(statuses).toContain(503);
      const forwarded = env.app.requests.length;
      expect(forwarded).toBe(statuses.filter((s) => s === 200).length);
      expect((await readdir(spoolDir)).some((f) => f.endsWith('.batch'))).toBe(true);
      const ready = await fetch(`${env.sidecar.adminUrl}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({
        status: 'not_ready',
        checks: { policy: 'ok', listeners: 'ok', auditSpool: 'failing' },
        load: { maxInFlight: 1024 },
      });
      expect(await (await fetch(`${env.sidecar.adminUrl}/metrics`)).text()).toMatch(/^agents_chain_audit_available 0$/m);

      await collector.restart();
      await until(async () => (await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })).status === 200);
      // Every call the app saw has its audit entry once delivery resumes.
      await until(() => entriesOf(collector).filter((e) => e.result === 'success').length >= forwarded + 1);
    } finally {
      await env.close();
      await collector.close();
    }
  }, 30_000);
});

describe('approval events are audited', () => {
  it('records created, wrong_code, approved and executed', async () => {
    const { startApprovalEnv } = await import('../support/approvals.js');
    const collector = await startCollector();
    const env = await startApprovalEnv({ audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 20 } });
    try {
      const asked = await fetch(`${env.sidecar.url}/agent/request-permission`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await env.bot.signer.sign('request_permission')}`, 'content-type': 'application/json', prefer: 'respond-async' },
        body: JSON.stringify({ capability: 'send_sms', args: { to: '+1', body: 'x', apiToken: 't' }, reason: 'audit test' }),
      });
      const { requestId } = (await asked.json()) as { requestId: string };
      const note = await env.inbox.nextRequest();
      await env.admin('POST', `/approvals/${requestId}/approve`, { code: 'WRONGWRONG' });
      await env.admin('POST', `/approvals/${requestId}/approve`, { code: note.code });
      const events = () =>
        entriesOf(collector)
          .filter((e) => e.requestId === requestId)
          .map((e) => e.event);
      await until(() => events().includes('approval.executed'));
      expect(events()).toEqual(['approval.created', 'approval.wrong_code', 'approval.approved', 'approval.executed']);
      const created = entriesOf(collector).find((e) => e.event === 'approval.created')!;
      expect(created).toMatchObject({ agentId: env.bot.id, capability: 'send_sms', args: { to: '+1', apiToken: '[REDACTED]' } });
    } finally {
      await env.close();
      await collector.close();
    }
  }, 20_000);
});

describe('recent entries on the admin listener', () => {
  it('are decrypted only with the admin token', async () => {
    const { startApprovalEnv, ADMIN_TOKEN } = await import('../support/approvals.js');
    const collector = await startCollector();
    const env = await startApprovalEnv({ audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 10 } });
    try {
      const r = await fetch(`${env.sidecar.url}/sms`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await env.bot.signer.sign('send_sms')}`, 'content-type': 'application/json' },
        body: JSON.stringify({ to: '+254700000001', body: 'hi' }),
      });
      const requestId = r.headers.get('x-request-id');
      expect((await fetch(`${env.sidecar.adminUrl}/stats/entries`)).status).toBe(401);
      await until(async () => {
        const res = await fetch(`${env.sidecar.adminUrl}/stats/entries?limit=10`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        const { entries } = (await res.json()) as { entries: AuditEntry[] };
        return entries.some((e) => e.requestId === requestId && e.capability === 'send_sms');
      });
      const stats = (await (await fetch(`${env.sidecar.adminUrl}/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any;
      expect(stats.audit.byCapability.send_sms).toMatchObject({ total: 1, success: 1 });
      // A limit that is not a whole number from 1 to 500 is refused, not read as "everything".
      for (const limit of ['abc', '0', '501', '1.5', '-1', '', '2&limit=3']) {
        const bad = await fetch(`${env.sidecar.adminUrl}/stats/entries?limit=${limit}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        expect(bad.status, limit).toBe(400);
        expect(await bad.json(), limit).toMatchObject({ error: 'invalid_query' });
      }
    } finally {
      await env.close();
      await collector.close();
    }
  }, 20_000);
});

describe('a client that hangs up mid-body', () => {
  it('is still audited (the jti was spent), and nothing reaches the app', async () => {
    const { connect } = await import('node:net');
    const collector = await startCollector();
    const env = await startTestSidecar({ audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 10 } });
    try {
      const seen = env.app.requests.length;
      const token = await env.bot.signer.sign('createInvoice');
      const u = new URL(env.sidecar.url);
      const sock = connect(Number(u.port), u.hostname);
      await new Promise((r) => sock.once('connect', r));
      sock.write(
        `POST /invoices HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"amount":`,
      );
      await new Promise((r) => setTimeout(r, 50));
      sock.destroy();
      await until(() => entriesOf(collector).some((e) => e.denialReason === 'client_closed_request'));
      expect(entriesOf(collector).find((e) => e.denialReason === 'client_closed_request')).toMatchObject({
        result: 'error',
        capability: 'createInvoice',
        agentId: 'agent-billing-bot',
        status: 499,
      });
      expect(env.app.requests.length).toBe(seen);
    } finally {
      await env.close();
      await collector.close();
    }
  }, 20_000);
});

describe('bodies the pipeline did not need to parse', () => {
  it('are recorded as their exact bytes when strictly valid JSON, and not at all when ambiguous (duplicate keys)', async () => {
    const collector = await startCollector();
    const env = await startTestSidecar({ audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 10 } });
    try {
      // upload has no body constraints: its body is buffered and forwarded, never parsed for a decision.
      const ok = await call(env, { method: 'PUT', path: '/uploads', token: await env.bot.signer.sign('upload'), body: '{"a": 1, "apiKey": "k"}' });
      const dup = await call(env, { method: 'PUT', path: '/uploads', token: await env.bot.signer.sign('upload'), body: '{"a":1,"a":2}' });
      expect([ok.status, dup.status]).toEqual([200, 200]);
      await until(() => entriesOf(collector).filter((e) => e.capability === 'upload').length === 2);
      const [first, second] = entriesOf(collector).filter((e) => e.capability === 'upload');
      expect(first!.args).toEqual({ a: 1, apiKey: '[REDACTED]' });
      expect(second!.args).toBeNull(); // never one reading of an ambiguous body
    } finally {
      await env.close();
      await collector.close();
    }
  }, 20_000);
});
