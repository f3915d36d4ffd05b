"""Preview, compaction runs, reviews. Included by ``sessions_app.urls`` (names live in its ``sessions`` namespace)."""

from django.urls import path

from sessions_app.views import runs

urlpatterns = [
    path("sessions/<int:session_id>/preview/", runs.preview, name="preview"),
    path("sessions/<int:session_id>/preview.json", runs.preview, name="preview_json"),
    path("sessions/<int:session_id>/runs/", runs.run_create, name="run_create"),
    path("runs/<int:run_id>/", runs.run_detail, name="run"),
    path("runs/<int:run_id>.json", runs.run_detail, name="run_json"),
    path("runs/<int:run_id>/retry/", runs.run_retry, name="run_retry"),
    path("runs/<int:run_id>/cancel/", runs.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/review/", runs.run_review, name="run_review"),
    path("runs/<int:run_id>/comments/", runs.run_comment, name="run_comment"),
    path("runs/<int:run_id>/judge/", runs.run_judge, name="run_judge"),
    path("runs/<int:run_id>/compare/", runs.compare, name="run_compare"),
    path("runs/<int:run_id>/compare.json", runs.compare, name="run_compare_json"),
    path("runs/<int:run_id>/export/", runs.export, name="run_export"),
    path("reviews/", runs.reviews, name="reviews"),
    path("reviews.json", runs.reviews, name="reviews_json"),
]
