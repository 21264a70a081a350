import { deny, type Denial } from '../errors.js';

/**
 * Query pairs read by default: well under the 1000 at which Node's
 * querystring, qs (Express) and PHP (max_input_vars) stop reading, so no
 * pair the sidecar checks is one the app never sees.
 */
export const DEFAULT_MAX_QUERY_PARAMS = 256;

/** Decodes one application/x-www-form-urlencoded component ("+" is a space). */
function decodeComponent(s: string): string | undefined {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/**
 * A key as the most lenient parsers read it when it is not valid
 * percent-encoding: PHP's urldecode and qs keep a bad "%" as it is and
 * decode the rest byte by byte, so "_method%00%zz" is still "_method" then
 * NUL to PHP and "[amount]%C0" is still "[amount]…" to qs. Bytes become
 * Latin-1 characters: enough for ASCII names, which are what is compared.
 */
function lenientDecode(s: string): string {
  return s.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** A "%" not followed by two hex digits: the only escape no decoder agrees on ("%zz", a lone "%", "%4"). */
const BAD_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

/**
 * A key decoded strictly, or leniently when strict decoding fails. Only a
 * real bad escape marks it malformed: valid escapes of bytes that are not
 * UTF-8 ("caf%E9", a Latin-1 form) are read leniently, as Latin-1, which is
 * how PHP and qs compare them to ASCII names.
 */
function decodeKey(raw: string): { key: string; malformed: boolean } {
  const key = decodeComponent(raw);
  return key === undefined ? { key: lenientDecode(raw), malformed: BAD_ESCAPE.test(raw) } : { key, malformed: false };
}

/**
 * The top-level name PHP registers for a decoded key (main/php_variables.c,
 * checked against php 8.2's own server): the name ends at a NUL, leading
 * spaces are skipped, " " and "." become "_", and a "[" with no "]" after it
 * becomes "_" too, with every " ", "." and "[" after it ("per.page",
 * "per page", "per[page", " per_page", "per_page\0x" are all "per_page";
 * ".method" is "_method"). An empty name is dropped (undefined).
 */
export function phpName(key: string): string | undefined {
  const nul = key.indexOf('\0');
  let name = (nul === -1 ? key : key.slice(0, nul)).replace(/^ +/, '');
  const open = name.indexOf('[');
  const base = underscored(open === -1 ? name : name.slice(0, open), false);
  if (base === '') return undefined;
  if (open === -1) return base;
  const rest = name.slice(open + 1);
  if (rest.includes(']')) return base; // an array: base is the top-level name
  name = `${base}_${underscored(rest, true)}`;
  return name;
}

const UTF16 = new TextDecoder('utf-16le', { ignoreBOM: true }); // keep a leading U+FEFF

/**
 * `s` with " " and "." (and "[" when asked) replaced by "_". One pass over a
 * code-unit array: a regex replace with a match per character takes ~100 ms
 * on 1 MB of "[" (an agent-controlled name), this ~10 ms.
 */
function underscored(s: string, bracket: boolean): string {
  if (!(s.includes(' ') || s.includes('.') || (bracket && s.includes('[')))) return s;
  const units = new Uint16Array(s.length);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    units[i] = c === 0x20 || c === 0x2e || (bracket && c === 0x5b) ? 0x5f : c;
  }
  return UTF16.decode(units);
}

/**
 * Every top-level name some framework reads a decoded key as, lower-cased
 * (some match names without case): the key itself; brackets folded ("a[]",
 * "a[0]" are "a"; "a[b]" is "a.b"); the part before the first "["; qs's and
 * Rack's roots (below); and PHP's mangled name.
 */
export function nameReadings(key: string): Set<string> {
  const out = new Set<string>([key.toLowerCase()]);
  // Most keys: nothing any framework folds, mangles or cuts.
  if (!/[[\] .\0]/.test(key)) return out;
  const folded = foldBrackets(key).toLowerCase();
  out.add(folded);
  if (folded.startsWith('.')) out.add(folded.slice(1));
  const b = key.indexOf('[');
  if (b > 0) out.add(key.slice(0, b).toLowerCase());
  const qs = qsRoot(key);
  if (qs) out.add(qs.toLowerCase());
  const rack = RACK_ROOT.exec(key)?.[1];
  if (rack) out.add(rack.toLowerCase());
  const php = phpName(key);
  if (php !== undefined) out.add(php.toLowerCase());
  return out;
}

/**
 * "a[]", "a[0]" as "a" and "a[b]" as "a.b": every "[...]" group without
 * nested brackets folded. A hand scan, linear: the regex it replaces
 * (/\[([^\]]*)\]/g) rescanned to the end from every "[" with no "]" after
 * it, and a callback per group cost ~170 ms on 1 MB of "[]".
 */
function foldBrackets(key: string): string {
  const out = new Uint16Array(key.length); // never longer: "[x]" becomes ".x"
  let n = 0;
  for (let i = 0; i < key.length;) {
    if (key.charCodeAt(i) !== 0x5b) {
      out[n++] = key.charCodeAt(i++);
      continue;
    }
    let j = i + 1;
    let digits = true; // an empty group counts as digits: both fold to nothing
    for (; j < key.length; j++) {
      const d = key.charCodeAt(j);
      if (d === 0x5b || d === 0x5d) break;
      if (d < 0x30 || d > 0x39) digits = false;
    }
    if (j === key.length || key.charCodeAt(j) === 0x5b) {
      while (i < j) out[n++] = key.charCodeAt(i++); // no group here: copied as it is
      continue;
    }
    if (!digits) {
      out[n++] = 0x2e;
      for (let k = i + 1; k < j; k++) out[n++] = key.charCodeAt(k);
    }
    i = j + 1;
  }
  return UTF16.decode(out.subarray(0, n));
}

/**
 * qs's top-level name (lib/parse.js parseKeys, qs 6.x): the text before the
 * first "[...]" group without nested brackets, or, when the key starts with
 * such a group, that group's inner text, whatever follows ("[limit]x" and
 * "[limit]%C0" are "limit"; text outside the groups is dropped).
 */
function qsRoot(key: string): string | undefined {
  const group = /\[([^[\]]*)\]/.exec(key);
  if (!group) return undefined;
  return group.index > 0 ? key.slice(0, group.index) : group[1];
}

/**
 * Rack 2.2's top-level name (Rack::QueryParser#normalize_params,
 * /\A[\[\]]*([^\[\]]+)\]* /): leading "[" and "]" are skipped and the name is
 * the first run without brackets, so "]_method", "_method]", "[[_method]]"
 * and "[_method]x" are all "_method" (Rack::MethodOverride reads it).
 */
const RACK_ROOT = /^[[\]]*([^[\]]+)/;

/**
 * Reads the query parameters a rule constrains. Every key is decoded before
 * comparison (so "am%6Funt" is "amount"); a constrained key sent twice, or
 * in any form a framework would read as it (see nameReadings: "amount[]",
 * "[amount]", PHP's "per.page" for "per_page"), is refused: apps disagree on
 * which copy wins.
 */
export function readConstrainedQuery(query: string | undefined, names: ReadonlySet<string>): Map<string, string> | Denial {
  const out = new Map<string, string>();
  if (!query || names.size === 0) return out;
  // Each constrained name under every reading an app could give it (PHP reads "per.page" as "per_page").
  const readings = new Map<string, string>();
  for (const n of names) for (const r of nameReadings(n)) if (!readings.has(r)) readings.set(r, n);
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const rawKey = eq === -1 ? pair : pair.slice(0, eq);
    const { key, malformed } = decodeKey(rawKey);
    if (malformed) return deny('invalid_query', 'query has a malformed percent-encoding');
    if (!names.has(key)) {
      for (const r of nameReadings(key)) {
        const target = readings.get(r);
        if (target !== undefined) {
          return deny('invalid_query', `query parameter "${printable(key)}" is another spelling of the constrained "${target}"; send it once, as "${target}"`);
        }
      }
      continue;
    }
    if (out.has(key)) return deny('invalid_query', `query parameter "${key}" is repeated`);
    const value = decodeComponent(eq === -1 ? '' : pair.slice(eq + 1));
    if (value === undefined) return deny('invalid_query', 'query has a malformed percent-encoding');
    out.set(key, value);
  }
  return out;
}

