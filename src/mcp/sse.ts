/**
 * Rewrites the JSON-RPC messages of a `text/event-stream` body (MCP streamable HTTP transport) on the way to the
 * client, one event at a time. Each event whose data (its `data:` lines joined by "\n") is a JSON object or array
 * goes through the rewrite and is written back with its other lines (event:, id:, retry:, comments, unknown
 * fields) byte for byte and the new data as ONE `data:` line in place of the first one (JSON.stringify never
 * emits a raw line break). Every other event, and every blank line between events, passes through unchanged.
 *
 * Lines end in "\n", "\r\n" or "\r" (WHATWG SSE §9.2.5), each kept as sent. The scan is over bytes: "\r" and
 * "\n" never occur inside a multi-byte UTF-8 sequence, so a line is only decoded once complete, whatever the
 * chunking. At most one event is held (bounded by `maxEventBytes`); a larger one errors the stream, since
 * passing it unread would let an unfiltered answer through.
 */
import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';
import { rewriteJsonText } from './rewrite.js';
import type { MessageRewrite } from './rewrite.js';

export const MAX_SSE_EVENT_BYTES = 4 * 1024 * 1024;

export interface SseRewriterOptions {
  /** The largest event (all its lines and their terminators, the closing blank line included) held for rewriting. */
  maxEventBytes?: number;
}

const LF = 0x0a;
const CR = 0x0d;
const LF_BYTE = Buffer.from([LF]);
/** A UTF-8 BOM, and the same three bytes decoded as Latin-1 then re-encoded ("ï»¿"), which eventsource-parser 3.x
 * (the MCP SDK's SSE parser) also strips from the start of a stream: left in, the first line would read as an
 * unknown field here but as `data:` there. */
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const BOM_MOJIBAKE = Buffer.from('\u00ef\u00bb\u00bf', 'utf8');

export function sseRewriter(rewrite: MessageRewrite, options: SseRewriterOptions = {}): Transform {
  return new SseRewriter(rewrite, options.maxEventBytes ?? MAX_SSE_EVENT_BYTES);
}

/** Bytes of the line terminator at the end of `line` (0 for a line cut short by the end of the stream). */
function eolLength(line: Buffer): number {
  const n = line.length;
  if (n === 0) return 0;
  if (line[n - 1] === CR) return 1;
  if (line[n - 1] !== LF) return 0;
  return n >= 2 && line[n - 2] === CR ? 2 : 1;
}

/** Where the value of a `data` field line ("data", "data:v" or "data: v") starts, or -1 for any other line. */
function dataStart(line: Buffer, end: number): number {
  if (end < 4 || line[0] !== 0x64 || line[1] !== 0x61 || line[2] !== 0x74 || line[3] !== 0x61) return -1;
  if (end === 4) return 4;
  if (line[4] !== 0x3a) return -1;
  return line[5] === 0x20 ? 6 : 5;
}

