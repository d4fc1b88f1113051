from django.urls import path

from dashboard.alerts import views

app_name = "alerts"

urlpatterns = [
    path("alerts/", views.index, name="index"),
    path("alerts/<int:pk>/", views.event, name="event"),
]
