// The transcript a walkthrough prints: a header per scenario, one line per
// step, ✔ or ✘ per expectation. A walkthrough exits non-zero when any
// expectation broke.

const color = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
const paint = (code: string) => (s: string): string => (color ? `\x1b[${code}m${s}\x1b[0m` : s);
export const bold = paint('1');
export const dim = paint('2');
export const green = paint('32');
export const red = paint('31');
export const yellow = paint('33');
export const cyan = paint('36');

/** Transcript prints the story of one walkthrough and counts its expectations. */
export class Transcript {
  private held = 0;
  private readonly broken: string[] = [];
  private readonly started = Date.now();

  constructor(
    readonly number: number,
    readonly title: string,
    /** What is told: "Walkthrough" or "Workload". */
    readonly kind = 'Walkthrough',
  ) {}

  /** header opens the walkthrough: its number, title and what it shows. */
  header(...about: string[]): void {
    const head = `━━ ${this.kind} ${String(this.number)} · ${this.title} `;
    console.log('');
    console.log(bold(head + '━'.repeat(Math.max(4, 78 - head.length))));
    for (const line of about) console.log(line);
  }

  /** section starts a part of the story. */
  section(title: string): void {
    console.log('');
    console.log(bold(`── ${title}`));
  }

  /** step names what the model (or the walkthrough) does next. */
  step(label: string, text: string): void {
    console.log(`${cyan(`▶ ${label}`)}  ${text}`);
  }

  /** line prints one fact, tagged (gate, sandbox, stdout, …). */
  line(tag: string, text: string): void {
    const pad = tag.padEnd(8);
    const lines = text.split('\n');
    console.log(`    ${dim(pad)} ${lines[0] ?? ''}`);
    for (const l of lines.slice(1)) console.log(`    ${' '.repeat(8)} ${l}`);
  }

  /** note prints an explanation that is not an expectation. */
  note(text: string): void {
    console.log(`    ${yellow('note')}     ${text}`);
  }

  /** expect records one expectation: ✔ when ok, else ✘ with the detail. */
  expect(ok: boolean, what: string, detail?: string): boolean {
    if (ok) {
      this.held++;
      console.log(`    ${green('✔')} ${what}`);
    } else {
      this.broken.push(what);
      console.log(`    ${red('✘')} ${what}`);
      if (detail !== undefined) for (const l of detail.split('\n').slice(0, 30)) console.log(`        ${red(l)}`);
    }
    return ok;
  }

  /** fail records a broken expectation that has no ✔ form (a crash, a missing result). */
  fail(what: string, detail?: string): void {
    this.expect(false, what, detail);
  }

  /** get the number of broken expectations so far. */
  get failures(): number {
    return this.broken.length;
  }

  /** get the expectations broken so far, in order. */
  get brokenExpectations(): readonly string[] {
    return this.broken;
  }

  /** finish prints the verdict and returns the exit code. */
  finish(): number {
    const secs = ((Date.now() - this.started) / 1000).toFixed(1);
    const total = this.held + this.broken.length;
    console.log('');
    if (this.broken.length === 0 && total > 0) {
      console.log(green(bold(`━━ ${String(this.number)} · ${this.title}: all ${String(total)} expectations held (${secs} s)`)));
      return 0;
    }
    console.log(red(bold(`━━ ${String(this.number)} · ${this.title}: ${String(this.broken.length)} of ${String(total)} expectations broke (${secs} s)`)));
    for (const b of this.broken) console.log(red(`   ✘ ${b}`));
    return 1;
  }
}

/** clip shortens s for one transcript line. */
export function clip(s: string, n = 100): string {
  const one = s.replace(/\n/g, '⏎');
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}
