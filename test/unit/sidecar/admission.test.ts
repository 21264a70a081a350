import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ADAPTIVE_FLOOR, AdaptiveBound, Admission } from '../../../src/sidecar/admission.js';

// The bound's arithmetic with made-up delays: nothing here is timed.
describe('AdaptiveBound: the calls in flight the event loop allows', () => {
  it('starts at --max-in-flight and stays there while the loop keeps up', () => {
    const b = new AdaptiveBound(1024, 5);
    for (let i = 0; i < 10; i++) b.revise(1, 500, 1);
    expect(b.limit).toBe(1024);
  });

  it('ignores one late window (the catch-up after a pause), and drops below the calls in flight on the second', () => {
    const b = new AdaptiveBound(1024, 5);
    b.revise(40, 300, 1);
    expect(b.limit).toBe(1024);
    b.revise(6, 300, 1);
    // Just behind: a fifth below the 300 calls in flight, not below the static 1024.
    expect(b.limit).toBe(240);
  });

  it('halves when far behind, and never goes below the floor', () => {
    const b = new AdaptiveBound(1024, 5);
    b.revise(50, 400, 1);
    b.revise(50, 400, 1);
    expect(b.limit).toBe(200);
    for (let i = 0; i < 20; i++) b.revise(50, 400, 1);
    expect(b.limit).toBe(ADAPTIVE_FLOOR);
  });

  it('a window on time breaks the run: the next late one alone changes nothing', () => {
    const b = new AdaptiveBound(1024, 5);
    b.revise(50, 400, 1);
    b.revise(50, 400, 1);
    const after = b.limit;
    b.revise(1, 400, 1);
    b.revise(50, 400, 1);
    expect(b.limit).toBeGreaterThan(after);
  });

  it('grows back to --max-in-flight while the loop is on time, and reset() returns there at once', () => {
    const b = new AdaptiveBound(1024, 5);
    for (let i = 0; i < 20; i++) b.revise(50, 400, 1);
    let windows = 0;
    while (b.limit < 1024 && windows < 1000) {
      b.revise(1, 0, 1);
      windows++;
    }
    expect(b.limit).toBe(1024);
    // Roughly 6 % a window: from the floor to 1024 in well under a second of 10 ms windows.
    expect(windows).toBeLessThan(100);
    b.revise(50, 400, 1);
    b.revise(50, 400, 1);
    b.reset();
    expect(b.limit).toBe(1024);
  });

  it('a late loop that still idles (a collection at half load) lowers nothing', () => {
    const b = new AdaptiveBound(1024, 5);
    for (let i = 0; i < 10; i++) b.revise(30, 400, 0.6);
    expect(b.limit).toBe(1024);
  });

  it('a static bound below the floor is the floor', () => {
    const b = new AdaptiveBound(2, 5);
    b.revise(50, 2, 1);
    b.revise(50, 2, 1);
    expect(b.limit).toBe(2);
  });
});

/** A response that only closes (all the admission listens to). */
const res = () => new EventEmitter() as unknown as ServerResponse;

describe('Admission', () => {
  it('sheds past --max-in-flight as in_flight, whether or not the loop is watched', () => {
    for (const maxEventLoopDelayMs of [0, 5]) {
      const a = new Admission({ maxInFlight: 2, maxEventLoopDelayMs });
      expect(a.check(0, res())).toBeUndefined();
      expect(a.check(1, res())).toBeUndefined();
      expect(a.check(2, res())).toBe('in_flight');
      expect(a.limit).toBe(2);
      a.close();
    }
  });

  it('counts an admitted call until its response closes', () => {
    const a = new Admission({ maxInFlight: 1024, maxEventLoopDelayMs: 5 });
    const first = res();
    expect(a.check(0, first)).toBeUndefined();
    expect(first.listenerCount('close')).toBe(1);
    first.emit('close');
    a.close();
  });

  it('with the delay bound off, admits anything under --max-in-flight and starts no timer', () => {
    const a = new Admission({ maxInFlight: 1024, maxEventLoopDelayMs: 0 });
    expect(a.check(1023, res())).toBeUndefined();
    expect(a.limit).toBe(1024);
    a.close();
  });
});
