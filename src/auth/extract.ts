import { deny, type Denial } from '../errors.js';

export const MAX_TOKEN_BYTES = 4096;

/**
 * Takes the token from the one header that may carry it. Node keeps only the
 * first of repeated Authorization headers, so repeats are counted on the raw
 * header list: two tokens in one request is an attack or a bug, never a choice.
 */
export function extractToken(rawHeaders: readonly string[], headerName: string): string | Denial {
  const name = headerName.toLowerCase();
  let value: string | undefined;
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === name) {
      count++;
      value = rawHeaders[i + 1];
    }
  }
  if (count > 1) return deny('token_invalid', `more than one ${headerName} header`);
  if (count === 0 || value === undefined || value.trim() === '') return deny('token_missing', `no agent token in the ${headerName} header`);
  const m = /^Bearer +([^\s]+)\s*$/i.exec(value);
  let token: string;
  if (m) token = m[1]!;
  else if (name !== 'authorization' && !/\s/.test(value.trim())) token = value.trim();
  else return deny(name === 'authorization' ? 'token_missing' : 'token_invalid', `${headerName} must be "Bearer <agent+jwt>"`);
  if (token.length > MAX_TOKEN_BYTES) return deny('token_invalid', `token is longer than ${MAX_TOKEN_BYTES} bytes`);
  return token;
}

/**
 * Whether the request carries a token at all, as Envoy's `allow_missing` reads it: a Bearer
 * credential (even a malformed one) or a repeated header counts as sent; no header, or
 * Authorization with another scheme (Basic), does not.
 */
export function tokenSent(rawHeaders: readonly string[], headerName: string): boolean {
  const name = headerName.toLowerCase();
  let count = 0;
  let bearer = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== name) continue;
    count++;
    const value = rawHeaders[i + 1] ?? '';
    if (name === 'authorization' ? /^\s*bearer(\s|$)/i.test(value) : value.trim() !== '') bearer = true;
  }
  return count > 1 || bearer;
}
