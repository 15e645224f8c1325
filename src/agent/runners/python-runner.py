# cella code interpreter: the python runner.
#
# Started by cella-init as `python3 -u -I -` with this file on stdin (a memfd, read to its end
# before the runner runs; main() puts /dev/null there for runs) in the sandbox; one process is one
# code context. Requests arrive on fd 3 and events leave on fd 4, one JSON object per line
# (docs/decisions/0025-code-interpreter-runners.md). fd 1 and fd 2 are the current run's
# stdout and stderr. Standard library only; numpy, pandas, matplotlib and PIL are used when
# they can be imported.
#
# Everything lives in main() and its helpers so that the user's namespace (a fresh
# __main__ module) holds nothing of the runner.

import ast
import asyncio
import base64
import builtins
import fcntl
import io
import json
import linecache
import os
import re
import select
import signal
import sys
import traceback
import types

REQ_FD, EV_FD = 3, 4
# Events longer than this are replaced by a short text result: the agent refuses lines
# beyond 64 MiB, and a refused line would cost the whole context.
MAX_EVENT = 48 << 20
CELL_RE = re.compile(r"<cell-\d+>")

# MIME types of IPython's display protocol -> result keys of the hosted SDK.
MIME_KEYS = {
    "text/plain": "text",
    "text/html": "html",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/svg+xml": "svg",
    "application/json": "json",
    "text/markdown": "markdown",
    "text/latex": "latex",
    "application/javascript": "javascript",
}
# IPython's _repr_*_ methods, in the order they are asked.
REPR_METHODS = [("_repr_%s_" % key, mime) for mime, key in MIME_KEYS.items() if key != "text"]


