import { parseAppProbes, type AppProbes } from '../kubernetes/app-probes.js';
import { DEFAULT_DRAIN_DELAY_MS, parseHostPort } from '../sidecar/start.js';
import { UsageError } from './args.js';
import { StartupError, startupErrorText } from './startup.js';

/** `serve`'s flag values, checked: each refusal is a usage error naming the flag (and its variable). */

export function positive(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive whole number`);
  return n;
}

/** A whole number of milliseconds, 0 or more (0 turns the feature off); absent means the default. */
export function wholeMs(text: string | undefined, flag: string): number | undefined {
  if (text === undefined || text === '') return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`${flag} must be a whole number of milliseconds, 0 or more, got "${text}"`);
  return n;
}

/** --max-body: a whole number of bytes, 0 or more; absent means the default. */
export function maxBody(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`--max-body must be a whole number of bytes, got "${text}"`);
  return n;
}

/** --drain-delay-ms: 0 is allowed (no delay, as before the flag existed); absent means the default. */
export function drainDelay(text: string | undefined): number {
  if (text === undefined || text === '') return DEFAULT_DRAIN_DELAY_MS;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new UsageError(`--drain-delay-ms (AGENTS_CHAIN_DRAIN_DELAY_MS) must be a whole number of milliseconds, 0 or more, got "${text}"`);
  return n;
}

/** AGENTS_CHAIN_APP_PROBES (written by injection): a malformed value stops the start, naming the probe. */
export function appProbesFrom(text: string | undefined): AppProbes {
  try {
    return parseAppProbes(text);
  } catch (err) {
    throw new UsageError(`refusing to start: ${(err as Error).message}`);
  }
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** A listener that cannot bind names its flag: `listen 127.0.0.1:9090 (--admin): address already in use (EADDRINUSE)`. */
export function listenerError(err: unknown, listeners: Record<'--listen' | '--admin', string>): unknown {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.syscall !== 'listen' || e.port === undefined) return err;
  const ports = (Object.keys(listeners) as ('--listen' | '--admin')[]).filter((f) => parseHostPort(listeners[f], f).port === e.port);
  const exact = ports.filter((f) => parseHostPort(listeners[f], f).host === e.address);
  // --listen binds first: when both flags name the address, the second bind (--admin) is the one that failed.
  const flag = ports.length < 2 ? ports[0] : exact.length === 1 ? exact[0] : '--admin, the same port as --listen';
  return flag ? new StartupError(startupErrorText(err, flag), err) : err;
}

/**
 * The addresses, checked before anything starts: a usage error (exit 2) naming the flag, and the
 * environment variable when the value came from there, instead of a bare "Invalid URL" later.
 */
export function checkAddresses(
  upstream: string,
  listeners: { '--listen': string; '--admin': string },
  fromEnv: { upstream: boolean; listen: boolean; admin: boolean },
): void {
  const named = (flag: string, variable: string, env: boolean) => (env ? `${flag} (${variable})` : flag);
  let origin: URL | undefined;
  try {
    origin = new URL(upstream);
  } catch {
    origin = undefined;
  }
  if (!origin || (origin.protocol !== 'http:' && origin.protocol !== 'https:') || origin.pathname !== '/' || origin.search || origin.hash) {
    throw new UsageError(
      `${named('--upstream', 'AGENTS_CHAIN_UPSTREAM', fromEnv.upstream)} must be the app's http:// or https:// origin, e.g. http://127.0.0.1:8081, got "${upstream}"`,
    );
  }
  for (const [flag, variable, env] of [
    ['--listen', 'AGENTS_CHAIN_LISTEN', fromEnv.listen],
    ['--admin', 'AGENTS_CHAIN_ADMIN', fromEnv.admin],
  ] as const) {
    try {
      parseHostPort(listeners[flag], flag);
    } catch {
      throw new UsageError(
        `${named(flag, variable, env)} must be HOST:PORT (e.g. 127.0.0.1:8080, [::]:8080, or :8080 for every address), got "${listeners[flag]}"`,
      );
    }
  }
}
