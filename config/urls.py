from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

# A request refused before any view runs (an upload of too many files) still gets a sentence, not a bare page.
handler400 = "sessions_app.views.errors.bad_request"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("sessions_app.urls")),
]
