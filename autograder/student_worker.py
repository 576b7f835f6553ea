"""The worker that runs one submission's code inside the sandbox, and answers the grader's calls.

Issue 11, "the checks outside the student's interpreter". :mod:`autograder.sandbox` copies this
file, alone, into the sandbox and runs it as ``python -I student_worker.py PROGRAM IN OUT``. It is
the only trusted code in the worker's interpreter, and it runs before any code of the student's:

1. it sets its own resource limits (``resource.setrlimit``: address space, processes, file size,
   CPU time) from the program file, so everything it starts inherits them;
2. it puts the *student view* of ``nlpcourse`` (:mod:`autograder.student_view`) first on
   ``sys.path``, so reference functions raise and no check or hidden case exists here;
3. it does what the grader asks, one numbered request at a time (:func:`serve`): run the cell
   it is sent (the course's setup cells, taken from ``solutions/``, and the student's own code
   cells; never a test cell), list the names the cells defined, or call a function of
   the student's and send back the answer as plain data (the same conversion as
   :func:`nlpcourse.checks.core.to_plain`: builtins and numpy arrays) or the exception's type
   name, message and line. The grader runs each test cell once the cells before it have run, as
   nbgrader runs a notebook.

The wire: each message is an 8-byte big-endian length and its bytes. From the grader it is a
pickle that may hold numpy arrays, torch tensors and, as pickle *persistent ids*, objects that
stay in the grader (a model passed to ``perplexity``, a tagger, a decoder's ``step``): the
unpickler turns exactly those into :class:`Remote` objects, never an argument of the check's, of
whatever type. Calling a remote object (or reading an attribute of it) asks the grader, which runs
the trusted object and sends its answer back. To the grader it is one value in the wire's format
with no references (``protocol.encode``): builtins, with arrays and tensors as ``protocol.Array``
and remote objects as ``protocol.Handle``. Prints, warnings and logging go to the process's
stdout and stderr, which the grader reads, caps and ignores: they never change a grade. The
wire's constants, framing and format are :mod:`autograder.protocol`'s, copied beside this file
into the sandbox.

Time limits: each of the student's cells and calls runs under a timer of the seconds the grader
gave with the request (the per-cell limit, or less when less of the notebook's time is left);
when it fires, the worker interrupts itself (``SIGINT``, as a Jupyter kernel is interrupted), so the
cell ends with a ``KeyboardInterrupt`` reported as ``CELL_TIMEOUT`` and what it defined before is
kept. Code that ignores the interrupt is killed by the grader a little later.
"""

import collections
import decimal
import fractions
import io
import json
import os
import pickle
import resource
import signal
import sys
import traceback

try:  # in the sandbox: the copy beside this file (python -I puts no folder of it on sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from protocol import CELL_TIMEOUT, HEADER, MAX_MESSAGE, Array, Handle, encode, write_message
finally:
    del sys.path[0]


class NotPlainAnswer(TypeError):
    """An answer that is not plain data (the message says why; as in nlpcourse.checks.core)."""


class GraderSaid(Exception):
    """A trusted object in the grader raised (its type name and message are in the text)."""


# ------------------------------------------------------------------------------ the pipe


class _FromGrader(pickle.Unpickler):
    """Reads the grader's pickles (trusted): its persistent ids are its objects, as Remote."""

    def persistent_load(self, pid):
        _, handle, text = pid  # ("handle", number, text), written by autograder.wire.dumps
        return Remote(handle, text)


def from_grader(data: bytes):
    """A message of the grader's, its objects as :class:`Remote` objects."""
    return _FromGrader(io.BytesIO(data)).load()


