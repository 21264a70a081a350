import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { injectPodTemplate } from '../../src/kubernetes/inject.js';
import { requireBuild, startCli } from '../support/cli.js';
import { validateObject } from '../support/kubernetes.js';

const IMAGE = 'registry.example.com/agents-chain:0.1.0';

function pod(annotations: Record<string, string>) {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { generateName: 'billing-7d9f-', namespace: 'billing', labels: { app: 'billing' }, annotations },
    spec: { containers: [{ name: 'app', image: 'registry.example.com/billing:1.4.2', ports: [{ containerPort: 3000 }] }] },
  };
}

/** RFC 6902 add/replace of top-level spec fields: all the webhook emits. */
function applyPatch(doc: Record<string, any>, ops: { op: string; path: string; value: unknown }[]) {
  const out = structuredClone(doc);
  for (const o of ops) {
    const [, root, field] = o.path.split('/');
    expect(['add', 'replace']).toContain(o.op);
    out[root!][field!] = o.value;
  }
  return out;
}

describe('agents-chain webhook (mutating admission, AdmissionReview v1 over HTTPS)', () => {
  it('patches an annotated pod exactly as the injector does, and allows others untouched', async () => {
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-webhook-'));
    const cert = join(dir, 'tls.crt');
    const key = join(dir, 'tls.key');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=agents-chain-webhook.agents-chain.svc', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    const wh = await startCli(['webhook', '--tls-cert', cert, '--tls-key', key, '--listen', '127.0.0.1:0', '--image', IMAGE], /webhook listening/);
    const url = (JSON.parse(wh.line) as { listen: string }).listen;
    const tls = new Agent({ connect: { ca: await readFile(cert) } });
    const review = async (object: unknown, uid: string) => {
      const r = await request(`${url}/mutate`, {
        method: 'POST', dispatcher: tls, headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object } }),
      });
      return { status: r.statusCode, json: await r.body.json() as { apiVersion: string; kind: string; response: { uid: string; allowed: boolean; patchType?: string; patch?: string } } };
    };
    try {
      const annotated = pod({ 'agents-chain.io/inject': 'true', 'agents-chain.io/policy': 'billing-policy', 'agents-chain.io/upstream-port': '3000' });
      const r = await review(annotated, 'uid-1');
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-1', allowed: true, patchType: 'JSONPatch' } });
      const ops = JSON.parse(Buffer.from(r.json.response.patch!, 'base64').toString()) as { op: string; path: string; value: unknown }[];
      const patched = applyPatch(annotated, ops);
      const expected = injectPodTemplate(annotated, { image: IMAGE });
      expect(expected.injected).toBe(true);
      expect(patched.spec).toEqual((expected as { template: { spec: unknown } }).template.spec);
      validateObject(patched);

      const plain = await review(pod({}), 'uid-2');
      expect(plain.json.response).toEqual({ uid: 'uid-2', allowed: true });
      // An already injected pod (a re-admission) is not patched again.
      const again = await review(patched, 'uid-3');
      expect(again.json.response).toEqual({ uid: 'uid-3', allowed: true });
      // A malformed pod does not take the webhook down: allowed unchanged, and the next review still works.
      const malformed = { ...annotated, spec: { containers: {} } };
      expect((await review(malformed, 'uid-4')).json.response).toEqual({ uid: 'uid-4', allowed: true });
      expect((await review(pod({}), 'uid-5')).json.response).toEqual({ uid: 'uid-5', allowed: true });
      const bad = await request(`${url}/mutate`, { method: 'POST', dispatcher: tls, body: '{"kind":"NotAReview"}' });
      expect(bad.statusCode).toBe(400);
      await bad.body.text();
    } finally {
      wh.child.kill('SIGTERM');
      await once(wh.child, 'exit');
      await tls.close();
    }
  });
});
