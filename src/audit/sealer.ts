import { createCipheriv, randomBytes } from 'node:crypto';
import { brotliCompress, constants as zlib } from 'node:zlib';
import { aad, type AuditKey, type ChainLink, type SealedBatch } from './crypto.js';
import { RawJson } from './raw-json.js';

/**
 * Builds one batch. Entries are serialised as they arrive into one growing
 * buffer (no entry objects or body buffers are retained, so a batch held for
 * a second costs the garbage collector nothing). On seal the batch is
 * compressed with Brotli (audit JSON shrinks several-fold, which cuts the
 * cipher, base64, hashing and disk work alike) on libuv's thread pool, off
 * the event loop that serves calls, then encrypted with AES-256-GCM under a
 * fresh 96-bit nonce. Nothing leaves the open batch unencrypted.
 */
export class BatchSealer {
  private arena: Buffer;
  private used = 0;
  private count = 0;
  private first = 0;
  private last = 0;

  /** `sizeHint`: bytes the batch is expected to reach (the previous batch's size), to avoid regrowing. */
  constructor(
    private readonly key: AuditKey,
    sizeHint = 64 * 1024,
  ) {
    this.arena = takeArena(Math.max(256, sizeHint));
  }

  get size(): number {
    return this.count;
  }

  /** Bytes serialised so far. */
  get bytes(): number {
    return this.used;
  }

  /**
   * Adds one entry as its JSON `head` (the object without its closing brace, in
   * ASCII) and its `args`, written last. Args that are RawJson (a verified JSON body) go in
   * as their exact bytes; undefined args are left out.
   */
  addParts(timestamp: number, head: string, args: unknown): void {
    // All or nothing: a failure half-way (args that cannot be serialised, no memory to grow) leaves the batch as it was.
    const mark = this.used;
    try {
      this.append(head, args);
    } catch (err) {
      this.arena.fill(0, mark, this.used); // the part already written is wiped, not just forgotten
      this.used = mark;
      throw err;
    }
    if (this.count === 0) this.first = timestamp;
    this.last = timestamp;
    this.count++;
  }

  private append(head: string, args: unknown): void {
    // One copy for the ASCII part: each Buffer write is a call into the runtime, and this runs per call.
    const open = this.count === 0 ? '[' : ',';
    if (args === undefined) {
      this.writeAscii(`${open}${head}}`);
      return;
    }
    this.writeAscii(head.length > 1 ? `${open}${head},"args":` : `${open}${head}"args":`);
    if (args instanceof RawJson) {
      this.reserve(args.bytes.length + 1);
      this.arena.set(args.bytes, this.used);
      this.used += args.bytes.length;
    } else {
      this.write(JSON.stringify(args) ?? 'null');
      this.reserve(1);
    }
    this.arena[this.used++] = 0x7d; // }
  }

  /** Compresses (thread pool) and encrypts the batch as link `link`. The sealer is spent afterwards. */
  async seal(link: ChainLink): Promise<SealedBatch> {
    const text = this.close();
    let plain: Buffer;
    try {
      plain = await new Promise<Buffer>((resolve, reject) =>
        brotliCompress(text, brotliOptions(text.length), (err, out) => (err ? reject(err) : resolve(out))),
      );
    } finally {
      giveArena(text); // zeroed whatever happened
    }
    return this.encryptAndWipe(link, plain);
  }

  private close(): Buffer {
    this.write(this.count === 0 ? '[]' : ']');
    const text = this.arena.subarray(0, this.used);
    this.arena = Buffer.alloc(0);
    return text;
  }

  /** Encrypts the compressed batch, then zeroes it (it is as readable as the entries). */
  private encryptAndWipe(link: ChainLink, plain: Buffer): SealedBatch {
    try {
      return this.encrypt(link, plain);
    } finally {
      plain.fill(0);
    }
  }

  private encrypt({ chain, seq, prev }: ChainLink, plain: Buffer): SealedBatch {
    const header = { v: 1 as const, chain, seq, prev, count: this.count, first: this.first, last: this.last, kid: this.key.id, z: 'br' as const };
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key.key, nonce);
    cipher.setAAD(aad(header));
    const data = cipher.update(plain);
    const rest = cipher.final(); // empty for GCM; checked rather than assumed
    return { ...header, nonce: nonce.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: rest.length ? Buffer.concat([data, rest]) : data };
  }

  private write(text: string): void {
    // UTF-8 never takes more than 3 bytes per UTF-16 unit.
    this.reserve(text.length * 3);
    this.used += this.arena.write(text, this.used);
  }

  /** ASCII text is its own UTF-8: one byte per character, copied as latin1 (much faster than encoding). */
  private writeAscii(text: string): void {
    this.reserve(text.length);
    this.used += this.arena.write(text, this.used, 'latin1');
  }

  private reserve(n: number): void {
    if (this.used + n <= this.arena.length) return;
    const grown = takeArena(this.used + n); // a new buffer comes with 50 % headroom
    this.arena.copy(grown, 0, 0, this.used);
    giveArena(this.arena.subarray(0, this.used)); // zeroed: no entry in clear is left behind
    this.arena = grown;
  }
}

/**
 * Spare batch buffers. A batch buffer is large (megabytes at full load) and one
 * is needed per batch; allocating each anew makes V8 count that much more
 * external memory and run full collections several times as often. Batches
 * vary in size, so the largest spares are kept and the largest is handed out:
 * a buffer that has to grow mid-batch is a fresh allocation. Two suffice (one
 * filling while the other is compressed). A returned buffer is zeroed first:
 * no entry stays in clear after its batch is sealed.
 */
const spares: Buffer[] = [];
const MAX_SPARE = 16 * 1024 * 1024;
/** A buffer of at least `size` bytes: the largest spare if it is large enough, else a new one with 50 % headroom. */
function takeArena(size: number): Buffer {
  // spares[0] is the largest.
  if (spares.length && spares[0]!.length >= size) return spares.shift()!;
  return Buffer.allocUnsafeSlow(Math.ceil(size * 1.5));
}
function giveArena(used: Buffer): void {
  const whole = Buffer.from(used.buffer, used.byteOffset, used.buffer.byteLength - used.byteOffset);
  used.fill(0);
  if (whole.length > MAX_SPARE) return;
  spares.push(whole);
  spares.sort((a, b) => b.length - a.length);
  if (spares.length > 2) spares.length = 2;
}

/**
 * Brotli at quality 0, its fastest: on audit JSON about 2.5x faster than deflate level 1 and as small
 * (quality 1 is 20 % smaller but 45 % slower, and the trail's cost is paid on every call).
 */
function brotliOptions(size: number) {
  // Output chunks about as large as the compressed batch (audit JSON shrinks about 5x): each chunk is a
  // round trip between the thread pool and the event loop, and an oversized one is a large allocation.
  return {
    chunkSize: Math.max(64 * 1024, Math.ceil(size / 4)),
    params: {
      [zlib.BROTLI_PARAM_QUALITY]: 0,
      [zlib.BROTLI_PARAM_LGWIN]: 18,
      [zlib.BROTLI_PARAM_MODE]: zlib.BROTLI_MODE_TEXT,
      [zlib.BROTLI_PARAM_SIZE_HINT]: size,
    },
  };
}
