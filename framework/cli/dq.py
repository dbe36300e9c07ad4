"""deltamark dq ..."""

from typing import Annotated

import typer

from framework.cli._common import library_errors, options, render
from framework.errors import RunNotFoundError

app = typer.Typer(help="Data-quality results of the checks gating target writes.",
                  no_args_is_help=True)


@app.command("results")
def results(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    run: Annotated[str | None, typer.Option(help="This run (run id); default: the latest "
                                                 "run with results.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """One run's rule results: outcome, observed value, failing rows and a sample."""
    with library_errors(ctx):
        store = options(ctx).store()
        if run is not None and ((found_run := store.find_run(run)) is None
                                or found_run.job != job):
            raise RunNotFoundError(run)
        found = store.dq_results(job, run_id=run)
        if as_json:
            render(found, as_json=True)
            return
        for ruleset in dict.fromkeys((r.ruleset, r.target) for r in found):
            first = next(r for r in found if (r.ruleset, r.target) == ruleset)
            typer.echo(f"run {first.run_id} (run {first.run_seq}, attempt {first.attempt}): "
                       f"checks {first.ruleset} on {first.target}, {first.rows} rows, policy "
                       f"{first.policy}: {first.action}")
        render([{"ruleset": r.ruleset, "rule": r.rule, "outcome": r.outcome,
                 "failing_rows": r.unexpected_count, "observed": r.observed,
                 "sample": list(r.sample) or None, "message": r.message} for r in found],
               as_json=False)
