import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './cli.js';
import { call } from './http.js';
import { until } from './until.js';

/**
 * Real apps in four stacks (test/fixtures/backends/), each reporting what it
 * read from a request. A backend whose tool is missing is reported with the
 * reason, for the test to skip (CI installs php-cli and golang-go).
 */
export type BackendName = 'php' | 'go' | 'python' | 'node';
export const BACKENDS: readonly BackendName[] = ['php', 'go', 'python', 'node'];

/** What the app read, as its own parsers give it. */
export interface Seen {
  backend: BackendName;
  method: string;
  requestMethod: string;
  path: string;
  query: Record<string, unknown>;
  headers: Record<string, string>;
  names: string[];
  remote: string;
}

export interface Backend {
  name: BackendName;
  url: string;
  /** Every request the app handled, oldest first. */
  seen(): Seen[];
  close(): Promise<void>;
}

const FIXTURES = join(ROOT, 'test/fixtures/backends');
const TOOL: Record<BackendName, string> = { php: 'php', go: 'go', python: 'python3', node: process.execPath };

/** Why a backend cannot run here, or undefined when it can. */
export function missingTool(name: BackendName): string | undefined {
  if (name === 'node') return undefined;
  const r = spawnSync(TOOL[name], [name === 'go' ? 'version' : '--version'], { encoding: 'utf8' });
  return r.error || r.status !== 0
    ? `${TOOL[name]} is not installed (apt-get install ${name === 'php' ? 'php-cli' : name === 'go' ? 'golang-go' : 'python3'})`
    : undefined;
}

/** Builds the Go backend once per source version (go build, standard library only), into the temp dir. */
function goBinary(): string {
  const source = join(FIXTURES, 'go/main.go');
  const hash = createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 12);
  const dir = join(tmpdir(), 'agents-chain-go-backend');
  const bin = join(dir, `echo-${hash}`);
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  const env = { ...process.env, GOCACHE: join(dir, 'cache'), GOPATH: join(dir, 'gopath'), GOFLAGS: '', GO111MODULE: 'auto', CGO_ENABLED: '0' };
  const tmp = `${bin}.tmp-${process.pid}`;
  const r = spawnSync('go', ['build', '-o', tmp, source], { env, encoding: 'utf8', cwd: join(FIXTURES, 'go') });
  if (r.status !== 0) throw new Error(`go build failed: ${r.stderr || r.error?.message}`);
  // Several test workers may build at once: the rename is atomic, the last one wins with identical bytes.
  spawnSync('mv', ['-f', tmp, bin]);
  return bin;
}

function command(name: BackendName, port: number): [string, string[]] {
  switch (name) {
    case 'php':
      return ['php', ['-d', 'display_errors=stderr', '-S', `127.0.0.1:${port}`, join(FIXTURES, 'php/echo.php')]];
    case 'go':
      return [goBinary(), [String(port)]];
    case 'python':
      return ['python3', [join(FIXTURES, 'python/echo.py'), String(port)]];
    case 'node':
      return [process.execPath, [join(FIXTURES, 'node/echo.mjs'), String(port)]];
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Starts one backend and waits until it answers. */
export async function startBackend(name: BackendName): Promise<Backend> {
  const port = await freePort();
  const dir = join(tmpdir(), `agents-chain-backend-${name}-${process.pid}-${port}`);
  mkdirSync(dir, { recursive: true });
  const log = join(dir, 'seen.jsonl');
  writeFileSync(log, '');
  const [cmd, args] = command(name, port);
  const child: ChildProcess = spawn(cmd, args, { env: { ...process.env, BACKEND_LOG: log }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const url = `http://127.0.0.1:${port}`;
  const answers = async (): Promise<boolean> => {
    if (child.exitCode !== null) throw new Error(`${name} backend exited (${child.exitCode}): ${stderr}`);
    return call(url, { path: '/__ready' }).then(
      (r) => r.status === 200,
      () => false,
    ); // refused: not up yet
  };
  await until(answers, 10_000).catch((err: Error) => {
    child.kill('SIGKILL');
    throw new Error(err.message.includes('exited') ? err.message : `${name} backend did not answer on ${url}: ${stderr}`);
  });
  const seen = (): Seen[] =>
    readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Seen)
      .filter((s) => s.path !== '/__ready');
  return {
    name,
    url,
    seen,
    close: () =>
      new Promise((resolve) => {
        const done = (): void => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        };
        if (child.exitCode !== null) return done();
        child.once('exit', done);
        child.kill('SIGTERM');
      }),
  };
}
