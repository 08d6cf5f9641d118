"""What each application of the arena writes on its own whenever anyone logs in or looks: table -> the
columns (`WHOLE_TABLE`: every column) that an episode's changes leave out (`awm.sites.changes`).

Found by comparing each site's database after its templates' demonstrations with its pristine state
(`awm sites check` fails a template whose demonstration changes anything else it does not declare).
Kept apart from the site modules: those are part of each site's seed stamp, and this is no part of the
seeded data.
"""

from __future__ import annotations

from awm.sites.changes import WHOLE_TABLE

BOOKKEEPING: dict[str, dict[str, tuple[str, ...]]] = {
    # A log-in writes the session, its attributes and a cookie; an admin change bumps a cache generation.
    "trac": {
        "auth_cookie": (WHOLE_TABLE,), "session": (WHOLE_TABLE,), "session_attribute": (WHOLE_TABLE,),
        "cache": (WHOLE_TABLE,),
    },
    # A log-in writes a session and the last log-in time, and opens the customer's (empty) basket; each
    # dashboard edit is logged; views, searches and basket additions are counted (Oscar's analytics).
    # What a basket holds is in basket_line.
    "shop": {
        "django_session": (WHOLE_TABLE,), "auth_user": ("last_login",), "django_admin_log": (WHOLE_TABLE,),
        "basket_basket": (WHOLE_TABLE,),
        "analytics_productrecord": (WHOLE_TABLE,), "analytics_userproductview": (WHOLE_TABLE,),
        "analytics_userrecord": (WHOLE_TABLE,), "analytics_usersearch": (WHOLE_TABLE,),
    },
    # A log-in writes a session and the last log-in time; a visit the member's last-seen time and address,
    # a topic's view count, what the member has read and where (bookmark, unread mark, notification read);
    # a post the member's anti-flood marks.
    "forum": {
        "django_session": (WHOLE_TABLE,), "auth_user": ("last_login",),
        "spirit_user_userprofile": ("last_seen", "last_ip", "last_post_hash", "last_post_on"),
        "spirit_topic_topic": ("view_count",), "spirit_topic_unread_topicunread": (WHOLE_TABLE,),
        "spirit_comment_bookmark_commentbookmark": (WHOLE_TABLE,),
        "spirit_topic_notification_topicnotification": ("is_read",),
    },
}  # fmt: skip
