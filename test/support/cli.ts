import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = `${ROOT}dist/cli/main.js`;

export function requireBuild(): void {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `make build` (make test does) before the CLI tests');
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI to completion, with `stdin` as its standard input when given. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, stdin?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (stdin !== undefined) child.stdin!.end(stdin);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts a long-running CLI process and waits until a stdout line matches. */
export function startCli(args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; line: string; output: () => string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`CLI did not become ready:\n${out}`));
    }, 10_000);
    const onData = (d: Buffer): void => {
      out += d;
      const line = out.split('\n').find((l) => ready.test(l));
      if (line) {
        clearTimeout(timer);
        resolve({ child, line, output: () => out });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d) => (out += d));
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`CLI exited (${code}) before ready:\n${out}`));
    });
  });
}

/** The "startup failed" log line of a serve or webhook that could not start (src/cli/startup.ts). */
export interface StartupFailure {
  time: string;
  level: string;
  msg: string;
  command: string;
  error: string;
  code?: string;
  exitCode: number;
  issues?: { file: string; line: number; column: number; key: string; problem: string }[];
}

/**
 * A run that failed to start: every line of its stdout is JSON (the log shape), stderr is empty, nothing
 * looks like a stack trace, and the last line is the one "startup failed" line, whose exitCode is the process's.
 */
export function startupFailure(r: Run): StartupFailure {
  const lines = r.stdout.split('\n').filter(Boolean);
  const parsed = lines.map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      throw new Error(`a stdout line is not JSON: ${l}\n${r.stdout}${r.stderr}`);
    }
  });
  if (r.stderr !== '') throw new Error(`stderr is not empty:\n${r.stderr}`);
  if (/\n\s+at /.test(r.stdout) || /\\n\s+at /.test(r.stdout)) throw new Error(`a stack trace:\n${r.stdout}`);
  const failures = parsed.filter((p) => p.msg === 'startup failed');
  if (failures.length !== 1 || parsed.at(-1) !== failures[0]) throw new Error(`expected one "startup failed" line, last:\n${r.stdout}`);
  const f = failures[0] as unknown as StartupFailure;
  if (f.exitCode !== r.code) throw new Error(`the line says exit ${f.exitCode}, the process exited ${r.code}`);
  return f;
}

/** `agents-chain serve` of the billing example policy in front of `upstream`, both listeners on free ports, then `extra`. */
export function serveArgs(upstream: string, ...extra: string[]): string[] {
  return ['serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', upstream, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', ...extra];
}
