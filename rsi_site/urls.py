from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from evaluator.web.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="registration/login.html"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", api.urls),
    # Browsers ask for /favicon.ico whatever the page names: the site's icon, not a 404 on every page.
    path("favicon.ico", RedirectView.as_view(url=static("rsi/favicon.svg"), permanent=True)),
    path("", include("evaluator.web.urls")),
]

handler400 = "rsi_site.errors.bad_request"
handler403 = "rsi_site.errors.permission_denied"
handler404 = "rsi_site.errors.page_not_found"
handler500 = "rsi_site.errors.server_error"
