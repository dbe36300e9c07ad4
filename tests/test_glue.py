"""The Glue script layer: getResolvedOptions parses and rejects arguments as Glue does."""

from __future__ import annotations

import pytest

from framework.errors import GlueArgumentError
from framework.glue import getResolvedOptions


def test_resolves_the_options_asked_for_and_the_bookmark_arguments():
    argv = ["script.py", "--JOB_NAME", "orders", "--landing=s3://bucket/in", "--TempDir",
            "/tmp", "--job-bookmark-option", "job-bookmark-enable", "--extra-flag"]
    assert getResolvedOptions(argv, ["JOB_NAME", "landing"]) == {
        "JOB_NAME": "orders", "landing": "s3://bucket/in",
        "job_bookmark_option": "job-bookmark-enable", "job_bookmark_from": None,
        "job_bookmark_to": None}
    # Glue's default mode is disable; the legacy continuation option maps onto the modes
    assert getResolvedOptions(["s"], [])["job_bookmark_option"] == "job-bookmark-disable"
    legacy = getResolvedOptions(["s", "--continuation-option", "continuation-readonly",
                                 "--job-bookmark-from", "r1", "--job-bookmark-to", "r2"], [])
    assert legacy == {"job_bookmark_option": "job-bookmark-pause",
                      "job_bookmark_from": "r1", "job_bookmark_to": "r2"}


@pytest.mark.parametrize(("argv", "options", "message"), [
    (["s"], ["JOB_NAME", "landing"],
     "the following arguments are required: --JOB_NAME, --landing"),
    (["s", "--JOB_NAME"], ["JOB_NAME"], "argument --JOB_NAME: expected one argument"),
    (["s"], ["job-bookmark-option"], "Using reserved arguments --job-bookmark-option"),
    (["s", "--job-bookmark-option", "on"], [],
     "argument --job-bookmark-option: invalid choice: 'on' (choose from "
     "'job-bookmark-enable', 'job-bookmark-disable', 'job-bookmark-pause')"),
    (["s", "--continuation-option", "continuation-sometimes"], [],
     "argument --continuation-option: invalid choice: 'continuation-sometimes'"),
    (["s", "--continuation-option", "continuation-enabled", "--job-bookmark-option",
      "job-bookmark-enable"], [], "--job-bookmark-option and --continuation-option are both"),
    (["s", "--job-bookmark-option", "job-bookmark-enable", "--job-bookmark-from", "r1"], [],
     "Invalid option(s): --job-bookmark-from only apply with --job-bookmark-option "
     "job-bookmark-pause"),
    (["s", "--job-bookmark-option", "job-bookmark-pause", "--job-bookmark-from", "r1"], [],
     "Missing option or value for --job-bookmark-to"),
])
def test_bad_arguments_fail_with_glues_messages(argv, options, message):
    with pytest.raises(GlueArgumentError) as exc:
        getResolvedOptions(argv, options)
    assert str(exc.value).startswith(message)
