"""The dashboard's URLs (namespace "evaluator"), one view module per page group."""

from django.urls import path
from django.views.generic import RedirectView

from evaluator.web.views import (
    account,
    attempts,
    campaigns,
    compare,
    curves,
    leaderboards,
    live,
    review,
    sim_to_real,
    tags,
)

app_name = "evaluator"

urlpatterns = [
    path("", campaigns.campaigns, name="campaigns"),
    path("campaigns/", RedirectView.as_view(pattern_name="evaluator:campaigns"), name="campaign_list"),
    path("benchmarks/", campaigns.benchmarks, name="benchmarks"),
    path("account/tokens/", account.tokens, name="tokens"),
    path("account/tokens/<int:token_id>/revoke/", account.revoke_token, name="revoke_token"),
    path("leaderboards/", leaderboards.leaderboards, name="leaderboards"),
    path("leaderboards/<path:protocol_id>/", leaderboards.leaderboard, name="leaderboard"),
    path("policy-check/", campaigns.policy_check, name="policy_check"),
    path("campaigns/new/", campaigns.launch, name="launch"),
    path("campaigns/compare/", compare.compare, name="compare"),
    path("campaigns/curve/", curves.curve, name="curve"),
    path("campaigns/compare/pair/", compare.compare_pair, name="compare_pair"),
    path("campaigns/<int:campaign_id>/", campaigns.campaign, name="campaign"),
    path("campaigns/<int:campaign_id>/start/", campaigns.start_campaign, name="start_campaign"),
    path("campaigns/<int:campaign_id>/cancel/", campaigns.cancel_campaign, name="cancel_campaign"),
    path("campaigns/<int:campaign_id>/verify/", campaigns.verify_campaign, name="verify_campaign"),
    path("campaigns/<int:campaign_id>/lerobot.zip", campaigns.lerobot_download, name="lerobot_download"),
    path("campaigns/<int:campaign_id>/lerobot/prepare/", campaigns.prepare_lerobot, name="prepare_lerobot"),
    path("campaigns/<int:campaign_id>/export.<str:fmt>", attempts.export_campaign, name="export_campaign"),
    path("attempts/", attempts.attempts, name="attempts"),
    path("sim-to-real/", sim_to_real.sim_to_real, name="sim_to_real"),
    path("attempts/<int:attempt_id>/", review.review, name="review"),
    path("attempts/<int:attempt_id>/start/", campaigns.start_attempt, name="start_attempt"),
    path("attempts/<int:attempt_id>/rerun/", review.rerun_attempt, name="rerun_attempt"),
    path("attempts/<int:attempt_id>/tags/", tags.tag_attempt, name="tag_attempt"),
    path("attempts/<int:attempt_id>/tags/<int:tag_id>/remove/", tags.remove_tag, name="remove_tag"),
    path("failure-modes/", tags.failure_modes, name="failure_modes"),
    path("attempts/<int:attempt_id>/replay/", review.replay_attempt, name="replay_attempt"),
    path("replays/<int:replay_id>/<str:name>", review.replay_file, name="replay_file"),
    path("attempts/<int:attempt_id>/live/", live.live, name="live"),
    path("attempts/<int:attempt_id>/start-paused/", live.start_paused, name="start_paused"),
    path("attempts/<int:attempt_id>/timeline.json", review.timeline, name="timeline"),
    path("attempts/<int:attempt_id>/verify.json", review.verify, name="verify"),
    path("attempts/<int:attempt_id>/frame/<int:step>.png", review.frame, name="frame"),
    path("attempts/<int:attempt_id>/thumbnail/", review.thumbnail, name="thumbnail"),
    path("attempts/<int:attempt_id>/files/<path:path>", review.artifact, name="artifact"),
]
