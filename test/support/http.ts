import { expect } from 'vitest';
import { request } from 'undici';
import type { Env } from './fixture.js';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

export async function send(
  env: Env,
  opts: { method?: string; path: string; token?: string; body?: string | Buffer; headers?: Record<string, string> },
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  const res = await request(`${env.sidecar.url}${opts.path}`, { method: (opts.method ?? 'GET') as 'GET', headers, body: opts.body });
  const text = await res.body.text();
  let json: unknown;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.statusCode, headers: res.headers, text, json };
}

/**
 * A denial: right status, right code, a JSON body — and the app saw nothing.
 * Call `seen = env.app.requests.length` before sending.
 */
export function expectDenied(env: Env, seen: number, reply: { status: number; json?: any; text?: string }, status: number, code: string): void {
  expect({ status: reply.status, error: reply.json?.error }).toEqual({ status, error: code });
  expect(typeof reply.json.message).toBe('string');
  expect(env.app.requests.length).toBe(seen);
}

/** A valid createInvoice body. */
export function invoice(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({ customerId: 'c-100', amount: 500, currency: 'USD', customer: { tier: 'gold' }, dryRun: false, ...overrides });
}
