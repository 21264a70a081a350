import { readFile } from 'node:fs/promises';
import { createLogger } from '../log.js';
import { formatIssue, PolicyError } from '../policy/issues.js';
import { UsageError } from './args.js';

/**
 * How a long-running command (serve, webhook) reports that it could not start: one JSON log line on
 * stdout, in the shape of every other log line (src/log.ts), then a non-zero exit. stdout, because that
 * is where those commands write everything (logs, the "listening" line, `--audit-export stdout`); a
 * collector reading stdout then sees the failure beside the rest, with no plain-text line or stack to parse.
 *
 *   {"time":"…","level":"error","msg":"startup failed","command":"serve","error":"listen 127.0.0.1:8080 (--listen): address already in use (EADDRINUSE)","code":"EADDRINUSE","exitCode":1}
 *
 * Exit 2 for a usage error (a bad or missing flag), 1 for anything else.
 */
export async function failStartup(command: string, err: unknown): Promise<never> {
  const exitCode = err instanceof UsageError ? 2 : 1;
  const hint = err instanceof UsageError ? ` (agents-chain ${command} --help lists the options)` : '';
  const fields: Record<string, unknown> = { command, error: `${startupErrorText(err)}${hint}` };
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string') fields.code = code;
  if (err instanceof PolicyError) {
    fields.issues = err.issues.map((i) => ({ file: i.file, line: i.line, column: i.column, key: i.key, problem: i.message }));
  }
  fields.exitCode = exitCode;
  let line = '';
  createLogger('error', (l) => (line = l)).error('startup failed', fields);
  // Exit once the line is out: a listener opened before the failure would otherwise keep the process alive.
  await new Promise<void>((resolve) => process.stdout.write(line, () => resolve()));
  process.exit(exitCode);
}

/** One line saying what failed, without a stack: `listen 127.0.0.1:8080: address already in use (EADDRINUSE)`. */
export function startupErrorText(err: unknown, label?: string): string {
  if (err instanceof PolicyError) return `invalid policy, refusing to start: ${err.issues.map(formatIssue).join('; ')}`;
  if (!(err instanceof Error)) return String(err);
  // The usage text that follows a usage error is for a terminal (--help shows it): the first line says it all.
  const text = errnoText(err, label) ?? `${label ? `${label}: ` : ''}${err.message.split('\n\n')[0]!}`;
  return text.replace(/\s*\n\s*/g, '; ');
}

/**
 * A system error as "<syscall> <where> (<label>): <description> (<CODE>)". Node words them
 * "listen EADDRINUSE: address already in use 127.0.0.1:8080" or
 * "ENOENT: no such file or directory, open 'key.json'".
 */
function errnoText(e: NodeJS.ErrnoException & { address?: string; port?: number }, label?: string): string | undefined {
  if (typeof e.code !== 'string' || typeof e.syscall !== 'string') return undefined;
  const at = e.message.indexOf(`${e.code}: `);
  if (at < 0) return undefined;
  const host = e.address?.includes(':') ? `[${e.address}]` : e.address;
  const where = e.path ?? (host !== undefined ? (e.port !== undefined ? `${host}:${e.port}` : host) : undefined);
  let description = e.message.slice(at + e.code.length + 2).split(', ')[0]!;
  for (const tail of [e.address !== undefined && e.port !== undefined ? `${e.address}:${e.port}` : undefined, e.address]) {
    if (tail && description.endsWith(` ${tail}`)) {
      description = description.slice(0, -tail.length - 1);
      break;
    }
  }
  return `${e.syscall}${where !== undefined ? ` ${where}` : ''}${label ? ` (${label})` : ''}: ${description} (${e.code})`;
}

/** Reads the file a flag names; a failure names the flag: `open /x (--admin-token-file): no such file or directory (ENOENT)`. */
export async function readFlagFile(flag: string, file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new StartupError(startupErrorText(err, flag), err);
  }
}

/** A startup failure whose message already says what failed; `code` carries the system error code, if any. */
export class StartupError extends Error {
  readonly code?: string;
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    const code = (cause as NodeJS.ErrnoException | undefined)?.code;
    if (typeof code === 'string') this.code = code;
  }
}
