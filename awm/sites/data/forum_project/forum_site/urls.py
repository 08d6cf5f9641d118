"""URLs of the arena's forum: Spirit's own, Django's admin (as Spirit's project template mounts it) and
the uploaded files (avatars, images in comments), which Spirit's template serves only with DEBUG on."""

import spirit.urls
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from django.views.static import serve

admin.site.login = login_required(admin.site.login)  # as Spirit's template: one login form, Spirit's

urlpatterns = [
    path("", include(spirit.urls)),
    re_path(r"^admin/", admin.site.urls),
    re_path(r"^media/(?P<path>.*)$", serve, {"document_root": settings.MEDIA_ROOT}),
]
