# gatekeeper: the Python kernel of a session (runner/launch, SessionProgram).
#
# The session's supervisor starts `python3 -u -c <this> <ctl> <status>
# <main file>` once, at the session's first Python run. For each line "run"
# on the control fifo (after it wrote "ready" on the status fifo, once its
# interrupt handler is in place) it runs the main file in one namespace that lasts
# (a module __main__, as a notebook's), then writes "done <code>" on the
# status fifo. As a notebook does: the value of a last bare expression is
# shown (sys.displayhook: its repr, None not shown, _ set); top-level await
# runs; SystemExit ends the run with its code and the interpreter lives
# on; an exception prints its traceback (code 1); the interrupt at the
# run's timeout prints a short traceback (code 130). After each run every
# open matplotlib figure is saved as /workspace/figure-<run>-<n>.png and
# closed, when the run imported matplotlib.pyplot.


def _gatekeeper_kernel():
    import ast
    import builtins
    import os
    import signal
    import sys
    import traceback
    import types

    ctl_path, status_path, main = sys.argv[1:4]
    ctl = os.open(ctl_path, os.O_RDONLY)  # not inherited (PEP 446)
    status = os.open(status_path, os.O_WRONLY)
    import warnings

    # plt.show() under Agg only warns; the figures are saved at the run's end
    warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")

    mod = types.ModuleType("__main__")
    g = mod.__dict__
    g["__builtins__"] = builtins
    sys.modules["__main__"] = mod
    sys.argv = [main]
    sys.path[0] = os.path.dirname(main)

    def idle(signum, frame):
        pass  # an interrupt that came after the run's end

    signal.signal(signal.SIGINT, idle)
    os.write(status, b"ready\n")  # the supervisor may interrupt from now on
    flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    co_coroutine = 0x80  # inspect.CO_COROUTINE

    def execute(code):
        r = eval(code, g)
        if code.co_flags & co_coroutine:
            import asyncio

            asyncio.run(r)

    def show(exc):
        # the traceback from the program's first frame on: the kernel's
        # own frames are not the program's
        tb = exc.__traceback__
        t = tb
        while t is not None and t.tb_frame.f_code.co_filename != main:
            t = t.tb_next
        traceback.print_exception(type(exc), exc, t if t is not None else tb)

    def run_once():
        g["__file__"] = main
        try:
            with open(main, "rb") as f:
                src = f.read()
            tree = compile(src, main, "exec", ast.PyCF_ONLY_AST | flags)
        except SyntaxError as e:
            traceback.print_exception(type(e), e, None)
            return 1
        except (OSError, ValueError) as e:
            print(f"python3: can't open file {main!r}: {e}", file=sys.stderr)
            return 2
        try:
            body, last = tree.body, None
            if body and isinstance(body[-1], ast.Expr):
                body, last = body[:-1], body[-1]
            execute(compile(ast.Module(body=body, type_ignores=[]), main, "exec", flags))
            if last is not None:
                execute(compile(ast.Interactive(body=[last]), main, "single", flags))
        except SystemExit as e:
            c = e.code
            if c is None:
                return 0
            if isinstance(c, int):
                return c & 255
            print(c, file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("Traceback (most recent call last):\nKeyboardInterrupt: the run's timeout interrupted it", file=sys.stderr)
            return 130
        except BaseException as e:
            show(e)
            return 1
        return 0

    def figures(run):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for n, num in enumerate(plt.get_fignums(), 1):
            try:
                plt.figure(num).savefig(os.path.join(os.path.dirname(main), f"figure-{run}-{n}.png"))
            except Exception as e:
                print(f"gatekeeper: cannot save figure {num}: {e}", file=sys.stderr)
        plt.close("all")

    run, pending = 0, b""
    while True:
        while b"\n" not in pending:
            b = os.read(ctl, 64)
            if not b:
                os._exit(0)  # the supervisor is gone
            pending += b
        pending = pending[pending.index(b"\n") + 1 :]
        run += 1
        if signal.getsignal(signal.SIGINT) is idle:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            code = run_once()
            figures(run)
        except KeyboardInterrupt:
            print("Traceback (most recent call last):\nKeyboardInterrupt: the run's timeout interrupted it", file=sys.stderr)
            code = 130
        except BaseException as e:
            show(e)
            code = 1
        try:
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, idle)
            for s in (sys.stdout, sys.stderr):
                try:
                    s.flush()
                except Exception:
                    pass
        except KeyboardInterrupt:
            pass
        os.write(status, b"done %d\n" % code)


_gatekeeper_kernel()
