/**
 * Path templates: "/invoices/{id}". Segments are exact strings or a whole-
 * segment parameter; no regex, no wildcards, so overlap can be decided.
 */
export type Segment = { literal: string } | { param: string };

export interface PathTemplate {
  source: string;
  segments: Segment[];
}

const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const LITERAL = /^[A-Za-z0-9\-._~!$&'()*+,=:@]*$/;

/** Parses a template; returns an error message when it is not well formed. */
export function parseTemplate(source: string): PathTemplate | string {
  if (!source.startsWith('/')) return 'path must start with "/"';
  const raw = source.slice(1).split('/');
  const segments: Segment[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i++) {
    const seg = raw[i]!;
    const m = PARAM.exec(seg);
    if (m) {
      if (seen.has(m[1]!)) return `parameter "${m[1]}" appears twice`;
      seen.add(m[1]!);
      segments.push({ param: m[1]! });
      continue;
    }
    if (seg.includes('{') || seg.includes('}')) return `segment "${seg}" must be a whole parameter like {id}`;
    if (seg === '' && i < raw.length - 1) return 'path must not contain "//"';
    if (seg === '.' || seg === '..') return 'path must not contain dot-segments';
    if (!LITERAL.test(seg)) return `segment "${seg}" has characters that need percent-encoding or are refused (";", "%")`;
    segments.push({ literal: seg });
  }
  return { source, segments };
}

/** Matches raw request segments; returns decoded parameters or undefined. */
export function matchTemplate(t: PathTemplate, segments: readonly string[]): Record<string, string> | undefined {
  if (t.segments.length !== segments.length) return undefined;
  let params: Record<string, string> | undefined;
  for (let i = 0; i < segments.length; i++) {
    const want = t.segments[i]!;
    const got = segments[i]!;
    if ('literal' in want) {
      if (want.literal !== got) return undefined;
    } else {
      if (got === '') return undefined;
      params ??= Object.create(null) as Record<string, string>;
      params[want.param] = decodeURIComponent(got);
    }
  }
  return params ?? (Object.create(null) as Record<string, string>);
}

/** True when some path matches both templates. */
export function templatesOverlap(a: PathTemplate, b: PathTemplate): boolean {
  if (a.segments.length !== b.segments.length) return false;
  return a.segments.every((s, i) => {
    const o = b.segments[i]!;
    // A parameter never matches an empty segment.
    if ('param' in s && 'param' in o) return true;
    if ('param' in s) return (o as { literal: string }).literal !== '';
    if ('param' in o) return s.literal !== '';
    return s.literal === o.literal;
  });
}
