import { deny, type Denial } from '../errors.js';

/** A request target split the way the app will see it: raw bytes, nothing normalised. */
export interface RequestTarget {
  /** Raw path as sent, e.g. "/invoices/in%20v1". */
  path: string;
  /** Raw query without "?", or undefined when the target has none. */
  query: string | undefined;
  /** Raw path segments (after the leading "/"). */
  segments: string[];
}

// Encoded "/", "\", NUL: the app may decode them into structure the route never had.
const ENCODED_FORBIDDEN = /%(2f|5c|00)/i;

/**
 * Accepts only origin-form targets whose path cannot be read two ways.
 * Anything that a normalising server or framework might rewrite (dot
 * segments, "//", backslashes, encoded separators, ";" path params, "#") is
 * refused rather than guessed at: the sidecar must judge the same path the
 * app routes.
 */
export function parseTarget(raw: string | undefined): RequestTarget | Denial {
  if (!raw || raw[0] !== '/') return deny('invalid_path', 'request target must be origin-form (start with "/")');
  if (raw.includes('#')) return deny('invalid_path', 'request target must not contain "#"');
  const q = raw.indexOf('?');
  const path = q === -1 ? raw : raw.slice(0, q);
  const query = q === -1 ? undefined : raw.slice(q + 1);
  if (path.includes('\\')) return deny('invalid_path', 'path must not contain a backslash');
  if (path.includes(';')) return deny('invalid_path', 'path must not contain ";"');
  if (ENCODED_FORBIDDEN.test(path)) return deny('invalid_path', 'path must not contain an encoded "/", "\\" or NUL');
  const segments = path.slice(1).split('/');
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    // An empty segment is allowed only as the last one (a trailing slash).
    if (seg === '' && i < segments.length - 1) return deny('invalid_path', 'path must not contain "//"');
    const dots = seg.replace(/%2e/gi, '.');
    if (dots === '.' || dots === '..') return deny('invalid_path', 'path must not contain dot-segments');
    if (seg.includes('%') && !isValidPercentEncoding(seg)) return deny('invalid_path', 'path has a malformed percent-encoding');
  }
  return { path, query, segments };
}

function isValidPercentEncoding(s: string): boolean {
  try {
    decodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
}
