/**
 * The docs cannot drift: the command blocks of README.md, docs/getting-started.md and the registration and
 * approvals walk-throughs run here, in order, against the built CLI (`agents-chain` on PATH from a temp bin dir),
 * with real demo, app and sidecar processes started by the blocks themselves. test/support/doc-blocks.ts
 * says how a page marks what runs in the background, what does not run, and what output it shows.
 *
 * Two things differ from a reader's terminal, both so that this test can run beside the rest of the suite:
 * the documented ports (8080, 9090 and the app's 8081) are replaced with free ones in every block and in the
 * expected output, and `make demo` gets them through AGENTS_CHAIN_LISTEN / AGENTS_CHAIN_ADMIN, the overrides
 * the README documents. AGENTS_CHAIN_CHECKOUT, which the getting-started page asks the reader to set, is this
 * checkout.
 *
 * Also: every relative link in README.md and docs/ leads to a file that exists, and to a heading there.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, requireBuild } from '../support/cli.js';
import { anchorsOf, docSteps, DocSession, missingLines, relativeLinks, type Step } from '../support/doc-blocks.js';

const RUN_PAGES: { page: string; cwd: 'checkout' | 'scratch' }[] = [
  { page: 'README.md', cwd: 'checkout' },
  { page: 'docs/getting-started.md', cwd: 'scratch' },
  { page: 'docs/guides/registration.md', cwd: 'checkout' },
  { page: 'docs/guides/approvals.md', cwd: 'checkout' },
  { page: 'docs/guides/mcp.md', cwd: 'checkout' },
];

const tmp = mkdtempSync(join(tmpdir(), 'agents-chain-docs-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

/** A reader's environment: the built CLI on PATH, none of the suite's own AGENTS_CHAIN_* or npm_* settings. */
function readerEnv(bin: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('AGENTS_CHAIN_') && !k.startsWith('npm_') && k !== 'NODE_OPTIONS' && !k.startsWith('VITEST')) env[k] = v;
  }
  return { ...env, PATH: `${bin}:${process.env.PATH ?? ''}`, ...extra };
}

function describeStep(page: string, step: Step): string {
  return `${page}:${step.line}`;
}

