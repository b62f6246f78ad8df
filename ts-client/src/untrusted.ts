/**
 * Text a model controls (file names above all), written where the model
 * reads it so that it cannot pose as what gatekeeper wrote. The copy of
 * gatekeeper's Go package internal/untrusted (Unsafe and Quote), pinned to
 * it by the files in internal/untrusted/testdata that test/untrusted.test.ts
 * reads.
 */

/**
 * UNSAFE matches a character that moves the cursor, ends a line or reorders
 * what a reader sees: the control characters (C0, DEL, C1 with NEL), the
 * line and paragraph separators and the bidirectional controls; and, which
 * Go's strings never hold, a lone surrogate.
 */
const UNSAFE = /[\p{Cc}\u2028\u2029\p{Bidi_Control}\p{Cs}]/u;

/** isUnsafe is Go's untrusted.Unsafe for one code point. */
export function isUnsafe(cp: number): boolean {
  return UNSAFE.test(String.fromCodePoint(cp));
}

/**
 * quote returns s in double quotes, as one line a model reads as one name:
 * `"` and `\` escaped with a backslash, LF, CR and TAB as `\n`, `\r` and
 * `\t`, every other unsafe character as `\uXXXX`, the rest as it is.
 */
export function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (UNSAFE.test(ch)) out += `\\u${(ch.codePointAt(0) as number).toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}
