from django.urls import path

from dashboard.alerts import views

app_name = "alerts"

urlpatterns = [
    path("alerts/", views.index, name="index"),
    path("alerts/<int:pk>/", views.event, name="event"),
    path("alerts/rules/<int:pk>/", views.rule, name="rule"),
    path("alerts/silences/", views.silence_add, name="silence-add"),
    path("alerts/silences/<int:pk>/end/", views.silence_end, name="silence-end"),
]
