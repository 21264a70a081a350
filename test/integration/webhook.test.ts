import { once } from 'node:events';
import { copyFile, mkdtemp, readFile } from 'node:fs/promises';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { INJECT_DEFAULTS } from '../../src/kubernetes/defaults.js';
import { injectPodTemplate } from '../../src/kubernetes/inject.js';
import { requireBuild, startCli } from '../support/cli.js';
import { call } from '../support/http.js';
import { applyPatch, selfSignedCert, validateObject } from '../support/kubernetes.js';
import { until } from '../support/until.js';

const IMAGE = 'registry.example.com/agents-chain:0.1.0';

function pod(annotations: Record<string, string>) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'billing-7d9f-', namespace: 'billing', labels: { app: 'billing' }, annotations },
    spec: { containers: [{ name: 'app', image: 'registry.example.com/billing:1.4.2', ports: [{ name: 'http', containerPort: 3000 }] }] },
  };
}

describe('agents-chain webhook (mutating admission, AdmissionReview v1 over HTTPS)', () => {
  it('patches an annotated pod exactly as the injector does, denies one that cannot be injected, and allows others untouched', async () => {
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-webhook-'));
    const cert = join(dir, 'tls.crt');
    const key = join(dir, 'tls.key');
    selfSignedCert(cert, key, 'agents-chain-webhook.agents-chain.svc');
    const wh = await startCli(['webhook', '--tls-cert', cert, '--tls-key', key, '--listen', '127.0.0.1:0', '--image', IMAGE], /webhook listening/);
    const url = (JSON.parse(wh.line) as { listen: string }).listen;
    const tls = new Agent({ connect: { ca: await readFile(cert) } });
    const review = async (object: unknown, uid: string, path = '/mutate') => {
      const r = await call(url, {
        method: 'POST',
        path,
        dispatcher: tls,
        body: {
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          request: { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object },
        },
      });
      return {
        status: r.status,
        json: r.json as {
          apiVersion: string;
          kind: string;
          response: { uid: string; allowed: boolean; patchType?: string; patch?: string; warnings?: string[]; status?: { code: number; message: string } };
        },
      };
    };
    try {
      const annotated = pod({ 'agents-chain.io/inject': 'true', 'agents-chain.io/policy': 'billing-policy', 'agents-chain.io/upstream-port': '3000' });
      const r = await review(annotated, 'uid-1');
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        response: { uid: 'uid-1', allowed: true, patchType: 'JSONPatch' },
      });
      const patched = applyPatch(annotated, r.json.response.patch!);
      const expected = injectPodTemplate(annotated, { ...INJECT_DEFAULTS, image: IMAGE }, { kind: 'Pod' });
      if (expected.outcome !== 'injected') throw new Error(expected.outcome);
      expect(patched.spec).toEqual(expected.template.spec);
      expect(patched.metadata.annotations).toEqual(expected.template.metadata!.annotations);
      expect(patched.metadata.annotations['agents-chain.io/status']).toContain('"capture":"iptables"');
      validateObject(patched);

      const plain = await review(pod({}), 'uid-2');
      expect(plain.json.response).toEqual({ uid: 'uid-2', allowed: true });
      // An already injected pod (a re-admission) is not patched again.
      const again = await review(patched, 'uid-3');
      expect(again.json.response).toEqual({ uid: 'uid-3', allowed: true });
      // A pod that asks for the sidecar and cannot get it is denied, with the reasons: the rollout stops and says why.
      for (const [uid, annotations, reason] of [
        ['uid-4', { 'agents-chain.io/inject': 'true' }, /agents-chain.io\/policy .* is required/],
        [
          'uid-5',
          { 'agents-chain.io/inject': 'true', 'agents-chain.io/policy': 'p', 'agents-chain.io/port': 'http' },
          /agents-chain.io\/port must be a port number/,
        ],
        [
          'uid-6',
          { 'agents-chain.io/inject': 'true', 'agents-chain.io/policy': 'p', 'agents-chain.io/admin-port': '3000' },
          /port 3000 of container app is also the sidecar's/,
        ],
      ] as const) {
        const denied = await review(pod(annotations), uid);
        expect(denied.status).toBe(200);
        expect(denied.json.response).toMatchObject({ uid, allowed: false, status: { code: 403 } });
        expect(denied.json.response.status!.message).toMatch(reason);
        expect(denied.json.response.patch).toBeUndefined();
      }
      const malformed = { ...annotated, spec: { containers: {} } };
      expect((await review(malformed, 'uid-7')).json.response).toMatchObject({ uid: 'uid-7', allowed: false });
      // ...unless the pod opts into running unprotected: admitted with a warning, and marked.
      const optIn = await review(pod({ 'agents-chain.io/inject': 'true', 'agents-chain.io/allow-unprotected': 'true' }), 'uid-8');
      expect(optIn.json.response).toMatchObject({ uid: 'uid-8', allowed: true, patchType: 'JSONPatch' });
      expect(optIn.json.response.warnings!.join()).toMatch(/runs WITHOUT the sidecar/);
      const marked = applyPatch(pod({}), optIn.json.response.patch!);
      expect(JSON.parse(marked.metadata.annotations['agents-chain.io/status']!)).toMatchObject({ injected: false, unprotected: true });
      expect((await review(pod({}), 'uid-9')).json.response).toEqual({ uid: 'uid-9', allowed: true });

      // The guard (a validating webhook over the namespaces the injector does not watch): an annotated pod without the sidecar is refused.
      const guarded = await review(annotated, 'uid-10', '/validate');
      expect(guarded.json.response).toMatchObject({ uid: 'uid-10', allowed: false, status: { code: 403 } });
      expect(guarded.json.response.status!.message).toMatch(
        /not watched by the agents-chain injection webhook \(label it agents-chain.io\/injection=enabled\)/,
      );
      expect((await review(patched, 'uid-11', '/validate')).json.response).toEqual({ uid: 'uid-11', allowed: true });
      // An injected pod edited to run in the node's network (the capture rules would rewrite the node's): refused.
      const onHost = await review({ ...patched, spec: { ...patched.spec, hostNetwork: true } }, 'uid-14', '/validate');
      expect(onHost.json.response).toMatchObject({ uid: 'uid-14', allowed: false, status: { message: expect.stringMatching(/hostNetwork: true/) } });
      expect((await review(pod({}), 'uid-12', '/validate')).json.response).toEqual({ uid: 'uid-12', allowed: true });
      const openly = await review(pod({ 'agents-chain.io/inject': 'true', 'agents-chain.io/allow-unprotected': 'true' }), 'uid-13', '/validate');
      expect(openly.json.response).toMatchObject({ uid: 'uid-13', allowed: true, warnings: [expect.stringMatching(/WITHOUT the sidecar/)] });
      const bad = await call(url, { method: 'POST', path: '/mutate', dispatcher: tls, body: '{"kind":"NotAReview"}' });
      expect(bad.status).toBe(400);
    } finally {
      wh.child.kill('SIGTERM');
      await once(wh.child, 'exit');
      await tls.close();
    }
  });
});