/**
 * Refuses what makes a query read differently by different servers: more
 * pairs than `maxPairs` (parsers that stop early never see the rest), raw ";"
 * (a separator for some), a key that is not valid percent-encoding (PHP and
 * qs read it leniently: "_method%00%zz" is PHP's "_method"), and the
 * "_method" override (Laravel, Symfony, method-override) under any spelling
 * a framework reads as it (".method" in PHP).
 */
export function checkQueryShape(query: string | undefined, maxPairs = DEFAULT_MAX_QUERY_PARAMS): Denial | undefined {
  if (!query) return undefined;
  const pairs = countPairs(query);
  if (pairs > maxPairs) {
    return deny(
      'too_many_query_parameters',
      `the query has ${pairs} parameters; at most ${maxPairs} are accepted (some apps stop reading at 1000 and would miss the rest)`,
    );
  }
  if (query.includes(';')) return deny('invalid_query', 'query must not contain a raw ";" (some servers split on it); encode it as %3B');
  const problem = keyProblem(query);
  if (problem === 'malformed')
    return deny('invalid_query', 'a query parameter name has a malformed percent-encoding (apps would read it leniently, as another name)');
  if (problem === 'method') return deny('invalid_query', 'the "_method" override is not accepted; use the real HTTP method');
  return undefined;
}

