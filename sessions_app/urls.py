from django.urls import include, path

from sessions_app.views import agents, archive, diagnosis, findings, live, simulations, timeline, usage
from sessions_app.views import sessions as views

app_name = "sessions"
urlpatterns = [
    path("", views.session_list, name="list"),
    path("agents.css", agents.stylesheet, name="agents_css"),
    path("sessions.json", views.session_list, name="list_json"),
    path("usage/", usage.usage, name="usage"),
    path("usage.json", usage.usage, name="usage_json"),
    path("usage.csv", usage.usage, name="usage_csv"),
    path("simulate/", simulations.simulator, name="simulator"),
    path("simulate.json", simulations.simulator, name="simulator_json"),
    path("simulations/<int:run_id>/", simulations.simulation, name="simulation"),
    path("simulations/<int:run_id>.json", simulations.simulation, name="simulation_json"),
    path("findings/", findings.findings, name="findings"),
    path("findings.json", findings.findings, name="findings_json"),
    path("search/", views.search, name="search"),
    path("search.json", views.search, name="search_json"),
    path("import/", views.upload, name="upload"),
    path("imports/<int:upload_id>/", views.import_progress, name="import_progress"),
    path("imports/<int:upload_id>.json", views.import_progress, name="import_progress_json"),
    path("sessions/<int:session_id>/", views.session_detail, name="detail"),
    path("sessions/<int:session_id>.json", views.session_detail, name="detail_json"),
    path("sessions/<int:session_id>/m/<int:seq>/", views.message_permalink, name="message"),
    path("sessions/<int:session_id>/subagent/", views.subagent_records, name="subagent"),
    path("sessions/<int:session_id>/m/<int:seq>/blocks/<int:index>/", views.message_block, name="block"),
    path("sessions/<int:session_id>/timeline/", timeline.timeline, name="timeline"),
    path("sessions/<int:session_id>/timeline.json", timeline.timeline, name="timeline_json"),
    path("sessions/<int:session_id>/timeline/turn/", timeline.turn, name="turn"),
    path("sessions/<int:session_id>/export.html", views.export_html, name="export_html"),
    path("sessions/<int:session_id>/restore/", archive.restore, name="restore"),
    path("sessions/<int:session_id>/restore.json", archive.restore, name="restore_json"),
    path("sessions/<int:session_id>/diagnosis/", diagnosis.diagnosis, name="diagnosis"),
    path("sessions/<int:session_id>/diagnosis.json", diagnosis.diagnosis, name="diagnosis_json"),
    path("help/thresholds/<str:agent>/", diagnosis.thresholds_help, name="thresholds_help"),
    path("sessions/<int:session_id>/live/", live.live_status, name="live"),
    path("sessions/<int:session_id>/live.json", live.live_status, name="live_json"),
    path("sessions/<int:session_id>/live/overview/", live.live_overview, name="live_overview"),
    path("sessions/<int:session_id>/live/timeline/", live.live_timeline, name="live_timeline"),
    path("", include("sessions_app.runs_urls")),
]
