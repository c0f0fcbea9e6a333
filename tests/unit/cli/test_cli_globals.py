"""Global options: before or after the subcommand, environment, ``--dev``
credentials files, and their precedence; ``--json`` output."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format

from tests.unit.sdk.fake_tickwheel import FakeTickwheel
from tickwheel.v1 import admin_pb2, job_pb2, scheduler_pb2


def _job(job_id: str = "job_01TEST") -> job_pb2.Job:
    return job_pb2.Job(
        id=job_id,
        name="nightly",
        state=job_pb2.JOB_STATE_ACTIVE,
        version=4,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 2 * * *", time_zone="Europe/London")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
    )


@pytest.fixture
def get_job(fake: FakeTickwheel) -> scheduler_pb2.GetJobResponse:
    response = scheduler_pb2.GetJobResponse(job=_job())
    fake.reply("GetJob", response)
    return response


@pytest.mark.parametrize(
    "layout",
    [
        lambda a, k: ["--address", a, "--api-key", k, "job", "get", "job_01TEST"],
        lambda a, k: ["job", "get", "job_01TEST", "--address", a, "--api-key", k],
        lambda a, k: ["--address", a, "job", "get", "--api-key", k, "job_01TEST"],
        lambda a, k: ["job", "--api-key", k, "get", "job_01TEST", "--address", a],
        lambda a, k: [f"--address={a}", "job", "get", "job_01TEST", f"--api-key={k}"],
    ],
    ids=["before", "after", "split", "between-groups", "equals-form"],
)
def test_globals_before_or_after_the_subcommand(cli, fake, get_job, layout) -> None:
    result = cli(*layout(fake.address, fake.api_key))
    assert result.code == 0, result.err
    assert fake.requests("GetJob")[0].id == "job_01TEST"
    assert "nightly" in result.out
    assert result.err == (
        "warning: --api-key on the command line is visible to every local user (ps, /proc) and may stay in shell "
        "history; prefer --api-key-file FILE or TICKWHEEL_API_KEY\n"
    ), "a secret given as a flag works, with one warning"


def test_a_value_after_the_subcommand_wins_over_one_before(cli, fake, get_job) -> None:
    result = cli("--api-key", "tw_wrong", "--address", fake.address, "job", "get", "X", "--api-key", fake.api_key)
    assert result.code == 0, result.err


def test_environment_supplies_address_and_key(cli, fake, get_job, monkeypatch) -> None:
    monkeypatch.setenv("TICKWHEEL_ADDRESS", fake.address)
    monkeypatch.setenv("TICKWHEEL_API_KEY", fake.api_key)
    assert cli("job", "get", "job_01TEST").code == 0


def _dev_dir(tmp_path, fake: FakeTickwheel, **overrides) -> str:
    credentials = {
        "address": fake.address,
        "tenant": "dev",
        "api_key": fake.api_key,
        "admin_token": fake.admin_token,
        "worker_credential": "tw_worker_dev",
        **overrides,
    }
    (tmp_path / "dev-credentials.json").write_text(json.dumps(credentials))
    return str(tmp_path)


def test_dev_dir_supplies_address_key_and_admin_token(cli, fake, get_job, tmp_path) -> None:
    fake.reply("ClusterStatus", admin_pb2.ClusterStatusResponse(partition_count=8, store_engine="sqlite"))
    directory = _dev_dir(tmp_path, fake)

    assert cli("--dev", directory, "job", "get", "job_01TEST").code == 0
    status = cli("admin", "status", "--dev", directory)
    assert status.code == 0, status.err
    assert "sqlite" in status.out
    assert fake.calls[0].metadata["authorization"] == f"Bearer {fake.api_key}"
    assert fake.calls[1].metadata["authorization"] == f"Bearer {fake.admin_token}"


def test_explicit_flags_and_environment_win_over_the_dev_file(cli, fake, get_job, tmp_path, monkeypatch) -> None:
    directory = _dev_dir(tmp_path, fake, api_key="tw_stale_dev_key")
    assert cli("--dev", directory, "job", "get", "X").code == 1  # the file's stale key is refused
    assert cli("--dev", directory, "job", "get", "X", "--api-key", fake.api_key).code == 0
    monkeypatch.setenv("TICKWHEEL_API_KEY", fake.api_key)
    assert cli("--dev", directory, "job", "get", "X").code == 0


def test_a_missing_dev_file_is_bad_input(cli, tmp_path) -> None:
    result = cli("job", "get", "X", "--dev", str(tmp_path / "nowhere"))
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("error: --dev ")
    assert "dev-credentials.json" in result.err


def test_json_prints_the_response_as_one_proto_json_document(cli, fake, tenant, get_job) -> None:
    result = cli(*tenant, "job", "get", "job_01TEST", "--json")
    assert result.code == 0
    document = json.loads(result.out)
    assert document == json_format.MessageToDict(get_job)
    assert document["job"]["schedule"]["cron"]["timeZone"] == "Europe/London"


def test_help_exits_zero(cli) -> None:
    result = cli("job", "create", "--help")
    assert result.code == 0 and "--cron" in result.out and "--address" in result.out


def test_secrets_come_from_files_without_a_warning(cli, fake, get_job, tmp_path, monkeypatch) -> None:
    fake.reply("ClusterStatus", admin_pb2.ClusterStatusResponse(partition_count=8, store_engine="sqlite"))
    (tmp_path / "key").write_text(f"  {fake.api_key}\n")
    (tmp_path / "token").write_text(fake.admin_token)
    result = cli("job", "get", "X", "--address", fake.address, "--api-key-file", str(tmp_path / "key"))
    assert (result.code, result.err) == (0, "")
    status = cli("--admin-token-file", str(tmp_path / "token"), "admin", "status", "--address", fake.address)
    assert (status.code, status.err) == (0, "")
    assert [call.metadata["authorization"] for call in fake.calls] == [
        f"Bearer {fake.api_key}", f"Bearer {fake.admin_token}"]  # fmt: skip
    monkeypatch.setenv("TICKWHEEL_API_KEY", "tw_env_loses_to_the_file")
    assert cli("job", "get", "X", "--address", fake.address, "--api-key-file", str(tmp_path / "key")).code == 0


@pytest.mark.parametrize(
    ("content", "message"), [(None, "cannot read"), ("\n", "is empty"), ("a\nb", "more than one line")]
)
def test_a_bad_secret_file_is_bad_input_naming_the_option(cli, tmp_path, content, message) -> None:
    path = tmp_path / "key"
    if content is not None:
        path.write_text(content)
    result = cli("job", "get", "X", "--address", "127.0.0.1:1", "--api-key-file", str(path))
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("error: --api-key-file: ") and message in result.err