/** What some app would misread in the keys of an urlencoded string: a key that is not valid percent-encoding, or a "_method" override. */
export type KeyProblem = 'malformed' | 'method';

/**
 * The first key problem of a query or a form body. With `refuseMalformed`
 * false (a body no Content-Type calls a form, which only Rack reads as one,
 * and Rack rejects bad encoding itself) an undecodable key is only read
 * leniently for "_method".
 */
export function keyProblem(encoded: string, refuseMalformed = true): KeyProblem | undefined {
  // Cheap first: both need a "%" or "method" somewhere.
  if (!encoded.includes('%') && !/method/i.test(encoded)) return undefined;
  for (const pair of encoded.split('&')) {
    const eq = pair.indexOf('=');
    const raw = eq === -1 ? pair : pair.slice(0, eq);
    if (!raw.includes('%') && !/method/i.test(raw)) continue;
    const { key, malformed } = decodeKey(raw);
    if (malformed && refuseMalformed) return 'malformed';
    if (/method/i.test(key) && nameReadings(key).has('_method')) return 'method';
  }
  return undefined;
}

/** True when some key of an urlencoded string is read as "_method" by some framework (undecodable keys read leniently). */
export function overridesMethod(encoded: string): boolean {
  return keyProblem(encoded, false) === 'method';
}

/**
 * The first query key that some framework reads as one of `names` (any
 * case), e.g. a constrained body field sent in the query too. An undecodable
 * key is read as PHP and qs read it ("amount%00%zz" is PHP's "amount").
 */
export function keyReadAs(query: string | undefined, names: ReadonlySet<string>): string | undefined {
  if (!query || names.size === 0) return undefined;
  const lowered = new Set([...names].map((n) => n.toLowerCase()));
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    const { key } = decodeKey(eq === -1 ? pair : pair.slice(0, eq));
    for (const r of nameReadings(key)) if (lowered.has(r)) return printable(key);
  }
  return undefined;
}

/** Pairs as Node's querystring and qs count them: every "&"-separated piece, empty ones included. */
function countPairs(query: string): number {
  let n = 1;
  for (let i = query.indexOf('&'); i !== -1; i = query.indexOf('&', i + 1)) n++;
  return n;
}

function printable(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
