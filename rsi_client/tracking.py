"""A finished campaign, logged into the experiment tracker a training script already has open: MLflow or Weights &
Biases. Neither is a dependency of the client: the script passes the tracker it imported (pip install
"rsi-client[mlflow]" or "rsi-client[wandb]" brings them).

    import mlflow
    from rsi_client import Client
    from rsi_client.tracking import log_campaign

    with mlflow.start_run():
        campaign = rsi.evaluate(benchmark="fetch", tasks="all", policy=url, labels={"step": str(step)})
        log_campaign(campaign, mlflow, step=step, client=rsi, videos=2)

What is logged (PREFIX is "rsi" unless given):
- the identities, as MLflow params or W&B config: PREFIX/protocol_id and PREFIX/benchmark (one run holds one
  identity's results: identities are never pooled), and per campaign PREFIX/campaign-N/policy, .../policy_identity,
  .../label/NAME, and .../flag/CODE with its reason for each flag the site gives it (policy_version_changed: the
  weights changed while it ran; cancelled, logged only with partial=True);
- metrics at the training step: PREFIX/success_rate with its Wilson 95% bounds (..._low, ..._high), the counts
  (successes, completed, attempted, selected, infrastructure_errors, non_autonomous), and the same per task under
  PREFIX/task/TASK/...; a rate without a completed attempt is not logged (never a zero);
- artifacts: the campaign's JSON (its report, plan and labels) as PREFIX/campaign-N/campaign.json, and the videos of
  its first `videos` finished cells (plan order) under PREFIX/campaign-N/videos/ (W&B: as wandb.Video).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

COUNTS = ("successes", "attempted", "selected")
SAFE_NAME = re.compile(r"[^A-Za-z0-9_\-./ ]")  # what both trackers accept in a metric's name


def _name(text: str) -> str:
    return SAFE_NAME.sub("_", str(text))


def campaign_metrics(campaign: dict, prefix: str = "rsi") -> dict[str, float]:
    """The campaign's numbers as metrics: rates with their Wilson bounds, and their counts, overall and per task."""
    report = campaign["report"]

    def of(aggregate: dict, where: str) -> dict[str, float]:
        rate = aggregate["success_rate"]
        found = {f"{where}/{count}": float(aggregate[count]) for count in COUNTS}
        found[f"{where}/completed"] = float(rate["denominator"])
        if rate["value"] is not None:
            found[f"{where}/success_rate"] = float(rate["value"])
            found[f"{where}/success_rate_low"] = float(rate["wilson95_low"])
            found[f"{where}/success_rate_high"] = float(rate["wilson95_high"])
        return found

    metrics = of(report["overall"], prefix)
    metrics[f"{prefix}/infrastructure_errors"] = float(campaign["infrastructure_errors"])
    metrics[f"{prefix}/non_autonomous"] = float(report["non_autonomous"]["attempted"])
    for task, aggregate in report["per_task"].items():
        metrics.update(of(aggregate, f"{prefix}/task/{_name(task)}"))
    return metrics


def campaign_params(campaign: dict, prefix: str = "rsi") -> tuple[dict[str, str], dict[str, str]]:
    """(what the whole run shares: the protocol identity and benchmark; what is this campaign's own, its flags
    included: PREFIX/campaign-N/flag/CODE, the reason)."""
    shared = {f"{prefix}/protocol_id": campaign["protocol_id"], f"{prefix}/benchmark": campaign["benchmark"]}
    own = f"{prefix}/campaign-{campaign['id']}"
    mine = {f"{own}/policy": campaign["policy"], f"{own}/policy_identity": campaign["policy_identity"]}
    mine.update({f"{own}/label/{_name(name)}": value for name, value in campaign.get("labels", {}).items()})
    mine.update({f"{own}/flag/{_name(flag['code'])}": flag["reason"] for flag in campaign.get("flags", [])})
    return shared, mine


def _check_done(campaign: dict) -> None:
    if not campaign.get("done"):
        raise ValueError(
            f"campaign {campaign.get('id')} is not done ({campaign.get('finished')}/{campaign.get('cells')} finished): "
            "log it once Client.wait returns it"
        )


def _check_flags(campaign: dict, partial: bool) -> dict[str, str]:
    """The campaign's flags as the site says them ({code: reason}); one it ranks nowhere (a cancelled campaign) is
    refused unless a partial result is asked for explicitly."""
    flags = campaign.get("flags", [])
    unranked = [flag["reason"] for flag in flags if not flag["ranked"]]
    if unranked and not partial:
        raise ValueError("; ".join(unranked) + ": pass partial=True to log it anyway, flagged")
    return {flag["code"]: flag["reason"] for flag in flags}