class Channel:
    """The request and event pipes, moved above user fds with close-on-exec."""

    # Bound once: a cell may replace os.write or json.dumps in the modules it shares.
    _write = staticmethod(os.write)
    _dumps = staticmethod(json.dumps)
    _loads = staticmethod(json.loads)

    def __init__(self):
        rfd = fcntl.fcntl(REQ_FD, fcntl.F_DUPFD_CLOEXEC, 100)
        self.wfd = fcntl.fcntl(EV_FD, fcntl.F_DUPFD_CLOEXEC, 100)
        os.close(REQ_FD)
        os.close(EV_FD)
        os.set_blocking(rfd, True)  # the reader below expects whole reads
        self.reader = os.fdopen(rfd, "rb", buffering=1 << 16)

    def requests(self):
        """Yields each request line decoded; ends at EOF (the agent went away)."""
        for line in self.reader:
            try:
                req = self._loads(line)
            except ValueError:
                continue
            if isinstance(req, dict):
                yield req

    def emit(self, event):
        # ensure_ascii=False then 'replace': a lone surrogate in user text becomes '?'
        # instead of a \ud800 escape that strict JSON parsers refuse.
        data = self._dumps(event, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        if len(data) > MAX_EVENT and event.get("type") == "result":
            note = "[result of %d bytes not sent: larger than %d]" % (len(data), MAX_EVENT)
            small = {"text": note, "isMainResult": event["result"].get("isMainResult", False)}
            data = self._dumps(dict(event, result=small)).encode() + b"\n"
        view = memoryview(data)
        while view:  # a write interrupted by a signal may be partial
            try:
                view = view[self._write(self.wfd, view):]
            except BlockingIOError:  # a non-blocking pipe that is full
                select.select([], [self.wfd], [])


def preload():
    """Imports the heavy modules before `ready` so the first run does not pay for them."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in ("numpy", "pandas", "matplotlib"):
        try:
            __import__(name)
        except Exception:
            pass
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception:
        pass


def b64(data):
    return base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data


def to_json_value(value):
    """value if it is plain JSON data (no NaN), else raises."""
    json.dumps(value, allow_nan=False)
    return value


def figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return b64(buf.getvalue())


def add_mime(result, mime, data):
    key = MIME_KEYS.get(mime)
    if key is None or key in result or data is None:
        return
    if key in ("png", "jpeg"):
        data = b64(data)
    elif key == "json":
        if isinstance(data, (str, bytes)):
            data = json.loads(data)
        data = to_json_value(data)
    if key != "json" and not isinstance(data, str):
        return
    result[key] = data


def rich_method(value, name):
    """value's display method `name`, or None. Classes are not asked (their methods are
    unbound), nor objects that answer any attribute (IPython's canary test)."""
    if isinstance(value, type) or hasattr(value, "_ipython_canary_method_should_not_exist_"):
        return None
    method = getattr(value, name, None)
    return method if callable(method) else None


def format_value(value):
    """The result dict for one displayed value: rich forms first, then text = repr()."""
    result = {}
    mpl_figure = sys.modules.get("matplotlib.figure")
    pil_image = sys.modules.get("PIL.Image")
    if mpl_figure is not None and isinstance(value, mpl_figure.Figure):
        result["png"] = figure_png(value)
        sys.modules["matplotlib.pyplot"].close(value)  # shown here, not again at the end
    method = rich_method(value, "_repr_mimebundle_")
    if method:
        try:
            bundle = method()
            if isinstance(bundle, tuple):
                bundle = bundle[0]
            for mime, data in (bundle or {}).items():
                add_mime(result, mime, data)
        except Exception:
            pass
    for name, mime in REPR_METHODS:
        method = rich_method(value, name)
        if MIME_KEYS[mime] in result or not method:
            continue
        try:
            data = method()
            if isinstance(data, tuple):  # (data, metadata)
                data = data[0]
            add_mime(result, mime, data)
        except Exception:
            pass
    if pil_image is not None and isinstance(value, pil_image.Image) and "png" not in result:
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        result["png"] = b64(buf.getvalue())
    if "text" not in result:
        result["text"] = repr(value)
    return result


def format_error(exc):
    """name, message and traceback lines of exc, without the runner's own frames."""
    tb = exc.__traceback__
    while tb is not None and not CELL_RE.fullmatch(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    exc.__traceback__ = tb
    lines = []
    for chunk in traceback.format_exception(type(exc), exc, tb):
        lines.extend(CELL_RE.sub("<cell>", chunk).rstrip("\n").split("\n"))
    if isinstance(exc, SyntaxError) and exc.msg:
        message = "%s (<cell>, line %s)" % (exc.msg, exc.lineno)
    else:
        message = CELL_RE.sub("<cell>", str(exc))
    return {"name": type(exc).__name__, "message": message, "traceback": lines}


class Interpreter:
    def __init__(self, channel):
        self.channel = channel
        self.count = 0
        self.run_id = None
        self.in_user_code = False
        # The user's namespace is a real __main__ module, so that pickle and friends find
        # classes defined in cells.
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = builtins
        self.main.__dict__["display"] = self.display
        sys.modules["__main__"] = self.main
        # One event loop for the context: tasks a cell leaves running go on in later
        # cells that await.
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.patch_pyplot()
        signal.signal(signal.SIGINT, self.on_sigint)

    def on_sigint(self, signum, frame):
        # Only user code is interrupted; the runner's own bookkeeping finishes the run.
        if self.in_user_code:
            raise KeyboardInterrupt

    def patch_pyplot(self):
        """plt.show() turns the open figures into results at once (Agg never blocks)."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.show = lambda *args, **kwargs: self.flush_figures()

    def flush_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                fig = plt.figure(num)
                self.send_result({"png": figure_png(fig), "text": repr(fig)})
        finally:
            plt.close("all")

    def send_result(self, result, main=False):
        if main:
            result["isMainResult"] = True
        # A SIGINT must not cut an event line in half: not interruptible while writing.
        interruptible, self.in_user_code = self.in_user_code, False
        try:
            self.channel.emit({"type": "result", "id": self.run_id, "result": result})
        finally:
            self.in_user_code = interruptible

    def display(self, *values):
        """display(obj, ...) in a cell: each object becomes a (non-main) result."""
        for value in values:
            self.send_result(format_value(value))

    def compile_cell(self, code):
        """(body, last, shown): code objects for the statements and the final expression,
        and whether the latter's value is a result: not when a `;` follows it (IPython's
        way to silence `plt.plot(x);`)."""
        filename = "<cell-%d>" % self.count
        lines = code.splitlines(True)
        # Registered so tracebacks show source lines, also for functions of older cells.
        linecache.cache[filename] = (len(code), None, lines, filename)
        tree = ast.parse(code, filename, "exec")
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        last, shown = None, False
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            node = tree.body.pop()
            last = compile(ast.Expression(node.value), filename, "eval", flags)
            # line numbers count \n (str.splitlines also splits at \f and more), col
            # offsets count UTF-8 bytes
            line = code.split("\n")[node.end_lineno - 1]
            after = line.encode()[node.end_col_offset:].decode()
            shown = not after.lstrip().startswith(";")
        return compile(tree, filename, "exec", flags), last, shown

    def evaluate(self, code_obj):
        """Runs one code object; awaits it on the runner's loop if it used top-level await."""
        value = eval(code_obj, self.main.__dict__)
        if code_obj.co_flags & 0x80:  # CO_COROUTINE: the cell awaited at top level
            task = self.loop.create_task(value)
            try:
                value = self.loop.run_until_complete(task)
            except KeyboardInterrupt:
                task.cancel()
                self.in_user_code = False
                self.loop.run_until_complete(asyncio.wait({task}, timeout=1))
                raise
        return value

    def run_user(self, code):
        """Everything that may run user code: compile, execute, format the last value."""
        body, last, shown = self.compile_cell(code)
        self.evaluate(body)
        if last is not None:
            value = self.evaluate(last)
            if value is not None and shown:
                self.main.__dict__["_"] = value
                self.send_result(format_value(value), main=True)
        self.flush_figures()

    def run(self, req):
        self.count += 1
        self.run_id = req.get("id")
        code = req.get("code")
        error = None
        try:
            self.in_user_code = True
            try:
                self.run_user(code if isinstance(code, str) else "")
            finally:
                self.in_user_code = False
        except BaseException as exc:  # KeyboardInterrupt and SystemExit are errors too
            error = exc
        if error is not None:
            self.close_figures()
            event = {"type": "error", "id": self.run_id}
            try:
                event.update(format_error(error))
            except Exception:  # a hostile exception object (a __str__ that raises)
                event.update(name=type(error).__name__, traceback=[],
                             message="the error could not be described")
            self.channel.emit(event)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        self.channel.emit({"type": "done", "id": self.run_id, "executionCount": self.count})

    def close_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        try:
            plt.close("all")
        except Exception:  # no pyplot, or one user code broke
            pass

    def setup(self, req):
        if req.get("language", "python") != "python":
            return {"type": "setup_error", "message": "this runner speaks python only"}
        try:
            cwd = req.get("cwd")
            if cwd:
                os.chdir(cwd)
            env = req.get("env") or {}
            for key, value in env.items():
                os.environ[str(key)] = str(value)
        except Exception as exc:
            return {"type": "setup_error", "message": str(exc)}
        return {"type": "setup_ok"}


def main():
    # Until the interpreter takes SIGINT over, one must not end the runner while it loads.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # stdin held this source (already read to its end): runs read /dev/null instead.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    channel = Channel()
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        # print() from user code must not meet a full non-blocking pipe.
        os.set_blocking(fd, True)
        stream.reconfigure(write_through=True, line_buffering=False)
    # -I leaves the working directory out of sys.path; a notebook imports its own modules.
    sys.path.insert(0, "")
    preload()
    interp = Interpreter(channel)
    channel.emit({"type": "ready"})
    for req in channel.requests():
        try:
            kind = req.get("type")
            if kind == "setup":
                channel.emit(interp.setup(req))
            elif kind == "run":
                interp.run(req)
        except BrokenPipeError:  # the agent went away
            break
        except Exception:  # the runner's own failure: told, the next request still served
            traceback.print_exc()
    # EOF: the context is closed. Threads user code left running must not keep the
    # process alive.
    os._exit(0)


main()
