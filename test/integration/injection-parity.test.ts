import { once } from 'node:events';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { requireBuild, ROOT, runCli, startCli } from '../support/cli.js';
import { call } from '../support/http.js';
import { runHelm, skipWithoutHelm } from '../support/helm.js';
import { applyPatch, selfSignedCert } from '../support/kubernetes.js';

type Doc = Record<string, any>;
const toJS = (text: string): Doc[] =>
  parseAllDocuments(text)
    .map((d) => (d as { toJS(): Doc }).toJS())
    .filter(Boolean);

const POD: Doc = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: 'web',
    namespace: 'shop',
    labels: { app: 'web' },
    annotations: { 'agents-chain.io/inject': 'true', 'agents-chain.io/policy': 'web-policy' },
  },
  spec: {
    containers: [
      {
        name: 'app',
        image: 'registry.example.com/web:1',
        ports: [{ name: 'http', containerPort: 8080 }],
        readinessProbe: { httpGet: { path: '/ready', port: 'http' } },
      },
    ],
  },
};

describe.skipIf(skipWithoutHelm('the injection parity test'))('chart, CLI and webhook inject the same sidecar from one defaults ConfigMap', () => {
  it.each([
    ['iptables', []],
    ['port', ['--set', 'injection.captureMode=port', '--set', 'injection.port=18480', '--set', 'image.tag=9.9.9']],
  ] as const)('%s mode', async (_mode, set) => {
    requireBuild();
    const rendered = runHelm(['template', 'ac', `${ROOT}charts/agents-chain-sidecar`, '-n', 'agents-chain', ...set]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const docs = toJS(rendered.stdout);
    const configMap = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name.endsWith('-injection'))!;
    const webhook = docs.find((d) => d.kind === 'Deployment' && d.metadata.name.endsWith('-webhook'))!;
    // The webhook reads exactly that ConfigMap.
    const args: string[] = webhook.spec.template.spec.containers[0].args;
    const mount = webhook.spec.template.spec.containers[0].volumeMounts.find((m: Doc) => m.name === 'injection-defaults');
    expect(webhook.spec.template.spec.volumes.find((v: Doc) => v.name === 'injection-defaults').configMap.name).toBe(configMap.metadata.name);
    expect(args).toContain(`--defaults=${mount.mountPath}/defaults.yaml`);

    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-parity-'));
    const defaults = join(dir, 'defaults.yaml');
    await writeFile(defaults, configMap.data['defaults.yaml']);
    const cli = await runCli(['inject', '--defaults', defaults], {}, JSON.stringify(POD));
    expect(cli.code, cli.stderr).toBe(0);
    const [byCli] = toJS(cli.stdout);

    const cert = join(dir, 'tls.crt');
    const key = join(dir, 'tls.key');
    selfSignedCert(cert, key);
    const wh = await startCli(['webhook', '--tls-cert', cert, '--tls-key', key, '--listen', '127.0.0.1:0', `--defaults=${defaults}`], /webhook listening/);
    const tls = new Agent({ connect: { ca: await readFile(cert) } });
    try {
      const url = (JSON.parse(wh.line) as { listen: string }).listen;
      const r = await call(url, {
        method: 'POST',
        path: '/mutate',
        dispatcher: tls,
        body: {
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          request: { uid: 'u', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace: 'shop', object: POD },
        },
      });
      const response = (r.json as { response: { allowed: boolean; patch: string } }).response;
      expect(response.allowed).toBe(true);
      expect(applyPatch(POD, response.patch)).toEqual(byCli);
      const sidecar = byCli!.spec.containers.find((c: Doc) => c.name === 'agents-chain');
      const values = toJS(configMap.data['defaults.yaml'])[0]!;
      expect(sidecar.image).toBe(values.image);
      expect(sidecar.ports[0].containerPort).toBe(values.port);
      expect(JSON.parse(byCli!.metadata.annotations['agents-chain.io/status']).capture).toBe(values.captureMode);
    } finally {
      wh.child.kill('SIGTERM');
      await once(wh.child, 'exit');
      await tls.close();
    }
  });
});
