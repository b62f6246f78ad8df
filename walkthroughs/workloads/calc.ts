// The calculator package the model writes in workload 2 and packages as a
// wheel in workload 8: an exact (fractions) arithmetic parser in four
// modules, with a pytest suite whose cases come from the tables below, so
// that the number of tests is known here.

/** The ops tests: function, a, b, want (exact values as Python Fraction strings). */
const OP_CASES: [string, string, string, string][] = [
  ['add', '2', '3', '5'],
  ['sub', '2', '3', '-1'],
  ['mul', '4', '5/2', '10'],
  ['div', '7', '2', '7/2'],
  ['div', '-9', '3', '-3'],
];

/** The parser tests: expression, its exact value. */
const PARSE_CASES: [string, string][] = [
  ['1 + 2', '3'],
  ['2 * (3 + 4)', '14'],
  ['-3 + 10 / 4', '-1/2'],
  ['1.5 * 4', '6'],
  ['2 - -2', '4'],
  ['((7))', '7'],
  ['1/3 + 1/6', '1/2'],
  ['10 / 4 * 2', '5'],
];

/** The parser's refusals: expression, a word of the CalcError's message. */
const ERROR_CASES: [string, string][] = [
  ['1 +', 'unexpected end'],
  ['(2', 'unexpected end'],
  ['2 ^ 3', 'unexpected character'],
  ['', 'empty'],
  ['4 / (2 - 2)', 'division by zero'],
  ['1 2', 'unexpected'],
];

/** CALC_TESTS is how many tests the suite has: one per case, plus the division-by-zero test of ops. */
export const CALC_TESTS = OP_CASES.length + 1 + PARSE_CASES.length + ERROR_CASES.length;

/** CALC_VERSION is the package's __version__. */
export const CALC_VERSION = '1.2.0';

const py = (v: unknown): string => JSON.stringify(v); // JSON of ASCII strings and lists is Python

/** calcPackage is the package's source: path under /workspace → text. */
export function calcPackage(): Record<string, string> {
  return {
    'calc/__init__.py': `"""A small exact calculator: arithmetic on fractions, and a parser for it."""
from .errors import CalcError
from .ops import add, div, mul, sub
from .parser import evaluate, tokenize

__version__ = "${CALC_VERSION}"
__all__ = ["CalcError", "add", "div", "evaluate", "mul", "sub", "tokenize"]
`,
    'calc/errors.py': `class CalcError(ValueError):
    """An expression that cannot be evaluated."""
`,
    'calc/ops.py': `from fractions import Fraction

from .errors import CalcError


def add(a: Fraction, b: Fraction) -> Fraction:
    return a + b


def sub(a: Fraction, b: Fraction) -> Fraction:
    return a - b


def mul(a: Fraction, b: Fraction) -> Fraction:
    return a * b


def div(a: Fraction, b: Fraction) -> Fraction:
    if b == 0:
        raise CalcError("division by zero")
    return a / b
`,
    'calc/parser.py': `"""Tokenize and evaluate + - * / ( ) over decimal numbers, exactly."""
import re
from fractions import Fraction

from . import ops
from .errors import CalcError

_TOKEN = re.compile(r"\\s*(?:(\\d+(?:\\.\\d+)?)|(.))")


def tokenize(text: str) -> list:
    tokens, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        number, op = m.groups()
        if number is not None:
            tokens.append(Fraction(number))
        elif op in "+-*/()":
            tokens.append(op)
        else:
            raise CalcError(f"unexpected character {op!r} at {m.start(2)}")
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, tokens):
        self.tokens, self.i = tokens, 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self):
        tok = self.peek()
        if tok is None:
            raise CalcError("unexpected end of expression")
        self.i += 1
        return tok

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            fn = ops.add if self.take() == "+" else ops.sub
            value = fn(value, self.term())
        return value

    def term(self):
        value = self.factor()
        while self.peek() in ("*", "/"):
            fn = ops.mul if self.take() == "*" else ops.div
            value = fn(value, self.factor())
        return value

    def factor(self):
        tok = self.take()
        if tok == "-":
            return -self.factor()
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise CalcError("expected )")
            return value
        if isinstance(tok, Fraction):
            return tok
        raise CalcError(f"unexpected {tok!r}")


def evaluate(text: str) -> Fraction:
    tokens = tokenize(text)
    if not tokens:
        raise CalcError("empty expression")
    p = _Parser(tokens)
    value = p.expr()
    if p.peek() is not None:
        raise CalcError(f"unexpected {p.peek()!r}")
    return value
`,
  };
}

/** calcTests is the pytest suite: path under /workspace → text. */
export function calcTests(): Record<string, string> {
  return {
    'tests/test_ops.py': `from fractions import Fraction

import pytest

import calc


@pytest.mark.parametrize("name, a, b, want", ${py(OP_CASES)})
def test_op(name, a, b, want):
    assert getattr(calc, name)(Fraction(a), Fraction(b)) == Fraction(want)


def test_division_by_zero_is_a_calc_error():
    with pytest.raises(calc.CalcError, match="division by zero"):
        calc.div(Fraction(1), Fraction(0))
`,
    'tests/test_parser.py': `from fractions import Fraction

import pytest

from calc import CalcError, evaluate


@pytest.mark.parametrize("text, want", ${py(PARSE_CASES)})
def test_evaluate(text, want):
    assert evaluate(text) == Fraction(want)


@pytest.mark.parametrize("text, message", ${py(ERROR_CASES)})
def test_refused(text, message):
    with pytest.raises(CalcError, match=message):
        evaluate(text)
`,
  };
}
