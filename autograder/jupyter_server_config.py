"""The course's Jupyter server, for reviewing in formgrader (issue 32). Start it from this folder:

    cd autograder && ../.venv/bin/jupyter lab --config=jupyter_server_config.py --no-browser

so that nbgrader reads ``nbgrader_config.py`` here (the course, the gradebook's ``db_url``) and this
file configures the server:

* the server's root is the course root (the repository), so formgrader's links to ``solutions/``,
  ``autograder/submitted/`` and the rest open (with this folder as root they pointed above it);
* MathJax is served from the course's environment at ``static/mathjax/`` (the copy of
  sphinx-mathjax-offline, as the book uses it), and formgrader's pages load it from there (the
  template ``jupyter/nbconvert/templates/formgrade/mathjax.html.j2``), so they work with no network
  (JupyterLab brings its own MathJax);
* nbgrader's student-side extensions (the Assignments list and the course list) are switched off:
  this course hands notebooks in through ``autograder/submitted/``, not through nbgrader's exchange,
  and they polled an exchange folder that does not exist, logging "Unwritable directory" each time.
  Formgrader's own exchange (its Release and Collect buttons) gets a folder of the course,
  ``autograder/exchange/``, so it warns of no missing directory;
* the login cookie is set for the whole server (path ``/``): nbgrader's pages give it the path of
  their ``base_url`` without its final "/", an empty path, which a browser takes as the folder of
  the page opened. A link such as ``/formgrader/gradebook/02-hmm/hmm?token=...`` then logged in
  that folder only, formgrader's calls to ``/formgrader/api/...`` went without the cookie, were
  sent to the login page, and the page stayed at "Loading, please wait...".

What a student wrote is shown on these pages, so they are built to keep it inert (issue 40):

* **The course is read-only through this server** (:class:`ReadOnlyCourse`): its contents API
  (JupyterLab's editor and file browser, ``/api/contents``) reads every file of the course and
  writes none: no save, new file, upload, copy, rename, delete or checkpoint restore. So nothing
  on a page (a script that got through, a forged request) can change ``nbgrader_config.py``, the
  course's code, ``solutions/`` or the gradebook's file, which nbgrader's commands and the grader
  run or read later as the instructor. Edit the course with your editor or a Jupyter server of
  your own. The terminal is off too. Kernels stay (JupyterLab runs notebooks); a script running in
  this origin could start one, which is why no student text may run as script at all.
* **A Content-Security-Policy** on every page (:data:`POLICY`): scripts only from this server
  (JupyterLab's one inline script allowed by its hash), no inline script or event handler, no
  plugin, no frame from elsewhere, no connection to another origin, images only from here or
  ``data:``, forms posted only here. JupyterLab needs ``'unsafe-eval'`` (it compiles its settings'
  schemas into functions): a script that already runs may evaluate a string, but markup runs none.
* **Formgrader's pages are the exception** (:data:`FORMGRADER_POLICY`): nbgrader's templates put
  inline script on every formgrader page (the ids of the submission in a ``<script>``, ``onclick``
  attributes, different on each page, so no hash can name them), so there inline script has to
  be allowed, and what keeps the student's notebook inert there is the course's sanitiser
  (``nbgrader_config.py``, ``course_nbgrader.InertContent``, ``inert.py``). The rest of the
  policy (no other origin, no plugin, no frame from elsewhere) still holds there. The files of a
  submission that formgrader serves (``/formgrader/submissions/<id>/<file>``) are a student's, and
  get the strictest policy (:data:`STUDENT_FILE_POLICY`: sandboxed, no script).
* **Formgrader's own pages escape every value** (:data:`FORMGRADER_PAGES`): nbgrader renders them
  without Jinja's autoescape, so a student's id or the path of a missing notebook was markup.

And formgrader says when its gradebook cannot be opened (issue 45): each of its pages answers
with the one line nbgrader's commands give (:func:`prepare_formgrader_request`), where it stayed
at "Loading, please wait...".
"""

