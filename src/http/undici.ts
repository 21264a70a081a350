import { createRequire } from 'node:module';
import type * as Undici from 'undici';

// The sidecar calls undici's Pool and its request API, and `request` for webhooks and collectors. undici's
// index also loads fetch, WebSocket, EventSource, the HTTP cache, the interceptors and the mock agent: about
// 9 MB resident in every pod, none of it called. These are the modules index.js itself combines (undici 7);
// a layout change fails at startup and in test/unit/http/undici.test.ts, never silently.
const require = createRequire(import.meta.url);
const api = require('undici/lib/api/index.js') as object;
const dispatcher = require('undici/lib/dispatcher/dispatcher.js') as { prototype: object };
// What index.js does: request(), stream(), ... on every dispatcher.
Object.assign(dispatcher.prototype, api);
const global = require('undici/lib/global.js') as { getGlobalDispatcher(): Undici.Dispatcher };

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof Undici.Pool;
export type Pool = Undici.Pool;

/** undici's request(url, options), on the global dispatcher as undici's own is. */
export function request(url: string, options: Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & { method: Undici.Dispatcher.HttpMethod }) {
  const u = new URL(url);
  return global.getGlobalDispatcher().request({ ...options, origin: u.origin, path: `${u.pathname}${u.search}` });
}
