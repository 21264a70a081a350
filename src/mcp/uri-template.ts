/**
 * Resource URI templates as the policy writes them: literal text and simple
 * `{name}` variables (RFC 6570 level 1). A variable matches what the official
 * MCP SDK's UriTemplate matches for it (one or more characters other than "/"
 * and ","), and the SDK hands the server the value undecoded, so the sidecar
 * checks the same characters. A value holding "%" is refused by the caller:
 * another server could decode it and read something else.
 */
export interface UriTemplate {
  readonly source: string;
  readonly names: readonly string[];
  readonly pattern: RegExp;
}

const VARIABLE = /\{([^{}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The template, or why it cannot be one (for `policy check`). */
export function parseUriTemplate(source: string): UriTemplate | string {
  const names: string[] = [];
  let pattern = '^';
  let last = 0;
  for (const m of source.matchAll(VARIABLE)) {
    const name = m[1] ?? '';
    if (!NAME.test(name)) return `"{${name}}" is not a simple variable: only {name} is supported (letters, digits, _)`;
    if (names.includes(name)) return `variable "${name}" appears twice`;
    names.push(name);
    pattern += escape(source.slice(last, m.index)) + '([^/,]+)';
    last = m.index + m[0].length;
  }
  const rest = source.slice(last);
  if (/[{}]/.test(rest) || /[{}]/.test(source.replace(VARIABLE, ''))) return 'unbalanced "{" or "}"';
  pattern += escape(rest) + '$';
  return { source, names, pattern: new RegExp(pattern) };
}

/** The variables of `uri` under `template`, or undefined when it does not match. */
export function matchUriTemplate(template: UriTemplate, uri: string): Record<string, string> | undefined {
  const m = template.pattern.exec(uri);
  if (!m) return undefined;
  const vars: Record<string, string> = {};
  template.names.forEach((name, i) => {
    vars[name] = m[i + 1] ?? '';
  });
  return vars;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
