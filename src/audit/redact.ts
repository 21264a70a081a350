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
export function needsRedaction(value: unknown, pattern: RegExp = SECRET_KEY_PATTERN): boolean {
  if (Array.isArray(value)) return value.some((v) => needsRedaction(v, pattern));
  if (typeof value !== 'object' || value === null) return false;
  for (const [k, v] of Object.entries(value)) {
    if (pattern.test(k) || needsRedaction(v, pattern)) return true;
  }
  return false;
}