def _check_one_identity(logged: dict, shared: dict[str, str]) -> None:
    for key, value in shared.items():
        if key in logged and str(logged[key]) != value:
            raise ValueError(
                f"this run holds {key} = {logged[key]}, the campaign {value}: results of different protocol identities "
                "are never pooled; log it in another run, or with another prefix"
            )


def _files(campaign: dict, client, videos: int, folder: Path) -> tuple[Path, list[Path]]:
    """The campaign's JSON, and the videos of its first `videos` finished cells, written into `folder`."""
    report = folder / "campaign.json"
    report.write_text(json.dumps(campaign, indent=1, sort_keys=True))
    found: list[Path] = []
    page = 1
    while len(found) < videos:
        cells = client.cells(campaign["id"], page=page)
        for cell in cells["cells"]:
            if len(found) == videos:
                break
            if cell["status"] != "finished":
                continue
            links = client.attempt(cell["attempt"])["artifacts"]
            video = next((url for name, url in sorted(links.items()) if name.endswith(".mp4")), None)
            if video is not None:
                path = folder / f"attempt-{cell['attempt']}-{_name(cell['task'])}-seed-{cell['seed']}.mp4"
                path.write_bytes(client.download(video))
                found.append(path)
        if page >= cells["pages"]:
            break
        page += 1
    return report, found


def log_campaign(
    campaign: dict,
    tracker: Any,
    *,
    step: int | None = None,
    client=None,
    videos: int = 0,
    prefix: str = "rsi",
    partial: bool = False,
) -> None:
    """Log a finished campaign (as Client.wait returns it) into `tracker`: the `mlflow` module with a run active, or a
    W&B run (`wandb.run`). `videos` > 0 needs the `client` to download them with. A campaign the site ranks nowhere
    (cancelled: its rates miss the cells it left) is refused unless `partial=True`; its flags are logged with it."""
    _check_done(campaign)
    _check_flags(campaign, partial)
    if videos and client is None:
        raise ValueError("videos are downloaded from the site: pass client=the Client that launched the campaign")
    if hasattr(tracker, "log_metrics") and hasattr(tracker, "active_run"):
        _log_mlflow(campaign, tracker, step, client, videos, prefix)
    elif hasattr(tracker, "log") and hasattr(tracker, "config"):
        _log_wandb(campaign, tracker, step, client, videos, prefix)
    else:
        raise TypeError(f"log_campaign takes the mlflow module or a wandb run, not {type(tracker).__name__}")


def _log_mlflow(campaign: dict, mlflow, step, client, videos: int, prefix: str) -> None:
    run = mlflow.active_run()
    if run is None:
        raise ValueError("no MLflow run is active: log inside `with mlflow.start_run():`")
    shared, own = campaign_params(campaign, prefix)
    _check_one_identity(mlflow.get_run(run.info.run_id).data.params, shared)
    mlflow.log_params({**shared, **own})
    mlflow.set_tag(f"{prefix}/campaign-{campaign['id']}/url", campaign["url"])
    mlflow.log_metrics(campaign_metrics(campaign, prefix), step=step or 0)
    with tempfile.TemporaryDirectory() as folder:
        report, found = _files(campaign, client, videos, Path(folder))
        where = f"{prefix}/campaign-{campaign['id']}"
        mlflow.log_artifact(str(report), artifact_path=where)
        for path in found:
            mlflow.log_artifact(str(path), artifact_path=f"{where}/videos")


def _log_wandb(campaign: dict, run, step, client, videos: int, prefix: str) -> None:
    import wandb  # a W&B run was passed in: wandb is installed

    shared, own = campaign_params(campaign, prefix)
    _check_one_identity(dict(run.config), shared)
    run.config.update({**shared, **own})
    logged: dict[str, Any] = dict(campaign_metrics(campaign, prefix))
    saved = Path(run.dir) / f"{prefix}/campaign-{campaign['id']}"
    saved.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        report, found = _files(campaign, client, videos, Path(folder))
        shutil.copy(report, saved / report.name)
        run.save(str(saved / report.name), base_path=run.dir, policy="now")
        for path in found:  # W&B copies each into the run's media as it logs it
            logged[f"{prefix}/video/{path.stem}"] = wandb.Video(str(path), format="mp4")
        run.log(logged, step=step)
