import { expect } from 'vitest';
import { request, type Dispatcher } from 'undici';
import type { Recorder } from './recorder.js';

/**
 * The tests' one HTTP client (undici). For bytes a client library would refuse or normalise (a request target
 * as written, a broken header line, smuggling shapes) use `rawSocketRequest` in raw-socket.ts instead.
 */
export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body parsed as JSON; undefined when it is empty or not JSON (then see `text`). */
  json: any;
}

export interface CallOptions {
  method?: string;
  /** Appended to the base URL [none]. */
  path?: string;
  /** Sent as `authorization: Bearer <token>`. */
  token?: string;
  /** A string or bytes are sent as they are; anything else as JSON. Either way `content-type: application/json` unless a content-type is given. */
  body?: unknown;
  /** An array value sends the header once per element (two Authorization headers). */
  headers?: Record<string, string | string[]>;
  /** A connection pool of the caller's (TLS options, keep-alive control). */
  dispatcher?: Dispatcher;
}

/** One request to `base` (a URL, or anything with `url`: a test sidecar, a recorder) and its whole answer. */
export async function call(base: string | { url: string }, opts: CallOptions = {}): Promise<Reply> {
  const res = await open(base, opts);
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

/**
 * The same request as `call`, answered as soon as the response head arrives: the body is read as it comes
 * (streaming answers, calls held by the app or by a human). Read or dump the body.
 */
export function open(base: string | { url: string }, opts: CallOptions = {}): Promise<Dispatcher.ResponseData> {
  const url = `${typeof base === 'string' ? base : base.url}${opts.path ?? ''}`;
  const headers: Record<string, string | string[]> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  }
  return request(url, { method: (opts.method ?? 'GET') as 'GET', headers, body, dispatcher: opts.dispatcher });
}

/**
 * A denial: right status, right code, a JSON body — and the app saw nothing.
 * Call `seen = env.app.requests.length` before sending.
 */
export function expectDenied(env: { app: Recorder }, seen: number, reply: { status: number; json?: any; text?: string }, status: number, code: string): void {
  expect({ status: reply.status, error: reply.json?.error }).toEqual({ status, error: code });
  expect(typeof reply.json.message).toBe('string');
  expect(env.app.requests.length).toBe(seen);
}

/** A valid createInvoice body. */
export function invoice(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({ customerId: 'c-100', amount: 500, currency: 'USD', customer: { tier: 'gold' }, dryRun: false, ...overrides });
}
