/**
 * Arguments that arrived as a JSON body: the parsed value (for redaction
 * checks) and the exact bytes the sidecar verified and forwarded. When no key
 * needs redacting, the audit entry carries those bytes as they are: nothing
 * is serialised twice, and the record shows exactly what the app received.
 * Only bytes that passed the strict parser (one complete JSON value) belong here.
 */
export class RawJson {
  /** `keys`: every object key in the value, as the parser met them, so redaction need not walk the value again. */
  constructor(
    readonly value: unknown,
    readonly bytes: Uint8Array,
    readonly keys?: readonly string[],
  ) {}

  /** For any consumer that serialises an entry itself (logs, tests). */
  toJSON(): unknown {
    return this.value;
  }
}