class Pipe:
    """Length-prefixed messages over two file descriptors: pickles in, the wire's format out."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out

    def send(self, message) -> None:
        write_message(self.fd_out, encode(message))

    def _read(self, n: int) -> bytes:
        chunks = io.BytesIO()
        while n:
            chunk = os.read(self.fd_in, min(n, 1 << 20))
            if not chunk:
                raise EOFError("the grader closed the pipe")
            chunks.write(chunk)
            n -= len(chunk)
        return chunks.getvalue()

    def receive_bytes(self) -> bytes:
        (n,) = HEADER.unpack(self._read(HEADER.size))
        if n > MAX_MESSAGE:
            raise EOFError(f"a message of {n} bytes from the grader")
        return self._read(n)

    def receive(self):
        return from_grader(self.receive_bytes())


PIPE: Pipe


# ------------------------------------------------------------------------------ plain answers

_LEAVES = (type(None), bool, int, float, complex, str, bytes)
_DICTS = (dict, collections.Counter, collections.defaultdict, collections.OrderedDict)
_NAMES = {list: "list", tuple: "tuple", dict: "dict", set: "set", frozenset: "frozenset"}


def _array(array, kind: str = "ndarray"):
    """A numpy array on the wire: its bytes in C order (a 0-d array stays 0-d)."""
    return Array(kind, array.dtype.str, tuple(array.shape), array.tobytes(order="C"))


def plain(value, depth: int = 0, tensors: bool = False):
    """``value`` as wire data: the conversion of ``nlpcourse.checks.core.to_plain``, with arrays
    (and, for ``tensors=True``, tensors kept as tensors) as ``protocol.Array`` and remote objects
    as ``protocol.Handle``."""
    if depth > 40:
        raise NotPlainAnswer("the answer is nested too deeply (does it contain itself?)")
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind in (fractions.Fraction, decimal.Decimal):
        return float(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(value, numpy.generic) and kind.__module__ == "numpy":
            return plain(value.item(), depth + 1)  # numpy scalars: int, float, bool, str
        if isinstance(value, numpy.ndarray) and kind.__module__.startswith("numpy"):
            array = numpy.array(value, copy=True, subok=False)
            if array.dtype.kind in "biufcUS":
                return _array(array)
            return plain(array.tolist(), depth + 1)  # an object array: its items one by one
    torch = sys.modules.get("torch")
    if torch is not None and kind in (torch.Tensor, torch.nn.Parameter):
        tensor = value.detach().cpu()
        if tensor.dtype.is_floating_point and tensor.element_size() < 4:
            tensor = tensor.float()  # float16, bfloat16
        return _array(tensor.numpy(), "tensor" if tensors else "ndarray")
    if kind in _DICTS:
        return {
            plain(k, depth + 1, tensors): plain(v, depth + 1, tensors) for k, v in dict.items(value)
        }
    if kind in (list, tuple, set, frozenset):
        return kind(plain(v, depth + 1, tensors) for v in kind.__iter__(value))
    if kind is range:
        return list(value)
    if kind.__bases__ == (tuple,) and isinstance(getattr(kind, "_fields", None), tuple):
        return tuple(plain(v, depth + 1, tensors) for v in tuple.__iter__(value))  # named tuple
    if isinstance(value, Remote):
        return Handle(object.__getattribute__(value, "_handle"))
    plain_base = next(
        (base for base in kind.__mro__[1:] if base in _NAMES or base in _LEAVES), None
    )
    if plain_base is not None:
        raise NotPlainAnswer(
            f"it is a {kind.__name__}, a subclass of {plain_base.__name__} that your code defines: "
            f"return a plain {plain_base.__name__} (the checks do not run code of the answer)"
        )
    raise NotPlainAnswer(
        f"it is a {kind.__name__}; return plain Python values (numbers, strings, lists, tuples, "
        "dicts) or numpy arrays / torch tensors, as the exercise asks"
    )


# ------------------------------------------------------------------------------ callbacks


class Remote:
    """An object that stays in the grader (a model, a tagger, a decoder's step function).

    Calling it, or reading one of its public attributes, asks the grader, which runs the trusted
    object there and sends back plain data (or a handle to another such object)."""

    def __init__(self, handle: int, text: str):
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_text", text)

    def __call__(self, *args, **kwargs):
        return _callback(object.__getattribute__(self, "_handle"), None, args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return _callback(object.__getattribute__(self, "_handle"), name, (), {})

    def __repr__(self) -> str:
        return object.__getattribute__(self, "_text")


# The answers of the grader's objects during one call, by their question. The checks' objects are
# functions of their arguments (a table of probabilities, a tagger), so asking again gives the same
# answer: a student's perplexity that asks P(w | v) a thousand times asks the grader a few times.
_ANSWERS: dict[bytes, bytes] = {}


def _callback(handle: int, attribute, args: tuple, kwargs: dict):
    question = (
        "callback",
        handle,
        attribute,
        plain(args, tensors=True),
        plain(kwargs, tensors=True),
    )
    key = encode(question)
    if key not in _ANSWERS:
        PIPE.send(question)
        _ANSWERS[key] = PIPE.receive_bytes()
    kind, value = from_grader(_ANSWERS[key])  # a new copy each time: the student may change it
    if kind == "error":
        raise GraderSaid(value)
    return value


# ------------------------------------------------------------------------------ cells


class _Shell:
    """Stands in for IPython's ``get_ipython()``: magics and shell commands do nothing here."""

    def run_line_magic(self, *args, **kwargs):
        return None

    def run_cell_magic(self, *args, **kwargs):
        return None

    def system(self, *args, **kwargs):
        return None

    getoutput = system


def _compile(source: str, label: str):
    filename = f"<cell {label}>"
    try:
        return compile(source, filename, "exec")
    except SyntaxError:
        try:  # IPython syntax (%magic, !command): what the notebook's kernel would run
            from IPython.core.inputtransformer2 import TransformerManager

            return compile(TransformerManager().transform_cell(source), filename, "exec")
        except Exception:
            pass
        raise


def where(err: BaseException) -> str:
    """The last line of the student's own cells in the traceback, as 'line N of cell X: code'."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename.startswith("<cell")]
    if not frames:
        return ""
    frame = frames[-1]
    label = frame.filename[len("<cell ") : -1]
    return f"line {frame.lineno} of the cell {label}"


# ------------------------------------------------------------------------------ time limits


class Timer:
    """Interrupts the student's code at the seconds the grader gave, as a Jupyter kernel is
    interrupted: a ``SIGINT`` to itself, which Python turns into ``KeyboardInterrupt``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.fired = False
        signal.signal(signal.SIGALRM, self._fire)
        # Python turns SIGINT into KeyboardInterrupt only if it was not ignored when the process
        # started, and a grader started in the background (``command &`` in a script) hands its
        # workers an ignored SIGINT: the interrupt would be lost and the cell killed, with what it
        # defined. A Jupyter kernel, too, installs its own handler whatever it inherited.
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def _fire(self, signum, frame) -> None:
        self.fired = True
        signal.raise_signal(signal.SIGINT)

    def start(self, seconds) -> None:
        """Interrupt at ``seconds`` from now (``None``: no interrupt, for the course's setup)."""
        self.fired = False
        self.seconds = seconds or 0.0
        if seconds:
            signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 0.001))

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)


