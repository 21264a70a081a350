import { describe, expect, it } from 'vitest';
import { throttled, UNAUTHORIZED_LOG_INTERVAL_MS } from '../../../src/admin/handler.js';

describe('the refused-admin-call log gate', () => {
  it('lets one line through per interval and counts the calls it held back into the next', () => {
    let t = 0;
    const gate = throttled(() => t, UNAUTHORIZED_LOG_INTERVAL_MS);
    expect(gate()).toBe(0);
    for (let i = 0; i < 1000; i++) expect(gate()).toBeUndefined();
    t += UNAUTHORIZED_LOG_INTERVAL_MS - 1;
    expect(gate()).toBeUndefined();
    t += 1;
    expect(gate()).toBe(1001);
    expect(gate()).toBeUndefined();
    t += UNAUTHORIZED_LOG_INTERVAL_MS;
    expect(gate()).toBe(1);
  });
});
