import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// hadolint-style rules for the Dockerfile (no container engine runs here, so the rules are a test).
const TEXT = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
// Instructions with their continuation lines joined, comments dropped.
const INSTRUCTIONS = TEXT.replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => {
    const [op, ...rest] = l.split(/\s+/);
    return { op: op!.toUpperCase(), args: rest.join(' ') };
  });
const ARGS = new Map(INSTRUCTIONS.filter((i) => i.op === 'ARG').map((i) => i.args.split('=') as [string, string]));
const expand = (s: string) => s.replace(/\$\{(\w+)\}/g, (_, n: string) => ARGS.get(n) ?? '');
const stages = () => {
  const out: { from: string; body: typeof INSTRUCTIONS }[] = [];
  for (const i of INSTRUCTIONS) {
    if (i.op === 'FROM') out.push({ from: expand(i.args.split(/\s+/)[0]!), body: [] });
    else out.at(-1)?.body.push(i);
  }
  return out;
};

describe('Dockerfile', () => {
  it('pins every base image by tag or digest, never latest; the runtime is Node 24 LTS', () => {
    for (const s of stages()) {
      expect(s.from, s.from).toMatch(/^[^:@\s]+(:[^@\s]+)?(@sha256:[0-9a-f]{64})?$/);
      expect(s.from).toMatch(/[:@]/);
      expect(s.from).not.toMatch(/:latest\b/);
    }
    expect(stages().at(-1)!.from).toMatch(/^node:24[.-]/);
  });

  it('runs as a numeric non-root user, with exec-form ENTRYPOINT agents-chain and CMD serve', () => {
    const runtime = stages().at(-1)!.body;
    const user = runtime.filter((i) => i.op === 'USER').at(-1);
    expect(user?.args).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
    expect(runtime.find((i) => i.op === 'ENTRYPOINT')?.args).toBe('["agents-chain"]');
    expect(runtime.find((i) => i.op === 'CMD')?.args).toBe('["serve"]');
  });

  it('installs with npm ci, ships production dependencies only, and never fetches with ADD', () => {
    expect(INSTRUCTIONS.some((i) => i.op === 'ADD')).toBe(false);
    const runs = INSTRUCTIONS.filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /npm install\b/.test(r))).toBe(false);
    expect(runs.some((r) => /npm ci\b/.test(r))).toBe(true);
    expect(runs.some((r) => /npm prune --omit=dev/.test(r))).toBe(true);
    // The runtime image installs iptables (for `agents-chain capture`), so there is an apt-get install to check:
    // without recommends, and the package lists removed in the same layer (hadolint DL3015, DL3009).
    const installs = runs.filter((r) => /apt-get install/.test(r));
    expect(
      installs.some((r) => /\biptables\b/.test(r)),
      'an apt-get install of iptables',
    ).toBe(true);
    for (const r of installs) {
      expect(r).toMatch(/--no-install-recommends/);
      expect(r).toMatch(/rm -rf \/var\/lib\/apt\/lists/);
    }
    // The runtime stage copies the pruned node_modules and dist, not the sources or dev tooling.
    const copies = stages()
      .at(-1)!
      .body.filter((i) => i.op === 'COPY')
      .map((i) => i.args);
    expect(copies.some((c) => /\bsrc\b/.test(c) && !/--from/.test(c))).toBe(false);
  });

  it("sets V8's semi-spaces for a 256Mi container (NODE_OPTIONS), as image-check and the bench read them", async () => {
    const { imageEnv } = await import('../image/env.mjs');
    expect(imageEnv()).toEqual({ NODE_ENV: 'production', NODE_OPTIONS: '--max-semi-space-size=4' });
    // Only the final stage's ENV: the build stage's do not reach the running image.
    expect(imageEnv('FROM a AS build\nENV X=1\nFROM b\nENV Y=2\n')).toEqual({ Y: '2' });
  });
});
