import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ANNOTATION, CONTAINER, injectObject, injectPodTemplate, podTemplateOf, type PodTemplate } from '../../../src/kubernetes/inject.js';
import { validateObject } from '../../support/kubernetes.js';

const FIXTURE = new URL('../../fixtures/kubernetes/workloads.yaml', import.meta.url);
const docs = () => parseAllDocuments(readFileSync(FIXTURE, 'utf8')).map((d) => (d as { toJS(): Record<string, unknown> }).toJS());
const byName = (name: string) => docs().find((d) => (d.metadata as { name: string }).name === name)!;
const defaults = { image: 'ghcr.io/agents-chain/sidecar:0.1.0' };
type C = { name: string; restartPolicy?: string; args?: string[]; ports?: { containerPort: number }[]; env?: { name: string }[] };

describe('injectPodTemplate', () => {
  it('adds the sidecar beside the app: args, ports, probes on the admin port, hardened security context, volumes', () => {
    const r = injectObject(byName('billing'), defaults);
    expect(r.injected).toBe(1);
    const t = podTemplateOf(r.doc)!;
    const names = (t.spec!.containers as C[]).map((c) => c.name);
    expect(names).toEqual(['app', 'log-shipper', CONTAINER]); // others untouched, in order
    const sc = (t.spec!.containers as C[]).at(-1)! as Record<string, any>;
    expect(sc.args).toEqual(['serve', '--policy', '/etc/agents-chain/policy.yaml', '--upstream', 'http://127.0.0.1:3000', '--listen', '0.0.0.0:8080', '--admin', '0.0.0.0:9090', '--audit-spool', '/var/spool/agents-chain']);
    expect(sc.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 9090 });
    expect(sc.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 9090 });
    expect(sc.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(sc.env).toEqual([
      { name: 'AGENTS_CHAIN_AUDIT_KEY', valueFrom: { secretKeyRef: { name: 'billing-audit-key', key: 'audit.key' } } },
      { name: 'AGENTS_CHAIN_AUDIT_EXPORT', value: 'stdout' },
    ]);
    expect((t.spec!.volumes as { name: string }[]).map((v) => v.name)).toEqual(['agents-chain-policy', 'agents-chain-spool', 'agents-chain-tmp']);
    expect((t.spec!.volumes as Record<string, any>[])[0]).toEqual({ name: 'agents-chain-policy', configMap: { name: 'billing-policy' } });
    // The app container is byte-for-byte what it was.
    expect((t.spec!.containers as C[])[0]).toEqual((podTemplateOf(byName('billing'))!.spec!.containers as C[])[0]);
  });

  it('as a native sidecar: first init container with restartPolicy Always, existing init containers and volumes kept', () => {
    const t = podTemplateOf(injectObject(byName('ledger'), defaults).doc)!;
    expect((t.spec!.initContainers as C[]).map((c) => [c.name, c.restartPolicy])).toEqual([[CONTAINER, 'Always'], ['migrate', undefined]]);
    expect((t.spec!.containers as C[]).map((c) => c.name)).toEqual(['ledger']);
    expect((t.spec!.volumes as { name: string }[]).map((v) => v.name)).toEqual(['data', 'agents-chain-policy', 'agents-chain-spool', 'agents-chain-tmp']);
  });

  it('Jobs and CronJobs too; the agent port follows the annotation', () => {
    const job = podTemplateOf(injectObject(byName('nightly-report'), defaults).doc)!;
    expect((job.spec!.containers as C[]).at(-1)!.ports!.map((p) => p.containerPort)).toEqual([18080, 9090]);
    expect(injectObject(byName('cleanup'), defaults).injected).toBe(1);
  });

  it('is idempotent and leaves pods without the annotation alone', () => {
    const once = injectObject(byName('billing'), defaults).doc;
    const twice = injectObject(once, defaults);
    expect(twice).toEqual({ doc: once, injected: 0, skipped: [] });
    const plain = byName('not-annotated');
    expect(injectObject(plain, defaults)).toEqual({ doc: plain, injected: 0, skipped: [] });
    expect(injectObject(byName('billing-policy'), defaults).injected).toBe(0); // a ConfigMap
  });

  it('explains why an annotated pod was not injected', () => {
    const t: PodTemplate = { metadata: { annotations: { [ANNOTATION.inject]: 'true' } }, spec: { containers: [{ name: 'app', image: 'x' }] } };
    expect(injectPodTemplate(t, defaults)).toEqual({ injected: false, reason: `${ANNOTATION.policy} (the policy ConfigMap's name) is required` });
    const clash: PodTemplate = { metadata: { annotations: { [ANNOTATION.inject]: 'true', [ANNOTATION.policy]: 'p' } }, spec: { containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 8080 }] }] } };
    expect(injectPodTemplate(clash, defaults)).toMatchObject({ injected: false, reason: expect.stringMatching(/port 8080 is already used/) });
    const bad: PodTemplate = { metadata: { annotations: { [ANNOTATION.inject]: 'true', [ANNOTATION.policy]: 'p', [ANNOTATION.upstreamPort]: 'http' } }, spec: { containers: [] } };
    expect(injectPodTemplate(bad, defaults)).toMatchObject({ injected: false, reason: expect.stringMatching(/must be a port number/) });
  });

  it('the schema check is real: a malformed container is refused', () => {
    const bad = structuredClone(byName('billing')) as Record<string, any>;
    bad.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => validateObject(bad)).toThrow();
  });

  it('every injected object is a valid Kubernetes object', () => {
    for (const d of docs()) {
      const { doc } = injectObject(d, defaults);
      expect(() => validateObject(doc), `${String(d.kind)}/${String((d.metadata as { name: string }).name)}`).not.toThrow();
    }
  });
});