describe('agents-chain webhook follows certificate renewals', () => {
  it('serves a renewed pair without a restart, and keeps the old one while the files do not match', async () => {
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-webhook-tls-'));
    const cert = join(dir, 'tls.crt');
    const key = join(dir, 'tls.key');
    const issue = (cn: string, certOut = cert, keyOut = key) => selfSignedCert(certOut, keyOut, cn);
    issue('first');
    const wh = await startCli(['webhook', '--tls-cert', cert, '--tls-key', key, '--listen', '127.0.0.1:0', '--tls-reload-ms', '200'], /webhook listening/);
    const { port } = new URL((JSON.parse(wh.line) as { listen: string }).listen);
    const served = () =>
      new Promise<string>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port: Number(port), rejectUnauthorized: false }, () => {
          resolve(String(s.getPeerCertificate().subject.CN));
          s.end();
        });
        s.on('error', reject);
      });
    try {
      expect(await served()).toBe('first');
      // A certificate whose key is not (yet) the one beside it: refused, the previous pair stays.
      issue('mismatched', join(dir, 'other.crt'), join(dir, 'other.key'));
      await copyFile(join(dir, 'other.crt'), cert);
      await until(() => wh.output().includes('webhook certificate not reloaded'));
      expect(await served()).toBe('first');
      // The renewed pair (as cert-manager writes it: both files) is served from the next read.
      issue('renewed');
      await until(async () => (await served()) === 'renewed');
      expect(wh.output()).toContain('webhook certificate reloaded');
    } finally {
      wh.child.kill('SIGTERM');
      await once(wh.child, 'exit');
    }
  });
});
