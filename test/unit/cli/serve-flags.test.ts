import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/cli/args.js';
import { wholeMs } from '../../../src/cli/serve-flags.js';

describe('serve flags: whole milliseconds (--max-event-loop-delay-ms)', () => {
  it('absent or empty keeps the default; 0 turns the feature off; a whole number is taken', () => {
    expect(wholeMs(undefined, '--x')).toBeUndefined();
    expect(wholeMs('', '--x')).toBeUndefined();
    expect(wholeMs('0', '--x')).toBe(0);
    expect(wholeMs('25', '--x')).toBe(25);
  });

  it('refuses anything else, naming the flag', () => {
    for (const bad of ['-1', '2.5', '5ms', 'x']) {
      expect(() => wholeMs(bad, '--max-event-loop-delay-ms')).toThrow(UsageError);
      expect(() => wholeMs(bad, '--max-event-loop-delay-ms')).toThrow(
        `--max-event-loop-delay-ms must be a whole number of milliseconds, 0 or more, got "${bad}"`,
      );
    }
  });
});
