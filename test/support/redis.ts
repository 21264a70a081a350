import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';

/** The Redis that .ci/run makes sure answers. */
export const REDIS_URL = process.env.AGENTS_CHAIN_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix of its own per test, so runs never see each other's keys (hash tag: Cluster-safe). */
export function testPrefix(name: string): string {
  return `agents-chain-test:{${name}-${randomBytes(6).toString('hex')}}:`;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** A second, disposable redis-server on a loopback port, for fault tests: start, kill, start again. */
export interface DisposableRedis {
  url: string;
  port: number;
  start(): Promise<void>;
  kill(): Promise<void>;
}

export async function disposableRedis(): Promise<DisposableRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const r: DisposableRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child!.stdout!.on('data', (d) => {
          out += d;
          if (/Ready to accept connections/.test(out)) resolve();
        });
        child!.on('exit', (code) => reject(new Error(`redis-server exited ${code}: ${out}`)));
      });
    },
    async kill() {
      if (!child || child.exitCode !== null) return;
      const c = child;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    },
  };
  return r;
}
