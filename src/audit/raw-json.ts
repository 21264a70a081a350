/**
 * Arguments that arrived as a JSON body: the parsed value (for redaction
 * checks) and the exact bytes the sidecar verified and forwarded. When no key
 * needs redacting, the audit entry carries those bytes as they are: nothing
 * is serialised twice, and the record shows exactly what the app received.
 * Only bytes that passed the strict parser (one complete JSON value) belong here.
 */
export class RawJson {
  constructor(readonly value: unknown, readonly bytes: Uint8Array) {}

  /** For any consumer that serialises an entry itself (logs, tests). */
  toJSON(): unknown {
    return this.value;
  }
}
