/** Key fragments whose values never leave the sidecar in logs, notifications or audit entries. */
export const SECRET_KEY_PATTERN = /key|secret|token|password|auth|credential|bearer/i;

export const REDACTED = '[REDACTED]';

/** Copies `value`, replacing the value of every secret-looking key (any depth, arrays too). */
export function redact(value: unknown, pattern: RegExp = SECRET_KEY_PATTERN): unknown {
  if (Array.isArray(value)) return value.map((v) => redact(v, pattern));
  if (typeof value !== 'object' || value === null) return value;
  // No prototype: a "__proto__" key in a body stays an ordinary field of the record.
  const out = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(value)) out[k] = pattern.test(k) ? REDACTED : redact(v, pattern);
  return out;
}

/** True when `redact` would change something: lets the caller keep the original bytes otherwise. */
export function needsRedaction(value: unknown, pattern: RegExp | ((key: string) => boolean) = SECRET_KEY_PATTERN): boolean {
  const isSecret = typeof pattern === 'function' ? pattern : (k: string) => pattern.test(k);
  return walk(value, isSecret);
}

function walk(value: unknown, isSecret: (key: string) => boolean): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) {
    for (const v of value) if (walk(v, isSecret)) return true;
    return false;
  }
  // Runs on every audited body: no entry arrays allocated.
  const record = value as Record<string, unknown>;
  for (const k of Object.keys(record)) {
    if (isSecret(k) || walk(record[k], isSecret)) return true;
  }
  return false;
}
