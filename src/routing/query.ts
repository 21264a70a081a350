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
  const lowered = new Map([...names].map((n) => [n.toLowerCase(), n]));
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const rawKey = eq === -1 ? pair : pair.slice(0, eq);
    const key = decodeComponent(rawKey);
    if (key === undefined) return deny('invalid_query', 'query has a malformed percent-encoding');
    // "a[b]", "a[]" and "A.B" are how various frameworks spell or fold "a.b".
    const canonical = key.replace(/\[([^\]]*)\]/g, (_, inner: string) => (inner === '' || /^\d+$/.test(inner) ? '' : `.${inner}`)).toLowerCase();
    const target = lowered.get(canonical) ?? lowered.get(key.split('[')[0]!.toLowerCase());
    if (target !== undefined && key !== target) {
      return deny('invalid_query', `query parameter "${key}" is another spelling of the constrained "${target}"; send it once, as "${target}"`);
    }
    if (!names.has(key)) continue;
    if (out.has(key)) return deny('invalid_query', `query parameter "${key}" is repeated`);
    const value = decodeComponent(eq === -1 ? '' : pair.slice(eq + 1));
    if (value === undefined) return deny('invalid_query', 'query has a malformed percent-encoding');
    out.set(key, value);
  }
  return out;
}

/**
 * Refuses what makes a query read differently by different servers: raw ";"
 * (a separator for some), and the "_method" override (Laravel, Symfony,
 * method-override) that would turn the checked method into another.
 */
export function checkQueryShape(query: string | undefined): Denial | undefined {
  if (!query) return undefined;
  if (query.includes(';')) return deny('invalid_query', 'query must not contain a raw ";" (some servers split on it); encode it as %3B');
  for (const name of queryNames(query)) {
    if (name.toLowerCase() === '_method') return deny('invalid_query', 'the "_method" override is not accepted; use the real HTTP method');
  }
  return undefined;
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
