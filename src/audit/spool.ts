import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { batchHash } from './crypto.js';

/** The newest batch of a chain: where the next one links. */
export interface ChainHead {
  chain: string;
  seq: number;
  hash: string;
}

export class SpoolFullError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpoolFullError';
  }
}

/**
 * Sealed batches waiting for delivery, one file per batch, plus one cursor
 * per exporter (the last sequence it acknowledged). A batch is removed once
 * every exporter has it. Without a directory the spool lives in memory (the
 * embedded default: survives nothing, but still bounded and ordered).
 */
export class Spool {
  private readonly batches = new Map<number, Buffer>();
  /** Timestamp of each batch's first entry, for the delivery-lag metric. */
  private readonly firsts = new Map<number, number>();
  private sizes = new Map<number, number>();
  private total = 0;
  readonly cursors = new Map<string, number>();
  /** This spool's chain id: kept in the head file, so it outlives delivered batches and restarts. */
  chain: string = randomUUID();

  constructor(
    private readonly dir: string | undefined,
    private readonly maxBytes: number,
    exporters: readonly string[],
  ) {
    for (const name of exporters) this.cursors.set(name, 0);
  }

  get bytes(): number {
    return this.total;
  }

  get durable(): boolean {
    return this.dir !== undefined;
  }

  /** Loads what a previous run left: batches, cursors and the chain. Returns the chain head (to continue the chain). */
  async init(): Promise<ChainHead | undefined> {
    if (!this.dir) return undefined;
    await mkdir(this.dir, { recursive: true });
    let newest: ChainHead | undefined;
    for (const name of (await readdir(this.dir)).sort()) {
      const m = /^(\d{16})\.batch$/.exec(name);
      if (m) {
        const seq = Number(m[1]);
        const line = await readFile(join(this.dir, name));
        const header = JSON.parse(line.toString()) as { chain: string; first: number };
        this.remember(seq, line, header.first);
        if (!newest || seq > newest.seq) newest = { chain: header.chain, seq, hash: batchHash(line) };
        continue;
      }
      const c = /^cursor\.(.+)$/.exec(name);
      if (c && this.cursors.has(c[1]!)) this.cursors.set(c[1]!, Number(await readFile(join(this.dir, name), 'utf8')));
    }
    const head = await this.readHead();
    if (head && (!newest || head.seq > newest.seq)) newest = head;
    if (newest) this.chain = newest.chain;
    return newest;
  }

  /** Appends a sealed batch; with `sync`, returns only once it is on disk. */
  async append({ seq, line, hash, first }: { seq: number; line: Buffer; hash: string; first: number }, sync: boolean): Promise<void> {
    const size = line.length;
    // An empty spool always takes one batch, so a backlog built up while full can always drain.
    if (this.total > 0 && this.total + size > this.maxBytes) throw new SpoolFullError(`audit spool is full (${this.total} of ${this.maxBytes} bytes)`);
    if (this.dir) {
      const file = join(this.dir, `${String(seq).padStart(16, '0')}.batch`);
      await writeDurably(file, line, sync);
      // The chain head survives even when every batch was delivered and removed.
      await writeDurably(join(this.dir, 'head'), JSON.stringify({ chain: this.chain, seq, hash } satisfies ChainHead), sync);
    }
    this.remember(seq, line, first);
  }

  after(cursor: number): number[] {
    return [...this.batches.keys()].filter((s) => s > cursor).sort((a, b) => a - b);
  }

  read(seq: number): Buffer | undefined {
    return this.batches.get(seq);
  }

  /** Records an exporter's acknowledgement and removes batches every exporter has. */
  async ack(exporter: string, seq: number): Promise<void> {
    this.cursors.set(exporter, seq);
    if (this.dir) await writeDurably(join(this.dir, `cursor.${exporter}`), String(seq), false);
    const done = Math.min(...this.cursors.values());
    for (const s of [...this.batches.keys()]) {
      if (s > done) continue;
      this.total -= this.sizes.get(s) ?? 0;
      this.batches.delete(s);
      this.sizes.delete(s);
      this.firsts.delete(s);
      if (this.dir) await rm(join(this.dir, `${String(s).padStart(16, '0')}.batch`), { force: true });
    }
  }

  /** First-entry timestamp of the oldest batch not yet acknowledged by every exporter. */
  oldestUnacknowledged(): number | undefined {
    let oldest: number | undefined;
    for (const first of this.firsts.values()) if (oldest === undefined || first < oldest) oldest = first;
    return oldest;
  }

  private remember(seq: number, line: Buffer, first: number): void {
    const size = line.length;
    this.firsts.set(seq, first);
    this.batches.set(seq, line);
    this.sizes.set(seq, size);
    this.total += size;
  }

  private async readHead(): Promise<ChainHead | undefined> {
    try {
      return JSON.parse(await readFile(join(this.dir!, 'head'), 'utf8')) as ChainHead;
    } catch {
      return undefined;
    }
  }
}

/** Write to a temp file, optionally fsync, then rename: a crash leaves the old or the new file, never half of one. */
async function writeDurably(file: string, content: string | Buffer, sync: boolean): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(content);
    if (sync) await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}