import base64
import glob
import hashlib
import json
import os
import re
import sys
import sysconfig

import jinja2
import notebook
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupyterlab.commands import get_app_dir
from nbgrader.server_extensions.formgrader import base as formgrader_base
from nbgrader.server_extensions.formgrader import handlers as formgrader_handlers
from tornado import web

here = os.path.dirname(os.path.abspath(__file__))
c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

c.ServerApp.root_dir = os.path.dirname(here)
# jupyter/nbconvert/templates/formgrade/mathjax.html.j2 replaces nbconvert's MathJax macro on
# formgrader's pages (Jupyter's data path is searched before nbconvert's base templates)
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    [os.path.join(here, "jupyter"), *filter(None, [os.environ.get("JUPYTER_PATH")])]
)
c.ServerApp.extra_static_paths = [
    os.path.join(sysconfig.get_paths()["purelib"], "sphinx-mathjax-offline", "static")
]
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
}
# ... and their JupyterLab plugins with them: the Nbgrader menu's "Assignment List" and "Course
# List" called the switched-off server extensions and hung (issue 45). JupyterLab reads the
# plugins to leave out from labconfig/page_config.json on Jupyter's config path at each page.
os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
    [
        os.path.join(here, "jupyter", "config"),
        *filter(None, [os.environ.get("JUPYTER_CONFIG_PATH")]),
    ]
)
c.IdentityProvider.cookie_options = {"path": "/"}
c.Exchange.root = os.path.join(here, "exchange")
os.makedirs(c.Exchange.root, exist_ok=True)


# ------------------------------------------------------------------ read-only course (issue 40)


class ReadOnlyCourse(AsyncLargeFileManager):
    """The course's files through this server's contents API: read, never written (see above)."""

    def _refuse(self, path: str) -> None:
        raise web.HTTPError(
            403,
            f"{path}: the course's Jupyter server is read-only (autograder/jupyter_server_config.py"
            "): edit the course with your editor or a Jupyter server of your own",
        )

    async def get(self, path, content=True, type=None, format=None, **kwargs):  # noqa: A002
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        model["writable"] = False  # JupyterLab then opens notebooks read-only, without autosave
        return model

    async def save(self, model, path=""):
        self._refuse(path)

    async def delete_file(self, path):
        self._refuse(path)

    async def rename_file(self, old_path, new_path):
        self._refuse(old_path)

    async def copy(self, from_path, to_path=None):
        self._refuse(to_path or from_path)

    async def restore_checkpoint(self, checkpoint_id, path):
        self._refuse(path)


c.ServerApp.contents_manager_class = ReadOnlyCourse
c.ServerApp.terminals_enabled = False

# ------------------------------------------------------------------ Content-Security-Policy


def inline_script_hashes(*templates: str) -> list[str]:
    """CSP hashes (``'sha256-...'``) of the fixed inline scripts of JupyterLab's and Notebook 7's
    pages (each removes the token from the address), read from the installed files, so that the
    policy follows the installed versions. A script with a template expression in it is left out
    (its text changes when it is rendered): the policy blocks it."""
    inline = r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>(.*?)</script>"
    hashes = set()
    for template in templates:
        with open(template, encoding="utf-8") as f:
            scripts = re.findall(inline, f.read(), re.S)
        for script in scripts:
            if "{{" not in script and "{%" not in script:
                digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
                hashes.add(f"'sha256-{digest}'")
    return sorted(hashes)


LAB_SCRIPTS = inline_script_hashes(
    os.path.join(get_app_dir(), "static", "index.html"),  # the page JupyterLab serves
    *glob.glob(os.path.join(os.path.dirname(notebook.__file__), "templates", "*.html")),
)


def policy(script_src: str) -> str:
    """The course's Content-Security-Policy, with ``script-src`` as given."""
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {script_src}",
            "style-src 'self' 'unsafe-inline'",  # JupyterLab and MathJax set styles inline
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",  # the server's API and the kernels' websockets, nothing else
            "media-src 'self' data: blob:",
            "worker-src 'self' blob:",
            "frame-src 'self'",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'self'",
        ]
    )


