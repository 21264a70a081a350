import { deny, type Denial } from '../errors.js';

/** Decodes one application/x-www-form-urlencoded component ("+" is a space). */
function decodeComponent(s: string): string | undefined {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/**
 * Reads the query parameters a rule constrains. Every key is decoded before
 * comparison (so "am%6Funt" is "amount"); a constrained key sent twice, or
 * in a bracketed form a framework would fold into it ("amount[]",
 * "amount[0]"), is refused: apps disagree on which copy wins.
 */
export function readConstrainedQuery(
  query: string | undefined,
  names: ReadonlySet<string>,
): Map<string, string> | Denial {
  const out = new Map<string, string>();
  if (!query || names.size === 0) return out;
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const rawKey = eq === -1 ? pair : pair.slice(0, eq);
    const key = decodeComponent(rawKey);
    if (key === undefined) return deny('invalid_query', 'query has a malformed percent-encoding');
    const bracket = key.indexOf('[');
    if (bracket !== -1 && names.has(key.slice(0, bracket))) {
      return deny('invalid_query', `query parameter "${key.slice(0, bracket)}" must not use brackets`);
    }
    if (!names.has(key)) continue;
    if (out.has(key)) return deny('invalid_query', `query parameter "${key}" is repeated`);
    const value = decodeComponent(eq === -1 ? '' : pair.slice(eq + 1));
    if (value === undefined) return deny('invalid_query', 'query has a malformed percent-encoding');
    out.set(key, value);
  }
  return out;
}

/** Top-level names present in a query (decoded, brackets stripped). */
export function queryNames(query: string | undefined): Set<string> {
  const out = new Set<string>();
  if (!query) return out;
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    const key = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
    if (key === undefined) continue;
    const b = key.indexOf('[');
    out.add(b === -1 ? key : key.slice(0, b));
  }
  return out;
}
