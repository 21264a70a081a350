import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { requireBuild, runCli } from '../support/cli.js';
import { validateObject } from '../support/kubernetes.js';

const FIXTURE = readFileSync(new URL('../fixtures/kubernetes/workloads.yaml', import.meta.url), 'utf8');

const inject = (input: string) => runCli(['inject', '--image', 'registry.example.com/agents-chain:0.1.0'], {}, input);

describe('agents-chain inject (a Helm post-renderer)', () => {
  it('injects the annotated workloads of a multi-document file; the rest is written out unchanged; twice changes nothing', async () => {
    requireBuild();
    const first = await inject(FIXTURE);
    expect(first.code).toBe(0);
    expect(first.stderr).toContain('4 pod templates injected');
    const docs = parseAllDocuments(first.stdout).map((d) => (d as { toJS(): Record<string, any> }).toJS());
    expect(docs.map((d) => d.kind)).toEqual(['ConfigMap', 'Deployment', 'StatefulSet', 'Job', 'CronJob', 'Pod', 'Service']);
    for (const d of docs) validateObject(d);
    const images = (d: Record<string, any>) => JSON.stringify(d).match(/registry\.example\.com\/agents-chain:0\.1\.0/g)?.length ?? 0;
    expect(docs.map(images)).toEqual([0, 1, 1, 1, 1, 0, 0]);
    // Untouched documents keep their content and comments (the yaml library normalises spacing).
    expect(first.stdout).toContain('# agents reach the sidecar, never the app directly');
    expect(first.stdout).toContain("# A service's manifests as a chart renders them");
    const second = await inject(first.stdout);
    expect(second.stderr).toContain('0 pod templates injected');
    expect(second.stdout).toBe(first.stdout);
  });

  it('says which annotated workloads it could not inject, and refuses YAML it cannot parse', async () => {
    requireBuild();
    const missing = FIXTURE.replace('        agents-chain.io/policy: billing-policy\n', '');
    const r = await inject(missing);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('not injected: Deployment/billing: agents-chain.io/policy (the policy ConfigMap\'s name) is required');
    const broken = await inject('kind: Deployment\nspec: [unclosed\n');
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/stdin:\d+:\d+:/);
  });
});
