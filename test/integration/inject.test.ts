import { mkdtemp, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { requireBuild, runCli } from '../support/cli.js';
import { validateObject } from '../support/kubernetes.js';

const FIXTURE = readFileSync(new URL('../fixtures/kubernetes/workloads.yaml', import.meta.url), 'utf8');

const inject = (input: string, ...extra: string[]) => runCli(['inject', '--image', 'registry.example.com/agents-chain:0.1.0', ...extra], {}, input);
const toJS = (text: string) => parseAllDocuments(text).map((d) => (d as { toJS(): Record<string, any> }).toJS());

describe('agents-chain inject (a Helm post-renderer)', () => {
  it('injects the annotated workloads of a multi-document file; the rest is written out unchanged; twice changes nothing', async () => {
    requireBuild();
    const first = await inject(FIXTURE);
    expect(first.stderr).toContain('4 pod templates injected');
    expect(first.code).toBe(0);
    const docs = toJS(first.stdout);
    expect(docs.map((d) => d.kind)).toEqual(['ConfigMap', 'Deployment', 'StatefulSet', 'Job', 'CronJob', 'Pod', 'Service']);
    for (const d of docs) validateObject(d);
    const images = (d: Record<string, any>) => JSON.stringify(d).match(/registry\.example\.com\/agents-chain:0\.1\.0/g)?.length ?? 0;
    // Sidecar + capture init container in iptables mode; the sidecar alone in port mode (the CronJob).
    expect(docs.map(images)).toEqual([0, 2, 2, 2, 1, 0, 0]);
    // A Deployment of 3 replicas without a shared Redis: a warning, not a refusal.
    expect(first.stderr).toMatch(/warning: Deployment\/billing: 3 replicas without agents-chain.io\/redis-secret/);
    // Untouched documents keep their content and comments (the yaml library normalises spacing).
    expect(first.stdout).toContain("# unchanged: in iptables mode the app's port lands in the sidecar");
    expect(first.stdout).toContain("# A service's manifests as a chart renders them");
    const second = await inject(first.stdout);
    expect(second.stderr).toContain('0 pod templates injected');
    expect(second.stdout).toBe(first.stdout);
  });

  it.each([
    [
      'without a policy',
      (s: string) => s.replace('        agents-chain.io/policy: billing-policy\n', ''),
      /cannot inject Deployment\/billing: agents-chain.io\/policy \(the policy ConfigMap's name\) is required/,
    ],
    [
      'with a bad port',
      (s: string) => s.replace('agents-chain.io/upstream-port: "3000"', 'agents-chain.io/upstream-port: "70000"'),
      /cannot inject Deployment\/billing: agents-chain.io\/upstream-port must be a port number/,
    ],
    [
      'with a port clash',
      (s: string) =>
        s.replace('{ name: http, containerPort: 3000 }', '{ name: http, containerPort: 3000 }\n            - { name: other, containerPort: 17480 }'),
      /cannot inject Deployment\/billing: port 17480 of container app is also the sidecar's/,
    ],
  ])('fails closed on an annotated pod %s: exit 1, the object and the reason, nothing on stdout', async (_what, edit, reason) => {
    requireBuild();
    const r = await inject(edit(FIXTURE));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(reason);
    expect(r.stdout).toBe('');
  });

  it('checks a policy ConfigMap shipped in the same stream as the sidecar will load it: a broken policy, or approvals without an admin token, stop the install', async () => {
    requireBuild();
    const broken = await inject(FIXTURE.replace(/  policy\.yaml: \|\n    /, '  policy.yaml: |\n    bogus: 1\n    '));
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/cannot inject Deployment\/billing: its policy would not load:\n  ConfigMap\/billing-policy:policy\.yaml:1:1: /);
    const sms = readFileSync(new URL('../../config/examples/sms.yaml', import.meta.url), 'utf8');
    const approvals = FIXTURE.replace(
      /  policy\.yaml: \|\n(    .*\n)+/,
      `  policy.yaml: |\n${sms
        .split('\n')
        .map((l) => `    ${l}`)
        .join('\n')}\n`,
    );
    const noToken = await inject(approvals);
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain(
      'cannot inject Deployment/billing: its policy has accessRequests, so the sidecar would refuse to start: set agents-chain.io/admin-token-secret',
    );
    const withToken = await inject(
      approvals.replace(
        '        agents-chain.io/audit-key-secret: billing-audit-key\n',
        '        agents-chain.io/audit-key-secret: billing-audit-key\n        agents-chain.io/admin-token-secret: billing-admin\n',
      ),
    );
    expect(withToken.stderr).toContain('4 pod templates injected');
  });

  it('passes a pod that opts into running unprotected, marked and warned about', async () => {
    requireBuild();
    const text = FIXTURE.replace('        agents-chain.io/policy: billing-policy\n', '        agents-chain.io/allow-unprotected: "true"\n');
    const r = await inject(text);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/warning: Deployment\/billing: runs WITHOUT the sidecar/);
    const billing = toJS(r.stdout).find((d) => d.metadata.name === 'billing')!;
    expect(JSON.parse(billing.spec.template.metadata.annotations['agents-chain.io/status'])).toMatchObject({ injected: false, unprotected: true });
    expect(billing.spec.template.spec.containers.map((c: { name: string }) => c.name)).toEqual(['app', 'log-shipper']);
  });

  it("reads the injection defaults file (the chart's ConfigMap), and names file, line and key when it is wrong", async () => {
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-inject-'));
    const good = join(dir, 'defaults.yaml');
    await writeFile(good, 'image: registry.example.com/agents-chain:9.9.9\ncaptureMode: port\nport: 18480\nadminPort: 18490\nlogLevel: warn\n');
    const pod =
      'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations: { agents-chain.io/inject: "true", agents-chain.io/policy: web-policy }\nspec:\n  containers:\n    - { name: app, image: web, ports: [{ name: http, containerPort: 8080 }] }\n';
    const r = await runCli(['inject', '--defaults', good], {}, pod);
    expect(r.code).toBe(0);
    const [out] = toJS(r.stdout);
    const sidecar = out!.spec.containers.find((c: { name: string }) => c.name === 'agents-chain');
    expect(sidecar.image).toBe('registry.example.com/agents-chain:9.9.9');
    expect(sidecar.ports[0]).toEqual({ name: 'http', containerPort: 18480, protocol: 'TCP' });
    expect(sidecar.env[0]).toEqual({ name: 'AGENTS_CHAIN_LOG_LEVEL', value: 'warn' });
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'image: x\ncaptureMode: ebpf\n');
    const e = await runCli(['inject', '--defaults', bad], {}, pod);
    expect(e.code).toBe(1);
    expect(e.stderr).toContain(`${bad}:2:14: captureMode must be iptables or port`);
  });

  it('reads YAML as helm and kubectl do (1.1): `hostNetwork: yes` is refused, a merge key is followed, and "yes" stays a string', async () => {
    requireBuild();
    const base =
      'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations: { agents-chain.io/inject: "true", agents-chain.io/policy: web-policy }\nspec:\n  containers:\n    - { name: app, image: web, ports: [{ name: http, containerPort: 8080 }], env: [{ name: FLAG, value: "yes" }] }\n';
    const onHost = await runCli(['inject'], {}, `${base}  hostNetwork: yes\n`);
    expect(onHost.code).toBe(1);
    expect(onHost.stderr).toMatch(/cannot inject Pod\/web: the pod uses hostNetwork: true/);
    const merged = await runCli(
      ['inject'],
      {},
      base.replace(
        '  annotations: { agents-chain.io/inject: "true", agents-chain.io/policy: web-policy }\n',
        '  <<: &meta { annotations: { agents-chain.io/inject: "true", agents-chain.io/policy: web-policy } }\n',
      ),
    );
    expect(merged.stderr).toContain('1 pod template injected');
    const ok = await runCli(['inject'], {}, base);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/value: "yes"|value: 'yes'/);
  });

  it('refuses YAML it cannot parse, naming line and column', async () => {
    requireBuild();
    const broken = await inject('kind: Deployment\nspec: [unclosed\n');
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/stdin:\d+:\d+:/);
  });
});
