import { isDenial, type Denial } from '../errors.js';
import type { Reached } from './phases.js';

/** One stage's answer: the next phase, or a refusal. */
export type Step<T> = T | Denial | Promise<T | Denial>;

/** A stage: what the previous phase established in, the next phase (or a Denial) out. */
export type Stage<In, Out, D> = (phase: In, deps: D, progress: Progress) => Step<Out>;

/** Where the last phase a chain reached is kept, for the observers of a refused call. */
export interface Progress {
  reached: Reached;
}

/**
 * A typed table of stages: `chain<A>().then(s1).then(s2)` only compiles when
 * each stage takes what the one before returns. Running it stops at the first
 * Denial.
 */
export class Chain<In, Out, D> {
  private constructor(private readonly stages: readonly Stage<unknown, unknown, D>[]) {}

  static of<T, D>(): Chain<T, T, D> {
    return new Chain<T, T, D>([]);
  }

  then<Next>(stage: Stage<Out, Next, D>): Chain<In, Next, D> {
    return new Chain<In, Next, D>([...this.stages, stage as Stage<unknown, unknown, D>]);
  }

  async run(phase: In, deps: D, progress: Progress): Promise<Out | Denial> {
    let current: unknown = phase;
    for (const stage of this.stages) {
      const step = stage(current, deps, progress);
      // Most stages are synchronous: awaiting only promises saves a microtask per stage.
      const next: unknown = step instanceof Promise ? await step : step;
      if (isDenial(next)) return next;
      current = next;
      progress.reached = next as Reached;
    }
    return current as Out;
  }
}
