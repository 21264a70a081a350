import { RawJson } from './raw-json.js';
import { needsRedaction, redact, SECRET_KEY_PATTERN } from './redact.js';

/** Bound on remembered key verdicts: keys come from callers, so the cache must not grow with them. */
const MAX_VERDICTS = 10_000;

/**
 * Redacts an entry's `args` as it goes into a batch: the built-in rule
 * (redact.ts) plus a policy's `audit.redact` patterns, which a reload may
 * change (they apply from the next entry on).
 */
export class ArgsRedactor {
  private pattern: RegExp;
  /** Field names repeat from call to call: the pattern's verdict on each is remembered. */
  private readonly verdicts = new Map<string, boolean>();

  constructor(extra: RegExp[] | undefined) {
    this.pattern = redactionPattern(extra);
  }

  setPatterns(extra: RegExp[] | undefined): void {
    this.pattern = redactionPattern(extra);
    this.verdicts.clear(); // verdicts of the old pattern
  }

  /**
   * Verified body bytes (RawJson) are kept as they are unless a key must be
   * redacted (the parser's key list spares a walk of the value); anything
   * else is copied redacted.
   */
  redacted(args: unknown): unknown {
    if (args instanceof RawJson) {
      const secret = args.keys ? args.keys.some(this.isSecretKey) : needsRedaction(args.value, this.isSecretKey);
      return secret ? redact(args.value, this.pattern) : args;
    }
    return redact(args, this.pattern);
  }

  /** An arrow, bound once: it is passed as a callback for every key of every body. */
  private readonly isSecretKey = (key: string): boolean => {
    let v = this.verdicts.get(key);
    if (v === undefined) {
      v = this.pattern.test(key);
      if (this.verdicts.size < MAX_VERDICTS) this.verdicts.set(key, v);
    }
    return v;
  };
}

function redactionPattern(extra: RegExp[] | undefined): RegExp {
  const sources = (extra ?? []).map((r) => r.source);
  return sources.length ? new RegExp([SECRET_KEY_PATTERN.source, ...sources].join('|'), 'i') : SECRET_KEY_PATTERN;
}