async function runPage(page: string, cwdKind: 'checkout' | 'scratch'): Promise<{ ran: number; skipped: string[] }> {
  requireBuild();
  const dir = mkdtempSync(join(tmp, 'page-'));
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'agents-chain'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`);
  chmodSync(join(bin, 'agents-chain'), 0o755);
  const scratch = join(dir, 'work');
  mkdirSync(scratch);
  mkdirSync(join(dir, 'tmp'));
  const ports = new Map<string, number>();
  for (const p of ['8080', '9090', '8081']) ports.set(p, await freePort());
  const rewrite = (text: string): string => text.replace(/\b(8080|9090|8081)\b/g, (p) => String(ports.get(p)));
  const env = readerEnv(bin, {
    TMPDIR: join(dir, 'tmp'),
    AGENTS_CHAIN_CHECKOUT: ROOT,
    AGENTS_CHAIN_LISTEN: `127.0.0.1:${ports.get('8080')}`,
    AGENTS_CHAIN_ADMIN: `127.0.0.1:${ports.get('9090')}`,
  });
  const session = new DocSession(join(dir, 'state'), cwdKind === 'checkout' ? ROOT : scratch, env, rewrite);
  const steps = docSteps(readFileSync(join(ROOT, page), 'utf8'), page);
  let ran = 0;
  const skipped: string[] = [];
  try {
    for (const step of steps) {
      const where = describeStep(page, step);
      switch (step.kind) {
        case 'skip':
          skipped.push(`${where}: ${step.reason}`);
          break;
        case 'write':
          session.write(step.path, step.content);
          break;
        case 'background':
          await session.start(step.code, step.readyWhen, step.line);
          ran++;
          break;
        case 'stop':
          await session.stop();
          break;
        case 'run': {
          const result = await session.run(step.code);
          ran++;
          expect(result.code, `${where} exited ${result.code}:\n${step.code}\n--- output ---\n${result.output}`).toBe(step.exit);
          if (step.expect) {
            const missing = missingLines(step.expect.map(rewrite), result.output);
            expect(missing, `${where}: the output lacks these lines:\n${step.code}\n--- output ---\n${result.output}`).toEqual([]);
          }
          break;
        }
      }
    }
  } finally {
    await session.close();
  }
  return { ran, skipped };
}

describe('the command blocks of the docs run as written', () => {
  it('README.md: the demo, a signed call, a refusal, the metrics', async () => {
    const { ran, skipped } = await runPage('README.md', 'checkout');
    expect(ran).toBeGreaterThanOrEqual(4);
    expect(skipped.length).toBeLessThanOrEqual(3);
  }, 60_000);

  it('docs/getting-started.md: an app, a policy, the sidecar, the client helper, refusals, the audit trail', async () => {
    const { ran } = await runPage('docs/getting-started.md', 'scratch');
    expect(ran).toBeGreaterThanOrEqual(12);
  }, 60_000);

  it('docs/guides/registration.md: a host registers an agent, the agent calls, an operator revokes it', async () => {
    const { ran } = await runPage('docs/guides/registration.md', 'checkout');
    expect(ran).toBeGreaterThanOrEqual(4);
  }, 60_000);

  it('docs/guides/approvals.md: a refused call, request_permission, an operator approves for the value, then revokes it', async () => {
    const { ran, skipped } = await runPage('docs/guides/approvals.md', 'checkout');
    expect(ran).toBeGreaterThanOrEqual(11);
    expect(skipped.length).toBeLessThanOrEqual(2);
  }, 60_000);

  it('docs/guides/mcp.md: an MCP server behind the sidecar, the SDK client with createMcpFetch, refusals, request_permission', async () => {
    const { ran } = await runPage('docs/guides/mcp.md', 'checkout');
    expect(ran).toBeGreaterThanOrEqual(12);
  }, 90_000);
});

function markdownFiles(): string[] {
  const files = ['README.md'];
  const walk = (d: string): void => {
    for (const e of readdirSync(join(ROOT, d), { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.md')) files.push(p);
    }
  };
  walk('docs');
  return files;
}

describe('the docs hold together', () => {
  it('every page parses: no marker is misspelt or misplaced', () => {
    for (const file of markdownFiles()) expect(() => docSteps(readFileSync(join(ROOT, file), 'utf8'), file)).not.toThrow();
  });

  it('every relative link in README.md and docs/ leads to an existing file and heading', () => {
    const broken: string[] = [];
    const anchors = new Map<string, Set<string>>();
    const anchorsFor = (file: string): Set<string> => {
      if (!anchors.has(file)) anchors.set(file, anchorsOf(readFileSync(file, 'utf8')));
      return anchors.get(file)!;
    };
    const files = markdownFiles();
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) {
      const abs = join(ROOT, file);
      for (const { line, target } of relativeLinks(readFileSync(abs, 'utf8'))) {
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const dest = path === '' ? abs : resolve(dirname(abs), decodeURIComponent(path));
        if (!existsSync(dest)) {
          broken.push(`${file}:${line}: ${target} (no file ${relative(ROOT, dest)})`);
          continue;
        }
        if (anchor && dest.endsWith('.md') && !anchorsFor(dest).has(anchor)) {
          broken.push(`${file}:${line}: ${target} (no heading #${anchor} in ${relative(ROOT, dest)})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('a misspelt marker, a stray marker and missing output are caught (the runner can fail)', () => {
    expect(() => docSteps('<!-- run: backgrund, ready when: "x" -->\n```sh\nmake demo\n```\n')).toThrow(/unknown marker/);
    expect(() => docSteps('<!-- not run: a cluster -->\n\n```sh\nkubectl apply\n```\n')).toThrow(/right before/);
    expect(() => docSteps('<!-- output -->\n```text\nok\n```\n')).toThrow(/must follow a block that runs/);
    const steps = docSteps('```sh\necho hi\n```\n<!-- output -->\n```text\nh...i\n```\n<!-- not run: global -->\n```bash\nnpm link\n```\n');
    expect(steps.map((s) => s.kind)).toEqual(['run', 'skip']);
    expect(missingLines(['h...i', 'bye'], 'hi there')).toEqual(['bye']);
  });

  it('the link check finds a broken link and a broken anchor (it can fail)', () => {
    const links = relativeLinks('see [x](nowhere.md) and [y](#no-such-heading), not `[z](code.md)`');
    expect(links.map((l) => l.target)).toEqual(['nowhere.md', '#no-such-heading']);
    expect(anchorsOf('# Putting `agents-chain` on your PATH\n## Replicas: shared state in Redis').has('putting-agents-chain-on-your-path')).toBe(true);
    expect(anchorsOf('## Replicas: shared state in Redis').has('replicas-shared-state-in-redis')).toBe(true);
  });
});
