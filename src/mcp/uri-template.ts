/**
 * Resource URI templates as the policy writes them: literal text and simple
 * `{name}` variables (RFC 6570 level 1). A variable matches what the official
 * MCP SDK's UriTemplate matches for it (one or more characters other than "/"
 * and ","), with the SDK's greedy choice where a URI could split several ways.
 * The SDK matches with a backtracking regular expression, which takes
 * polynomial time in the URI's length per variable ("{a}-{b}-{c}" against
 * "1-1-1-…" froze a process for seconds at 2 kB); this matcher reaches the
 * same answer in one pass per part, before any token is checked.
 */
export interface UriTemplate {
  readonly source: string;
  readonly names: readonly string[];
  /** Literal text around the variables: literals[i] comes before names[i], the last one after the last variable. */
  readonly literals: readonly string[];
}

const VARIABLE = /\{([^{}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The template, or why it cannot be one (for `policy check`). */
export function parseUriTemplate(source: string): UriTemplate | string {
  const names: string[] = [];
  const literals: string[] = [];
  let last = 0;
  for (const m of source.matchAll(VARIABLE)) {
    const name = m[1] ?? '';
    if (!NAME.test(name)) return `"{${name}}" is not a simple variable: only {name} is supported (letters, digits, _)`;
    if (names.includes(name)) return `variable "${name}" appears twice`;
    names.push(name);
    literals.push(source.slice(last, m.index));
    last = m.index + m[0].length;
  }
  literals.push(source.slice(last));
  if (literals.some((l) => /[{}]/.test(l))) return 'unbalanced "{" or "}"';
  return { source, names, literals };
}

/** A character a variable may hold (the SDK's [^/,]). */
function inVariable(code: number): boolean {
  return code !== 0x2f && code !== 0x2c;
}

/**
 * The variables of `uri` under `template`, or undefined when it does not
 * match. Each variable takes the longest value that still lets the rest
 * match, as the SDK's greedy regular expression does: `fits[k][i]` says
 * whether the URI from i on matches the template from variable k's literal
 * on, computed from the end; then the values are read from the start.
 */
export function matchUriTemplate(template: UriTemplate, uri: string): Record<string, string> | undefined {
  const { names, literals } = template;
  const n = uri.length;
  // runEnd[i]: the first position at or after i that a variable cannot cover.
  const runEnd = new Int32Array(n + 1);
  runEnd[n] = n;
  for (let i = n - 1; i >= 0; i--) runEnd[i] = inVariable(uri.charCodeAt(i)) ? (runEnd[i + 1] ?? n) : i;
  // fits[i]: the URI from i on matches literal k and everything after it (computed for k from the last one down).
  const fitsFrom = (k: number, next: Int8Array): Int8Array => {
    const lit = literals[k] ?? '';
    const fits = new Int8Array(n + 1);
    for (let i = 0; i <= n; i++) fits[i] = uri.startsWith(lit, i) && i + lit.length <= n && next[i + lit.length] === 1 ? 1 : 0;
    return fits;
  };
  const lastLiteral = literals[names.length] ?? '';
  let fits: Int8Array = new Int8Array(n + 1);
  if (n - lastLiteral.length >= 0 && uri.endsWith(lastLiteral)) fits[n - lastLiteral.length] = 1;
  const ends: Int32Array[] = new Array<Int32Array>(names.length);
  for (let k = names.length - 1; k >= 0; k--) {
    // The largest end e <= x of variable k from which the rest matches.
    const best = new Int32Array(n + 1);
    let seen = -1;
    for (let e = 0; e <= n; e++) {
      if (fits[e] === 1) seen = e;
      best[e] = seen;
    }
    ends[k] = best;
    const starts = new Int8Array(n + 1);
    for (let i = 0; i < n; i++) {
      const e = best[runEnd[i] ?? i] ?? -1;
      starts[i] = e > i ? 1 : 0;
    }
    fits = fitsFrom(k, starts);
  }
  if (fits[0] !== 1) return undefined;
  const vars: Record<string, string> = {};
  let at = (literals[0] ?? '').length;
  names.forEach((name, k) => {
    const end = ends[k]?.[runEnd[at] ?? at] ?? at;
    vars[name] = uri.slice(at, end);
    at = end + (literals[k + 1] ?? '').length;
  });
  return vars;
}
