# gatekeeper: the warm Python interpreter's hook (runner/launch, Warm).
#
# The launcher of a warm sandbox starts `python3 -u main.py` before the run
# arrives, with PYTHONPATH naming the directory it wrote this file to, as
# sitecustomize.py, next to the fifo "go". Python imports it during its
# start, before it opens main.py. It undoes what brought it here (its entry
# in the variable, the directory, its place in sys.path and sys.modules),
# runs the image's own sitecustomize as site would have, imports the modules to
# preload, writes the ready mark and waits for the launcher's go, which
# comes once the run's workspace is unpacked. Then it returns and Python
# goes on exactly as `python3 -u main.py` does from there: the same
# sys.argv, __main__, __file__, sys.path[0], cwd, streams, signals, exit
# codes and tracebacks, because it is that interpreter running main.py.
#
# When what was preloaded could differ from what a cold start would import
# (a preload failed or warned; the workspace holds a module or package of
# the name of one the preload loaded, which main.py's directory, first on
# sys.path, would shadow; the user site directory exists; or a file the
# preloaded modules read at import is there), it replaces itself with a
# fresh `python3 -u main.py` (execv: the same process, argv and
# environment), which is a cold start.
#
# After the preloads it freezes the garbage collector's objects
# (gc.freeze): what the run can tell is that gc.get_freeze_count() is not
# 0 and that those objects are not in gc.get_objects().
#
# Nothing of the run passes through here: the go line is a constant, and
# the run's tag stays with the sandbox's PID 1 (init).


def _gatekeeper_warm(preload, reads):
    import os
    import sys

    before = set(sys.modules)
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        go = os.open(os.path.join(here, "go"), os.O_RDONLY)  # close-on-exec
        # PYTHONPATH is this directory, then the program's own (the
        # wrappers' directory, launch.Env): leave the program's.
        rest = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p and p != here]
        if rest:
            os.environ["PYTHONPATH"] = ":".join(rest)
        else:
            os.environ.pop("PYTHONPATH", None)
        while here in sys.path:
            sys.path.remove(here)
        for d in (here, os.path.join(here, "__pycache__")):
            sys.path_importer_cache.pop(d, None)
        for root, dirs, files in os.walk(here, topdown=False):
            for n in files:
                os.unlink(os.path.join(root, n))
            for n in dirs:
                os.rmdir(os.path.join(root, n))
        os.rmdir(here)
    except BaseException:
        os._exit(125)  # the launcher gave up on this interpreter

    # The image's own sitecustomize, which this file shadowed, as site
    # runs it (errors reported the same way).
    del sys.modules["sitecustomize"]
    site = sys.modules["site"]
    site.execsitecustomize()

    clean = True
    if preload:
        try:
            import warnings

            with warnings.catch_warnings(record=True) as caught:
                for name in preload:
                    __import__(name)
            clean = not caught
        except BaseException:
            clean = False
    loaded = {n.partition(".")[0] for n in set(sys.modules) - before}
    if preload and clean:
        # What the preloads made lives as long as the process: out of
        # the collector's sight (the permanent generation), it is not
        # traversed again by every full collection of the run and by
        # those of the interpreter's exit, which otherwise take several
        # times a hello world (gc.freeze, as a pre-fork server does).
        import gc

        gc.collect()
        gc.freeze()

    os.write(1, b"\x1egatekeeper-ready\x1e")
    got = b""
    while not got.endswith(b"\n"):
        b = os.read(go, 64)
        if not b:
            os._exit(125)  # the run is another language's, or the launcher is gone
        got += b
    os.close(go)
    if got != b"go\n":
        os._exit(125)

    # The wrappers' directory (PYTHONPATH) did not exist while the
    # preloads were imported, and the import system remembers that (None
    # in sys.path_importer_cache): forget it, so that the program imports
    # the wrappers as a cold start does (importlib.invalidate_caches does
    # the same, but would import importlib, which a cold start has not).
    for p, finder in list(sys.path_importer_cache.items()):
        if finder is None:
            del sys.path_importer_cache[p]

    fresh = not clean
    if not fresh and site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        fresh = True  # a cold start would add it to sys.path, and its .pth files
    if not fresh:
        fresh = any(os.path.lexists(p) for p in reads)
    if not fresh and loaded:
        boot = sys.modules["_frozen_importlib_external"]
        suffixes = boot.SOURCE_SUFFIXES + boot.BYTECODE_SUFFIXES + boot.EXTENSION_SUFFIXES
        try:
            entries = os.listdir(os.path.dirname(os.path.abspath(sys.argv[0])))
        except OSError:
            entries = []
        for e in entries:
            names = {e}
            for s in suffixes:
                if e.endswith(s):
                    names.add(e[: -len(s)])
            if names & loaded:
                fresh = True
                break
    if fresh:
        os.execv(sys.executable, sys.orig_argv)

    if "sitecustomize" not in sys.modules:
        # The image has none: leave none, as a cold start does.
        raise ImportError("no sitecustomize", name="sitecustomize")
