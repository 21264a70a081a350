import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { accessSync, constants } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type AddressInfo } from 'node:net';
import { requireBuild, ROOT, startupFailure } from '../support/cli.js';

const MAKEFILE = join(ROOT, 'Makefile');
const hasMake = spawnSync('make', ['--version']).status === 0;

/**
 * `make build` is incremental: the repository's Makefile, run in a small project of its own shape
 * (src/**, tsconfig.json, package-lock.json, node_modules with the real tsc), runs tsc only when an
 * input changed. The project is a copy so the test never rebuilds the dist/ other tests run.
 */
describe.skipIf(!hasMake)('make build / make demo', () => {
  let dir: string;
  const make = (...args: string[]) => {
    const r = spawnSync('make', ['--no-print-directory', '-f', MAKEFILE, ...args], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, AGENTS_CHAIN_LISTEN: '', AGENTS_CHAIN_ADMIN: '' },
    });
    return { status: r.status, out: `${r.stdout}${r.stderr}`, ranTsc: /npx tsc -p tsconfig\.json/.test(r.stdout) };
  };
  // Timestamps from a clock of the test's own, in the past and a whole second apart: no file system's
  // granularity hides a change, and the stamp a build leaves is set back on that clock after each build.
  let clock = Math.floor(Date.now() / 1000) - 100_000;
  const touch = async (...files: string[]) => {
    clock += 1;
    for (const f of files) await utimes(join(dir, f), clock, clock);
  };
  const build = async () => {
    const r = make('build');
    expect(r.status, r.out).toBe(0);
    await touch('dist/.build-stamp');
    return r;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-make-'));
    await mkdir(join(dir, 'src/cli'), { recursive: true });
    await mkdir(join(dir, 'src/demo'), { recursive: true });
    await mkdir(join(dir, 'node_modules/.bin'), { recursive: true });
    await writeFile(join(dir, 'src/cli/main.ts'), "console.log('cli');\n");
    // The demo recipe's program: it prints the overrides it was given.
    await writeFile(
      join(dir, 'src/demo/run.ts'),
      'declare const process: { env: Record<string, string | undefined> };\nconsole.log(JSON.stringify({ listen: process.env.AGENTS_CHAIN_LISTEN, admin: process.env.AGENTS_CHAIN_ADMIN }));\n',
    );
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'ES2022', outDir: 'dist', rootDir: 'src', types: [] }, include: ['src'] }),
    );
    await writeFile(join(dir, 'package.json'), '{ "type": "module" }\n');
    await writeFile(join(dir, 'package-lock.json'), '{}\n');
    // Installed after package.json and the lock (so make never runs npm ci here), with the repository's tsc.
    await writeFile(join(dir, 'node_modules/.package-lock.json'), '{}\n');
    await symlink(join(ROOT, 'node_modules/typescript/bin/tsc'), join(dir, 'node_modules/.bin/tsc'));
    await touch('package.json', 'package-lock.json');
    await touch('node_modules/.package-lock.json', 'tsconfig.json', 'src', 'src/cli', 'src/demo', 'src/cli/main.ts', 'src/demo/run.ts');
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('runs tsc on the first build only; a changed, added or removed source, tsconfig.json or the lock file runs it again', async () => {
    const first = await build();
    expect(first.ranTsc, first.out).toBe(true);
    accessSync(join(dir, 'dist/cli/main.js'), constants.X_OK);
    const again = await build();
    expect(again.ranTsc, again.out).toBe(false);

    await touch('src/cli/main.ts');
    expect((await build()).ranTsc).toBe(true);
    expect((await build()).ranTsc).toBe(false);

    await writeFile(join(dir, 'src/cli/extra.ts'), 'export const x = 1;\n');
    await touch('src/cli/extra.ts', 'src/cli');
    expect((await build()).ranTsc).toBe(true);
    await rm(join(dir, 'src/cli/extra.ts'));
    await touch('src/cli'); // what the removal did to the folder
    expect((await build()).ranTsc).toBe(true);
    expect((await build()).ranTsc).toBe(false);

    await touch('tsconfig.json');
    expect((await build()).ranTsc).toBe(true);
    await touch('package-lock.json');
    await touch('node_modules/.package-lock.json'); // as npm ci leaves it, after the lock
    expect((await build()).ranTsc).toBe(true);
    expect((await build()).ranTsc).toBe(false);
  }, 90_000); // seven runs of tsc

  it('a second make demo does not compile, and passes the port overrides (make VAR=... and VAR=... make) to the demo', async () => {
    await build();
    const demo = make('demo', 'AGENTS_CHAIN_LISTEN=127.0.0.1:18080', 'AGENTS_CHAIN_ADMIN=127.0.0.1:19090');
    expect(demo.status, demo.out).toBe(0);
    expect(demo.ranTsc, demo.out).toBe(false);
    expect(demo.out).toContain('{"listen":"127.0.0.1:18080","admin":"127.0.0.1:19090"}');
    const viaEnv = spawnSync('make', ['--no-print-directory', '-f', MAKEFILE, 'demo'], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, AGENTS_CHAIN_LISTEN: '127.0.0.1:18081', AGENTS_CHAIN_ADMIN: '127.0.0.1:19091' },
    });
    expect(viaEnv.stdout).toContain('{"listen":"127.0.0.1:18081","admin":"127.0.0.1:19091"}');
    expect(viaEnv.stdout).not.toMatch(/npx tsc/);
  });

  it('the real demo listens where the overrides say', async () => {
    requireBuild();
    // -o build: the dist/ the suite was built with, never recompiled under the other tests.
    const child = spawn('make', ['--no-print-directory', '-o', 'build', 'demo', 'AGENTS_CHAIN_LISTEN=127.0.0.1:0', 'AGENTS_CHAIN_ADMIN=127.0.0.1:0'], {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      const urls = await new Promise<{ sidecar: string; admin: string }>((resolve, reject) => {
        const look = (d: Buffer): void => {
          out += d;
          const m = /agents-chain demo: sidecar (http:\/\/127\.0\.0\.1:\d+) -> app \S+ \(admin (http:\/\/127\.0\.0\.1:\d+)\)/.exec(out);
          if (m) resolve({ sidecar: m[1]!, admin: m[2]! });
        };
        child.stdout!.on('data', look);
        child.stderr!.on('data', look);
        child.once('exit', (code) => reject(new Error(`make demo exited ${code}:\n${out}`)));
      });
      for (const url of [urls.sidecar, urls.admin]) expect(url).not.toMatch(/:(8080|9090)$/);
      expect(out).not.toMatch(/npx tsc/);
      expect((await fetch(`${urls.admin}/healthz`)).status).toBe(200);
    } finally {
      const exited = once(child, 'exit');
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
  });

  it('a busy demo port is one "startup failed" log line naming the variable, no stack', async () => {
    requireBuild();
    const held = createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const busy = `127.0.0.1:${(held.address() as AddressInfo).port}`;
    try {
      const run = spawnSync(process.execPath, [join(ROOT, 'dist/demo/run.js')], {
        encoding: 'utf8',
        env: { ...process.env, AGENTS_CHAIN_LISTEN: busy, AGENTS_CHAIN_ADMIN: '127.0.0.1:0' },
      });
      expect(startupFailure({ code: run.status, stdout: run.stdout, stderr: run.stderr })).toMatchObject({
        command: 'demo',
        error: `listen ${busy} (AGENTS_CHAIN_LISTEN): address already in use (EADDRINUSE)`,
        code: 'EADDRINUSE',
        exitCode: 1,
      });
    } finally {
      await new Promise((r) => held.close(r));
    }
  });
});