TIMER: Timer


def describe(err: BaseException) -> tuple[str, str, str]:
    if isinstance(err, KeyboardInterrupt) and TIMER.fired:
        message = f"interrupted at the time limit of {TIMER.seconds:g} s"
        return CELL_TIMEOUT, message, where(err)
    try:
        message = str(err)[:4000]
    except BaseException:
        message = "(its message could not be shown)"
    return type(err).__name__[:100], message, where(err)


def run_cell(cell: dict, namespace: dict, seconds) -> tuple | None:
    """Run one cell of the program, interrupted at ``seconds``; its error (see :func:`describe`)
    or ``None``."""
    try:
        TIMER.start(seconds)
        exec(_compile(cell["source"], cell["label"]), namespace)
    except BaseException as err:  # SystemExit and KeyboardInterrupt too: the cell is over
        return describe(err)
    finally:
        TIMER.stop()
    return None


def defined_names(namespace: dict) -> dict[str, str]:
    names = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") or type(value).__name__ == "module":
            continue
        names[name] = "callable" if callable(value) else type(value).__name__
    return names


def call(namespace: dict, name, args, seconds) -> tuple:
    """Call the student's ``name(*args)``, interrupted at ``seconds``: ``("answer", plain data)``
    or ``("raised", type name, message, where)``."""
    _ANSWERS.clear()
    try:
        function = namespace[name]
        TIMER.start(seconds)
        try:
            answer = function(*args)
        finally:
            TIMER.stop()
        return ("answer", plain(answer))
    except BaseException as err:  # sent back as its type name, message and line
        return ("raised", *describe(err))


def serve(namespace: dict) -> None:
    """Do what the grader asks, one request at a time, each answered with the request's number:
    ``("run", n, cell, seconds)`` runs a cell (its ``source`` and ``label``; the course's setup
    cells may be sent before the submission is known), ``("names", n)`` lists what the cells
    defined, ``("call", n, name, args, seconds)`` calls a function of the student's. The
    grader decides which cell runs and for how long, and keeps its own clock; nothing here (which
    the student's code could rewrite) is trusted with either."""
    PIPE.send(("started",))
    while True:
        message = PIPE.receive()
        kind = message[0]
        if kind == "exit":
            return
        number = message[1]
        if kind == "run":
            reply = ("done", run_cell(message[2], namespace, message[3]))
        elif kind == "names":
            reply = ("names", defined_names(namespace))
        elif kind == "call":
            reply = call(namespace, message[2], message[3], message[4])
        else:
            continue
        try:
            PIPE.send((reply[0], number, *reply[1:]))
        except Exception as err:  # e.g. an answer too large to send
            text = f"the answer could not be sent: {err}"
            PIPE.send(("raised", number, "NotPlainAnswer", text, ""))


# ------------------------------------------------------------------------------ start


def set_limits(limits: dict) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too large file: an error, not a kill
    mb = 2**20
    wanted = {
        resource.RLIMIT_AS: limits["memory_mb"] * mb,
        resource.RLIMIT_NPROC: limits["processes"],
        resource.RLIMIT_FSIZE: limits["file_size_mb"] * mb,
        resource.RLIMIT_CPU: limits["cpu_seconds"],
        resource.RLIMIT_CORE: 0,
    }
    for which, value in wanted.items():
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        # CPU: SIGXCPU at the limit (which the grader reports as such), SIGKILL 5 s later
        top = (
            value + 5 if which == resource.RLIMIT_CPU and hard == resource.RLIM_INFINITY else value
        )
        resource.setrlimit(which, (value, top))


def drop_privileges(uid) -> None:
    """Started as root (by a root grader): become the unprivileged ``uid``, for good."""
    if uid is None or os.geteuid() != 0:
        return
    import ctypes

    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no setuid program helps
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        raise SystemExit("could not leave root")


def main() -> None:
    global PIPE, TIMER
    program_path, fd_in, fd_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(program_path, encoding="utf-8") as file:
        program = json.load(file)
    os.close(0)
    set_limits(program["limits"])
    drop_privileges(program["uid"])
    PIPE = Pipe(fd_in, fd_out)
    TIMER = Timer()
    sys.path.insert(0, program["view"])
    sys.argv = ["notebook"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "get_ipython": _Shell}
    serve(namespace)


if __name__ == "__main__":
    main()
