from django.urls import path

from dashboard.web import annotations, api, api_docs, badges, openapi, prometheus, sweeps, views

urlpatterns = [
    path("", views.leaderboard, name="leaderboard"),
    path("models/<slug:slug>/", views.model_page, name="model"),
    path("providers/<slug:slug>/", views.provider_page, name="provider"),
    path("endpoints/<int:pk>/", views.endpoint_page, name="endpoint"),
    path("runs/<int:pk>/", views.run_page, name="run"),
    path("methodology/", views.methodology, name="methodology"),
    path("metrics", prometheus.metrics, name="metrics"),
    path("metrics/alerts.json", annotations.alert_annotations, name="metrics-alerts"),
    path("badges/endpoints/<int:pk>/<slug:kind>.svg", badges.endpoint_badge, name="badge-endpoint"),
    path(
        "badges/providers/<slug:slug>/<slug:kind>.svg",
        badges.provider_badge,
        name="badge-provider",
    ),
    path("api/", api_docs.api_page, name="api-docs"),
    path("api/v1/", api.index, name="api-index"),
    path("api/v1/openapi.json", openapi.openapi, name="api-openapi"),
    path("api/v1/leaderboard", api.leaderboard, name="api-leaderboard"),
    path(
        "api/v1/leaderboard.csv", api.leaderboard, {"csv_suffix": True}, name="api-leaderboard-csv"
    ),
    path("api/v1/series", api.series, name="api-series"),
    path("api/v1/series.csv", api.series, {"csv_suffix": True}, name="api-series-csv"),
    path("api/v1/runs", api.runs, name="api-runs"),
    path("api/v1/runs.csv", api.runs, {"csv_suffix": True}, name="api-runs-csv"),
    path("api/v1/sweeps", sweeps.sweeps, name="api-sweeps"),
    path("api/v1/sweeps.csv", sweeps.sweeps, {"csv_suffix": True}, name="api-sweeps-csv"),
    path("api/v1/catalog", api.catalog, name="api-catalog"),
    path("api/v1/catalog.csv", api.catalog, {"csv_suffix": True}, name="api-catalog-csv"),
]