# JupyterLab compiles its settings' JSON schemas into functions (ajv, ``new Function``), so its
# pages need 'unsafe-eval': a script already running may evaluate strings; markup runs nothing.
POLICY = policy(" ".join(["'self'", "'unsafe-eval'", *LAB_SCRIPTS]))
FORMGRADER_POLICY = policy("'self' 'unsafe-inline'")  # nbgrader's templates: see above
STUDENT_FILE_POLICY = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"

c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": POLICY}}


def formgrader_policy(handler: web.RequestHandler) -> str:
    """The policy of one of formgrader's pages (``handler``)."""
    if isinstance(handler, formgrader_handlers.SubmissionFilesHandler):
        return STUDENT_FILE_POLICY
    return FORMGRADER_POLICY


# nbgrader's formgrader handlers all derive from its BaseHandler; their pages get their policy
formgrader_base.BaseHandler.content_security_policy = property(formgrader_policy)


# ------------------------------------------------------------------ formgrader's own pages

# nbgrader renders formgrader's own pages (the lists, the manage pages, the page of a missing
# notebook; not the notebook itself, which nbconvert renders with the course's sanitiser) in a
# Jinja environment of its own made with Jinja's default: no autoescape. So a value written into a
# page was markup: a student's id, the path of a missing autograded notebook (formgrade_404.tpl),
# the configuration shown on Manage Assignments. None of these pages writes a value meant as HTML
# (every one is an id, a name, a path, a URL, a number or a text), so the course renders them all
# with autoescape on (issue 40), its own templates first (FORMGRADER_TEMPLATES: a working
# formgrade_404.tpl, the page of a gradebook that cannot be opened). Done by replacing the
# render method of nbgrader's formgrader BaseHandler, as for the policy above.
FORMGRADER_TEMPLATES = os.path.join(here, "jupyter", "formgrader")
FORMGRADER_PAGES = jinja2.Environment(
    loader=jinja2.FileSystemLoader([FORMGRADER_TEMPLATES, formgrader_handlers.template_path]),
    autoescape=True,
)


def render_formgrader_page(handler: web.RequestHandler, name: str, **namespace) -> str:
    """One of formgrader's own pages, every value escaped (see above)."""
    return FORMGRADER_PAGES.get_template(name).render(**namespace)


formgrader_base.BaseHandler.render = render_formgrader_page

# A PostgreSQL gradebook that cannot be opened (the database does not exist, the server does not
# answer) left formgrader at "Loading, please wait...": its pages load, then their scripts' calls
# to /formgrader/api/ fail with an error the scripts do not show (issue 45). Each of formgrader's
# requests first checks the gradebook (postgres.check_gradebook: one connection, nothing for
# SQLite) and, when it cannot be opened, answers 503 with the one line nbgrader's own commands
# give (nbgrader_config.py): on a page, formgrader's page saying so; from the API, JSON.
sys.path.insert(0, here)
import postgres  # noqa: E402 (lives beside this file, as for nbgrader_config.py)


async def prepare_formgrader_request(handler: formgrader_base.BaseHandler) -> None:
    """The Jupyter server's own preparation (the login), then the gradebook's check (above)."""
    await JupyterHandler.prepare(handler)
    if handler._finished or handler.current_user is None:  # redirected, or not logged in
        return
    try:
        postgres.check_gradebook(handler.db_url)
    except postgres.GradebookError as error:
        handler.set_status(503)
        if isinstance(handler, formgrader_base.BaseApiHandler):
            handler.set_header("Content-Type", "application/json")
            handler.finish(json.dumps({"message": str(error)}))
        else:
            handler.finish(
                handler.render("gradebook_error.tpl", base_url=handler.base_url, message=str(error))
            )


formgrader_base.BaseHandler.prepare = prepare_formgrader_request
