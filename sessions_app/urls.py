from django.urls import path

app_name = "sessions"
urlpatterns: list = []
