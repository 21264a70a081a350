import { open } from 'node:fs/promises';
import { request } from '../http/undici.js';

const NEWLINE = Buffer.from('\n');

/** Delivers sealed batches (one JSON line each, as UTF-8 bytes). Resolves only when the batch is safely received. */
export interface AuditExporter {
  /** Stable name: the spool keeps one delivery cursor per exporter. */
  name: string;
  export(line: Buffer, seq: number): Promise<void>;
}

/** One JSON line per batch on stdout (Fluent Bit, Vector, Loki). */
export class StdoutAuditExporter implements AuditExporter {
  name = 'stdout';
  async export(line: Buffer): Promise<void> {
    // Two writes in one tick: nothing else on stdout can come between them.
    process.stdout.write(line);
    await new Promise<void>((resolve, reject) => process.stdout.write(NEWLINE, (err) => (err ? reject(err) : resolve())));
  }
}

export class FileAuditExporter implements AuditExporter {
  readonly name: string;
  constructor(private readonly path: string) {
    this.name = `file-${path.replace(/[^A-Za-z0-9._-]/g, '_')}`;
  }
  async export(line: Buffer): Promise<void> {
    // Line and newline in one write (no copy of the line). A failed write is cut back off, so the retry
    // never appends a record to half of one.
    const fh = await open(this.path, 'a');
    try {
      const start = (await fh.stat()).size;
      try {
        let parts = [line, NEWLINE];
        while (parts.length) {
          const { bytesWritten } = await fh.writev(parts);
          if (bytesWritten === 0) throw new Error(`could not write to ${this.path}`);
          parts = remainderOf(parts, bytesWritten);
        }
      } catch (err) {
        await fh.truncate(start).catch(() => undefined);
        throw err;
      }
    } finally {
      await fh.close();
    }
  }
}

/** POSTs each batch; the sequence number is the idempotency key, so a retried batch is recognisable. */
export class HttpAuditExporter implements AuditExporter {
  readonly name: string;
  constructor(
    private readonly url: string,
    private readonly apiKey?: string,
    private readonly timeoutMs = 10_000,
  ) {
    this.name = `http-${new URL(url).host.replace(/[^A-Za-z0-9._-]/g, '_')}`;
  }
  async export(line: Buffer, seq: number): Promise<void> {
    const res = await request(this.url, {
      method: 'POST',
      body: line,
      headers: {
        'content-type': 'application/json',
        'idempotency-key': String(seq),
        ...(this.apiKey ? { 'x-api-key': this.apiKey } : {}),
      },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
    await res.body.dump();
    if (res.statusCode >= 300) throw new Error(`collector answered ${res.statusCode}`);
  }
}

/** What is left of `parts` after the first `written` bytes (a short write). */
function remainderOf(parts: Buffer[], written: number): Buffer[] {
  const out: Buffer[] = [];
  for (const p of parts) {
    if (written >= p.length) written -= p.length;
    else {
      out.push(p.subarray(written));
      written = 0;
    }
  }
  return out;
}

/** `--audit-export stdout | file:PATH | http(s)://...` */
export function exporterFromSpec(spec: string, apiKey?: string): AuditExporter {
  if (spec === 'stdout') return new StdoutAuditExporter();
  if (spec.startsWith('file:')) return new FileAuditExporter(spec.slice(5));
  if (/^https?:\/\//.test(spec)) return new HttpAuditExporter(spec, apiKey);
  throw new Error(`--audit-export must be stdout, file:PATH or an http(s) URL, got "${spec}"`);
}
