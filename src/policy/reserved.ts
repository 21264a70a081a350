import { ENDPOINTS } from '../endpoints/index.js';

/** The audiences of the sidecar's own endpoints: a capability of that name would take their tokens (and they its). */
export const RESERVED_AUDIENCES: ReadonlySet<string> = new Set(
  Object.values(ENDPOINTS)
    .map((e) => e.audience)
    .filter((a) => a !== ''),
);

export function reservedName(name: string): string {
  return `"${name}" is the audience of one of the sidecar's own endpoints: give the capability another name`;
}
