import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { DENIAL_STATUS } from '../../../src/errors.js';
import { knownLabels, SidecarMetrics } from '../../../src/metrics/metrics.js';
import { loadPolicyFile, loadPolicyText } from '../../../src/policy/load.js';
import { parseExposition, sample, type Samples } from '../../support/prom.js';

const EXAMPLES = new URL('../../../config/examples/', import.meta.url).pathname;
const CODES = Object.keys(DENIAL_STATUS);

async function scrape(m: SidecarMetrics): Promise<Samples> {
  return parseExposition(await m.metrics());
}

/** Label sets of one family in a scrape. */
function series(s: Samples, name: string): string[] {
  return [...s.keys()].filter((k) => k.startsWith(`${name}{`));
}

describe('knownLabels', () => {
  it('names every capability label a call can carry, the constraint fields of grants and host defaults, and no approvals without request_permission', async () => {
    const policy = await loadPolicyFile(`${EXAMPLES}billing.yaml`);
    const k = knownLabels(policy);
    expect(k.callCapabilities).toEqual(expect.arrayContaining(['(none)', '(public)', ...policy.capabilities.keys(), 'discovery', 'register']));
    expect(k.constraintFields).toEqual(
      expect.arrayContaining([
        ['createInvoice', 'amount'],
        ['createInvoice', 'currency'],
        ['listInvoices', 'limit'],
      ]),
    );
    expect(new Set(k.constraintFields.map((f) => f.join('.'))).size).toBe(k.constraintFields.length);
    expect(k.approvalCapabilities).toEqual([]);
  });

  it('lists every capability for access requests when request_permission is on', async () => {
    const policy = await loadPolicyFile(`${EXAMPLES}sms.yaml`);
    const k = knownLabels(policy);
    expect(k.approvalCapabilities.sort()).toEqual([...policy.capabilities.keys()].sort());
    expect(k.callCapabilities).toEqual(expect.arrayContaining(['request_permission', 'request_status']));
    expect(k.callCapabilities).not.toContain('(public)'); // the sms policy has no public route
  });
});

describe('SidecarMetrics zero series', () => {
  it('a fresh registry exports its closed label sets at 0: reload results, replay resets, audit drops, decision times by outcome', async () => {
    const s = await scrape(new SidecarMetrics({ processMetrics: false }));
    for (const result of ['success', 'failure']) expect(s.get(`agents_chain_policy_reloads_total{result="${result}"}`)).toBe(0);
    for (const cause of ['marker_missing', 'epoch_changed', 'server_changed'])
      expect(s.get(`agents_chain_replay_store_resets_total{cause="${cause}"}`)).toBe(0);
    expect(s.get('agents_chain_audit_entries_dropped_total{}')).toBe(0);
    expect(s.get('agents_chain_audit_unaudited_calls_total{}')).toBe(0);
    for (const outcome of ['approved', 'denied', 'expired']) expect(s.get(`agents_chain_access_request_decision_seconds_count{outcome="${outcome}"}`)).toBe(0);
  });

  it('initialise(policy) creates calls by decision, denials by every catalogue code, constraint fields and access request outcomes at 0', async () => {
    const policy = await loadPolicyFile(`${EXAMPLES}sms.yaml`);
    const m = new SidecarMetrics({ processMetrics: false });
    m.initialise(knownLabels(policy));
    const s = await scrape(m);
    for (const capability of ['send_sms', 'get_message', '(none)', 'request_permission']) {
      for (const decision of ['allowed', 'denied', 'error'])
        expect(s.get(`agents_chain_requests_total{capability="${capability}",decision="${decision}"}`), `${capability} ${decision}`).toBe(0);
      for (const reason of CODES) expect(s.get(`agents_chain_denials_total{capability="${capability}",reason="${reason}"}`), `${capability} ${reason}`).toBe(0);
    }
    expect(s.get('agents_chain_constraint_violations_total{capability="send_sms",field="to"}')).toBe(0);
    for (const capability of ['send_sms', 'get_message']) {
      expect(s.get(`agents_chain_access_requests_created_total{capability="${capability}"}`)).toBe(0);
      for (const outcome of ['approved', 'denied', 'expired'])
        expect(s.get(`agents_chain_access_requests_resolved_total{capability="${capability}",outcome="${outcome}"}`)).toBe(0);
    }
    // No per-agent series: agents registered by hosts are not known ahead.
    expect(series(s, 'agents_chain_agent_requests_total')).toEqual([]);
  });

  it('a counted event moves its zero series; initialising again (a reload) keeps counts, adds new capabilities and keeps removed ones', async () => {
    const before = await loadPolicyFile(`${EXAMPLES}sms.yaml`);
    const m = new SidecarMetrics({ processMetrics: false });
    m.initialise(knownLabels(before));
    m.callFinished({ capability: 'send_sms', decision: 'denied', reason: 'constraint_violated', violatedFields: ['to'] });
    m.accessRequestResolved('send_sms', 'expired', 60);
    // The same policy with get_message renamed: a reload that adds read_message and drops get_message.
    const after = await loadPolicyText((await readFile(`${EXAMPLES}sms.yaml`, 'utf8')).replaceAll('get_message', 'read_message'), `${EXAMPLES}sms.yaml`);
    m.initialise(knownLabels(after));
    const s = await scrape(m);
    expect(sample(s, 'agents_chain_denials_total', { capability: 'send_sms', reason: 'constraint_violated' })).toBe(1);
    expect(sample(s, 'agents_chain_constraint_violations_total', { capability: 'send_sms', field: 'to' })).toBe(1);
    expect(sample(s, 'agents_chain_access_requests_resolved_total', { capability: 'send_sms', outcome: 'expired' })).toBe(1);
    expect(s.get('agents_chain_access_requests_resolved_total{capability="read_message",outcome="expired"}')).toBe(0);
    expect(s.get('agents_chain_denials_total{capability="read_message",reason="token_expired"}')).toBe(0);
    expect(s.get('agents_chain_requests_total{capability="get_message",decision="allowed"}')).toBe(0);
  });

  it('auditExporters creates the delivery counters of each configured exporter at 0', async () => {
    const m = new SidecarMetrics({ processMetrics: false });
    m.auditExporters(['stdout', 'http-collector_443']);
    const s = await scrape(m);
    for (const exporter of ['stdout', 'http-collector_443']) {
      expect(s.get(`agents_chain_audit_batches_exported_total{exporter="${exporter}"}`)).toBe(0);
      expect(s.get(`agents_chain_audit_export_failures_total{exporter="${exporter}"}`)).toBe(0);
    }
  });
});
