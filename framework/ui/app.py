"""The ``deltamark ui`` web app (Flask): pages for people, the same data as JSON for
scripts, and, when started with ``--allow-actions``, the admin actions of the CLI.

Routes: ``/`` (every job and workflow), ``/jobs/JOB``, ``/workflows/NAME``, each also as
``/api/...`` JSON, ``/api/jobs/JOB/waiting`` (the input waiting, which ``/`` fetches for
each job once shown), and ``/metrics`` for Prometheus (``framework.ops.metrics``). Actions are
POSTs: ``/jobs/JOB/rewind`` (after a preview of what ``--restore-targets`` would remove),
``/jobs/JOB/reset``, ``/runs/RUN_ID/abort``, ``/workflows/runs/ID/resume``. They need
the token printed when the server starts: opening ``/?token=TOKEN`` stores it in a
same-site, HTTP-only cookie, and each form carries a CSRF value derived from it.
Templates escape everything they show.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, abort, jsonify, redirect, render_template, request, url_for

from framework.common import humanize
from framework.config import Settings
from framework.errors import DeltamarkError
from framework.ops import actions as state_actions
from framework.ops import admin
from framework.ops.metrics import CONTENT_TYPE, Metrics
from framework.sources import bookmark_codec
from framework.ui import pages

if TYPE_CHECKING:
    from flask.typing import ResponseReturnValue
    from werkzeug.wrappers import Response as BaseResponse

__all__ = ["create_app"]

TOKEN_COOKIE = "deltamark_token"


def create_app(settings: Settings, *, token: str | None = None,
               backlog_every: float = 60) -> Flask:
    """The app for ``settings``' state; actions only with a ``token``; ``/metrics`` plans
    a job's input waiting again after ``backlog_every`` seconds (``framework.ops.metrics``)."""
    app = Flask(__name__, static_folder=str(Path(__file__).with_name("static")),
                template_folder=str(Path(__file__).with_name("templates")))
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    # JSON shown as text (or in an attribute): autoescaping then escapes it as HTML
    app.jinja_env.filters["json"] = lambda value, indent=None: json.dumps(
        value, indent=indent, default=str)
    # the raw values the pages hold, in words (the /api/ routes keep them raw)
    app.jinja_env.filters.update(
        size=humanize.size, duration=humanize.duration, read=humanize.read,
        job_states=humanize.job_states,
        wrote=lambda output, target: admin.describe_write(target, output),
        bookmark=lambda state, kind: bookmark_codec.describe(kind, state),
        utc=lambda iso: humanize.utc(datetime.fromisoformat(iso)))

    def authorised() -> bool:
        return token is not None and _same(request.cookies.get(TOKEN_COOKIE, ""), token)

    def csrf() -> str:
        return hmac.new((token or "").encode(), b"csrf", hashlib.sha256).hexdigest()

    @app.context_processor
    def actions() -> dict[str, Any]:
        return {"actions": token is not None, "authorised": authorised(),
                "csrf": csrf() if authorised() else ""}

    @app.before_request
    def take_token() -> BaseResponse | None:
        if token is not None and request.method == "GET" and "token" in request.args:
            if not _same(request.args["token"], token):
                abort(403)
            response = redirect(request.path)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
            return response
        if request.method == "POST":
            same_origin = request.headers.get("Origin") in (None, request.host_url.rstrip("/"))
            if not (authorised() and same_origin
                    and _same(request.form.get("csrf", ""), csrf())):
                abort(403)
        return None

    @app.after_request
    def lock_down(response: Response) -> Response:
        # only this server's own scripts, styles and images, even if some text got through
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "form-action 'self'; frame-ancestors 'none'")
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    @app.errorhandler(DeltamarkError)
    def refused(exc: DeltamarkError) -> ResponseReturnValue:
        status = 404 if type(exc).__name__.endswith("NotFoundError") else 400
        if request.path.startswith("/api/"):
            return jsonify({"error": str(exc), "error_type": type(exc).__name__}), status
        return render_template("error.html", error=str(exc)), status

    @app.get("/")
    def overview() -> str:
        return render_template("overview.html", page=pages.overview(settings))

    @app.get("/api/overview")
    def overview_json() -> Response:
        return jsonify(pages.overview(settings))

    @app.get("/jobs/<job>")
    def job(job: str) -> str:
        admin.require_job(settings, job)
        page = pages.job_page(settings, job, dq_run=request.args.get("dq_run"))
        return render_template("job.html", page=page, done=request.args.get("done"),
                               runs=humanize.fold(page["runs"], skipped=_skipped_run))

    @app.get("/api/jobs/<job>")
    def job_json(job: str) -> Response:
        admin.require_job(settings, job)
        return jsonify(pages.job_page(settings, job, dq_run=request.args.get("dq_run")))

    @app.get("/api/jobs/<job>/waiting")
    def waiting_json(job: str) -> Response:
        admin.require_job(settings, job)
        return jsonify(pages.waiting(settings, job))

    metrics = Metrics(settings, backlog_every=backlog_every)

    @app.get("/metrics")
    def metrics_text() -> Response:
        return Response(metrics.exposition(), content_type=CONTENT_TYPE)

    @app.get("/workflows/<name>")
    def workflow(name: str) -> str:
        page = pages.workflow_page(settings, name)
        return render_template("workflow.html", page=page, done=request.args.get("done"),
                               runs=humanize.fold(page["runs"], skipped=_nothing_new))

    @app.get("/api/workflows/<name>")
    def workflow_json(name: str) -> Response:
        return jsonify(pages.workflow_page(settings, name))

    @app.post("/jobs/<job>/rewind")
    def rewind(job: str) -> str | BaseResponse:
        to_run, context = request.form["to_run"], request.form.get("context") or None
        restore = request.form.get("restore_targets") == "on"
        if request.form.get("confirmed") != "yes":
            return render_template("confirm_rewind.html", job=job, to_run=to_run,
                                   context=context, restore=restore,
                                   removed=pages.rewind_preview(settings, job, to_run))
        done = state_actions.rewind(settings, job, to_run=to_run, context=context,
                            restore_targets=restore)
        to = done.to_run
        assert to is not None  # a rewind always names the run it went back to (reset: None)
        said = f"rewound to run {to.run_seq}" + (
            f"; restored {', '.join(t.target for t in done.restored)}" if done.restored else "")
        return redirect(url_for("job", job=job, done=said))

    @app.post("/jobs/<job>/reset")
    def reset(job: str) -> BaseResponse:
        state_actions.reset(settings, job, context=request.form.get("context") or None)
        return redirect(url_for("job", job=job, done="reset"))

    @app.post("/runs/<run_id>/abort")
    def abort_run(run_id: str) -> BaseResponse:
        run = state_actions.abort_run(settings, run_id)
        return redirect(url_for("job", job=run.job, done=f"run {run.run_seq} aborted"))

    @app.post("/workflows/<name>/runs/<run_id>/resume")
    def resume(name: str, run_id: str) -> BaseResponse:
        # the same command as the CLI's, in a process of its own: it may run for hours
        subprocess.Popen([sys.executable, "-m", "framework", "--conf-dir",
                          str(settings.conf_dir), "--state-root", str(settings.state_root),
                          "workflow", "resume", run_id], cwd=os.getcwd(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
        return redirect(url_for("workflow", name=name, done=f"resuming {run_id}"))

    return app


def _skipped_run(run: dict[str, Any]) -> bool:
    return bool(run["status"] == "skipped")


def _nothing_new(workflow_run: dict[str, Any]) -> bool:
    return bool(workflow_run["found_nothing_new"])


def _same(given: str, secret: str) -> bool:
    """Whether ``given`` is ``secret``, in constant time (any text: bytes compared)."""
    return hmac.compare_digest(given.encode(), secret.encode())
