import type { Deps } from '../pipeline/deps.js';

/**
 * What the request path, the admin probes, reload and shutdown share while the sidecar runs. One object,
 * handed to each part, instead of locals that closures reach into.
 */
export class SidecarState {
  /** Both listeners are up and the data listener accepts: part of readiness. */
  ready = false;
  /** Set on close: readiness fails and responses carry `connection: close`, while the listener still accepts. */
  draining = false;
  /** Calls being handled, so shutdown can wait for their audit record (the socket may close before the handler ends). */
  readonly inFlight = new Set<Promise<void>>();

  /** Each call takes the deps current when it arrives, and keeps them: a reload swaps the whole object. */
  constructor(public current: Deps) {}

  /** Keeps `call` in `inFlight` until it settles. */
  track(call: Promise<void>): void {
    this.inFlight.add(call);
    void call.finally(() => this.inFlight.delete(call));
  }
}
