import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, requireBuild, runCli } from '../../support/cli.js';

const EXAMPLE = `${ROOT}config/examples/mcp.yaml`;
const HAS_EXAMPLE = existsSync(EXAMPLE);

/** Two mcp: mistakes: a tool name that is no capability name (line 7), a URI template with a reserved expansion (line 10). */
const BAD = [
  'version: 1', //                                                         1
  'provider: { name: billing-mcp, issuer: https://billing.example.com }', // 2
  'mcp:', //                                                               3
  '  - path: /mcp', //                                                     4
  '    session: billing.mcp', //                                           5
  '    tools:', //                                                         6
  '      - name: send email', //                                           7 (value at column 15)
  '    resources:', //                                                     8
  '      - capability: file.read', //                                      9
  '        uri: "file://{+path}"', //                                     10 (value at column 14)
  '',
].join('\n');

describe('agents-chain policy check: the mcp: section', () => {
  let dir: string;
  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-mcp-check-'));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('prints each mcp mistake as FILE:LINE:COL: KEY: PROBLEM and exits 1', async () => {
    const bad = join(dir, 'bad-mcp.yaml');
    await writeFile(bad, BAD);
    const r = await runCli(['policy', 'check', bad]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.split('\n').filter(Boolean)).toEqual([
      `${bad}:7:15: mcp[0].tools[0].name: "send email" is not a capability name: give one with "capability:"`,
      `${bad}:10:14: mcp[0].resources[0].uri: "{+path}" is not a simple variable: only {name} is supported (letters, digits, _)`,
    ]);
  });

  it('exits 0 once both are fixed', async () => {
    const fixed = join(dir, 'fixed-mcp.yaml');
    await writeFile(fixed, BAD.replace('name: send email', 'name: send email\n        capability: send_email').replace('{+path}', '{path}'));
    const r = await runCli(['policy', 'check', fixed]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${fixed}: ok (3 capabilities, 0 agents, 0 grants)\n`);
  });

  it.skipIf(!HAS_EXAMPLE)(
    HAS_EXAMPLE ? 'config/examples/mcp.yaml passes (exit 0)' : 'config/examples/mcp.yaml: SKIPPED, the file does not exist (yet)',
    async () => {
      const r = await runCli(['policy', 'check', EXAMPLE]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^.*config\/examples\/mcp\.yaml: ok \(\d+ capabilit(y|ies), \d+ agents?, \d+ grants?(, \d+ hosts?)?\)\n$/);
    },
  );
});