function startsWith(buf: Buffer, prefix: Buffer): boolean {
  return buf.length >= prefix.length && buf.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

class SseRewriter extends Transform {
  /** The current line so far, as views of the chunks it came in (joined once the line ends). */
  private pieces: Buffer[] = [];
  private piecesLength = 0;
  /** The complete lines of the current event, terminators included. */
  private lines: Buffer[] = [];
  /** Bytes held for the current event: `lines` and `pieces`. */
  private eventLength = 0;
  /** The previous chunk ended in "\r": a "\n" opening this one completes that line's "\r\n". */
  private afterCR = false;
  private firstLine = true;
  /** What one input chunk gave, pushed as one output chunk (fewer, larger writes downstream; no added delay). */
  private out: Buffer[] = [];

  constructor(
    private readonly rewrite: MessageRewrite,
    private readonly maxEventBytes: number,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.scan(chunk);
      if (this.out.length > 0) this.push(Buffer.concat(this.out));
      this.out = [];
      callback();
    } catch (e) {
      callback(e instanceof Error ? e : new Error(String(e)));
    }
  }

  override _flush(callback: TransformCallback): void {
    // A trailing event without its blank line is never dispatched by an SSE client: it goes out as it came.
    if (this.lines.length > 0 || this.piecesLength > 0) this.push(Buffer.concat([...this.lines, ...this.pieces]));
    this.lines = [];
    this.pieces = [];
    callback();
  }

  private scan(chunk: Buffer): void {
    // An empty write must not end the wait for the "\n" of a split "\r\n".
    if (chunk.length === 0) return;
    let start = 0;
    if (this.afterCR) {
      this.afterCR = false;
      if (chunk[0] === LF) {
        this.joinLF();
        start = 1;
      }
    }
    // The next "\r" and "\n" are looked up again only once passed, so a chunk is scanned in linear time.
    let cr = chunk.indexOf(CR, start);
    let lf = chunk.indexOf(LF, start);
    while (cr !== -1 || lf !== -1) {
      let end = lf;
      if (lf === -1 || (cr !== -1 && cr < lf)) {
        end = chunk[cr + 1] === LF ? cr + 1 : cr;
        if (cr + 1 === chunk.length) this.afterCR = true;
      }
      this.line(chunk.subarray(start, end + 1));
      start = end + 1;
      if (cr !== -1 && cr < start) cr = chunk.indexOf(CR, start);
      if (lf !== -1 && lf < start) lf = chunk.indexOf(LF, start);
    }
    if (start < chunk.length) {
      this.hold(chunk.length - start);
      this.pieces.push(chunk.subarray(start));
      this.piecesLength += chunk.length - start;
    }
  }

  private hold(bytes: number): void {
    this.eventLength += bytes;
    if (this.eventLength > this.maxEventBytes) throw new Error(`SSE event larger than ${this.maxEventBytes} bytes`);
  }

  /** The "\n" of a "\r\n" split across chunks: it belongs to the line already ended by the "\r". */
  private joinLF(): void {
    const last = this.lines.length - 1;
    const line = this.lines[last];
    // No held line: the "\r" ended a blank line, already sent; the "\n" follows it out.
    if (line === undefined) {
      this.out.push(LF_BYTE);
      return;
    }
    this.hold(1);
    this.lines[last] = Buffer.concat([line, LF_BYTE]);
  }

  private line(part: Buffer): void {
    this.hold(part.length);
    let line = part;
    if (this.piecesLength > 0) {
      this.pieces.push(part);
      line = Buffer.concat(this.pieces, this.piecesLength + part.length);
      this.pieces = [];
      this.piecesLength = 0;
    }
    if (this.firstLine) {
      this.firstLine = false;
      line = this.stripBom(line);
    }
    if (line.length > eolLength(line)) this.lines.push(line);
    else this.dispatch(line);
  }

  private stripBom(line: Buffer): Buffer {
    let out = line;
    if (startsWith(out, BOM)) out = out.subarray(BOM.length);
    if (startsWith(out, BOM_MOJIBAKE)) out = out.subarray(BOM_MOJIBAKE.length);
    this.eventLength -= line.length - out.length;
    return out;
  }

  /** `blank` ends the current event (or, with no event held, is a lone blank line). */
  private dispatch(blank: Buffer): void {
    const lines = this.lines;
    this.lines = [];
    this.eventLength = 0;
    if (lines.length === 0) {
      this.out.push(blank);
      return;
    }
    lines.push(blank);
    // A loop, not push(...parts): an event of many short lines would overflow the argument list.
    for (const part of this.rewritten(lines) ?? lines) this.out.push(part);
  }

  /** The event's lines with its data rewritten, or undefined when it has no data or the data is not a JSON object/array. */
  private rewritten(lines: Buffer[]): Buffer[] | undefined {
    let data: string | undefined;
    let first = -1;
    for (const [i, line] of lines.entries()) {
      const end = line.length - eolLength(line);
      const start = dataStart(line, end);
      if (start < 0) continue;
      const value = line.toString('utf8', start, end);
      if (data === undefined) {
        data = value;
        first = i;
      } else data += '\n' + value;
    }
    if (data === undefined) return undefined;
    const out = rewriteJsonText(data, this.rewrite);
    if (out === undefined) return undefined;
    const parts: Buffer[] = [];
    let endsInCR = false;
    for (const [i, line] of lines.entries()) {
      const end = line.length - eolLength(line);
      let part = line;
      if (i === first) part = Buffer.from(`data: ${out}${line.toString('latin1', end)}`);
      else if (dataStart(line, end) >= 0) continue;
      // Dropping data lines can bring a line ended by a bare "\r" next to a blank "\n" line: read as one "\r\n",
      // that would swallow the blank line and merge this event with the next. A "\n" after the "\r" keeps both.
      if (endsInCR && part[0] === LF) parts.push(LF_BYTE);
      parts.push(part);
      endsInCR = part[part.length - 1] === CR;
    }
    return parts;
  }
}
