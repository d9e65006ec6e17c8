from django.urls import path

from evaluator import views

app_name = "evaluator"

urlpatterns = [
    path("", views.campaigns, name="campaigns"),
    path("benchmarks/", views.benchmarks, name="benchmarks"),
    path("campaigns/new/", views.launch, name="launch"),
    path("campaigns/compare/", views.compare, name="compare"),
    path("campaigns/compare/pair/", views.compare_pair, name="compare_pair"),
    path("campaigns/<int:campaign_id>/", views.campaign, name="campaign"),
    path("campaigns/<int:campaign_id>/start/", views.start_campaign, name="start_campaign"),
    path("campaigns/<int:campaign_id>/verify/", views.verify_campaign, name="verify_campaign"),
    path("campaigns/<int:campaign_id>/lerobot.zip", views.lerobot_download, name="lerobot_download"),
    path("campaigns/<int:campaign_id>/export.<str:fmt>", views.export_campaign, name="export_campaign"),
    path("attempts/", views.attempts, name="attempts"),
    path("sim-to-real/", views.sim_to_real, name="sim_to_real"),
    path("attempts/<int:attempt_id>/", views.review, name="review"),
    path("attempts/<int:attempt_id>/start/", views.start_attempt, name="start_attempt"),
    path("attempts/<int:attempt_id>/rerun/", views.rerun_attempt, name="rerun_attempt"),
    path("attempts/<int:attempt_id>/replay/", views.replay_attempt, name="replay_attempt"),
    path("replays/<int:replay_id>/<str:name>", views.replay_file, name="replay_file"),
    path("attempts/<int:attempt_id>/live/", views.live, name="live"),
    path("attempts/<int:attempt_id>/timeline.json", views.timeline, name="timeline"),
    path("attempts/<int:attempt_id>/verify.json", views.verify, name="verify"),
    path("attempts/<int:attempt_id>/frame/<int:step>.png", views.frame, name="frame"),
    path("attempts/<int:attempt_id>/thumbnail/", views.thumbnail, name="thumbnail"),
    path("attempts/<int:attempt_id>/files/<path:path>", views.artifact, name="artifact"),
]
