"""Seed the arena's forum (Spirit) from `forum_seed.json`: users with profiles and roles, categories,
public topics with their comments, private topics, likes and notifications.

Runs inside the forum's own virtualenv with the state folder as working directory and
`DJANGO_SETTINGS_MODULE=forum_site.settings` (`awm.sites.forum` does that):

    python forum_seed.py forum_seed.json

Why rows are written through the ORM with explicit dates and counters instead of posting through
Spirit's views: the views stamp `timezone.now()` everywhere, so a seed made through them would differ
on every build. Comments are rendered by Spirit's own Markdown renderer, as its comment form does.
Everything random (reply times, likes, view counts) comes from one seeded `random.Random`.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402 - needs django.setup() first
from django.db import transaction  # noqa: E402
from django.utils.text import slugify  # noqa: E402
from djconfig.models import Config  # noqa: E402
from spirit.admin.forms import BasicConfigForm  # noqa: E402
from spirit.category.models import Category  # noqa: E402
from spirit.comment.like.models import CommentLike  # noqa: E402
from spirit.comment.models import Comment  # noqa: E402
from spirit.core.conf import settings  # noqa: E402
from spirit.core.utils.markdown import Markdown  # noqa: E402
from spirit.topic.models import Topic  # noqa: E402
from spirit.topic.notification.models import TopicNotification  # noqa: E402
from spirit.topic.private.models import TopicPrivate  # noqa: E402
from spirit.user.models import UserProfile  # noqa: E402

User = get_user_model()
SEED = 20261201
# The forum's "now": the latest reply or like is before it, and notifications of replies in the
# last days before it are left unread.
NOW = datetime.fromisoformat("2026-12-01T09:00:00+00:00")
UNREAD_SINCE = NOW - timedelta(days=8)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def seed_users(users: list[dict]) -> dict[str, object]:
    made = {}
    for spec in users:
        user = User.objects.create_user(
            username=spec["username"],
            email=spec["email"],
            password=spec["password"],
            first_name=spec["first_name"],
            last_name=spec["last_name"],
            is_staff=spec["role"] == "administrator",
            is_superuser=spec["role"] == "administrator",
        )
        User.objects.filter(pk=user.pk).update(
            date_joined=at(spec["joined"]), last_login=NOW - timedelta(days=1)
        )
        UserProfile.objects.filter(user=user).update(
            location=spec["location"],
            timezone=spec["timezone"],
            is_verified=True,
            is_administrator=spec["role"] == "administrator",
            is_moderator=spec["role"] in ("administrator", "moderator"),
            last_seen=NOW - timedelta(days=1),
        )
        made[spec["username"]] = user
    return made


def seed_categories(categories: list[dict]) -> dict[str, Category]:
    """The first category takes over Spirit's "Uncategorized" (made by its migration, pk 2)."""
    made: dict[str, Category] = {}
    for index, spec in enumerate(categories):
        fields = {
            "title": spec["title"],
            "slug": "",
            "description": spec["description"],
            "color": spec["color"],
            "sort": spec["sort"],
            "parent": made[spec["parent"]] if spec.get("parent") else None,
        }
        if index == 0:
            category = Category.objects.get(title="Uncategorized")
            for name, value in fields.items():
                setattr(category, name, value)
            category.slug = slugify(spec["title"])  # Spirit fills a slug only when a category is added
            category.save()
        else:
            category = Category.objects.create(**fields)
        made[spec["key"]] = category
    Category.objects.update(reindex_at=at("2026-01-01T00:00:00+00:00"))
    return made


def seed_topic(spec: dict, category: Category, users: dict, rng: random.Random, markdown: Markdown) -> None:
    start = at(spec["date"])
    topic = Topic.objects.create(
        user=users[spec["user"]],
        category=category,
        title=spec["title"],
        is_pinned=spec.get("pinned", False),
        is_globally_pinned=spec.get("globally_pinned", False),
        is_closed=spec.get("closed", False),
    )
    posts = [(spec["user"], spec["body"])] + [tuple(reply) for reply in spec["replies"]]
    when = start
    comments = []
    for number, (author, text) in enumerate(posts):
        if number:
            when = min(
                when + timedelta(minutes=rng.randint(12, 30 * 60)), NOW - timedelta(hours=len(posts) - number)
            )
        comments.append(
            Comment.objects.create(
                user=users[author],
                topic=topic,
                comment=text,
                comment_html=markdown.render(text),
                date=when,
                ip_address="127.0.0.1",
            )
        )
    for comment in comments:
        likers = [u for name, u in users.items() if name != comment.user.username]
        chosen = rng.sample(likers, rng.choice([0, 0, 0, 1, 1, 1, 2, 2, 3, 4]))
        for user in sorted(chosen, key=lambda u: u.pk):
            liked = min(comment.date + timedelta(minutes=rng.randint(5, 24 * 60)), NOW)
            CommentLike.objects.create(user=user, comment=comment, date=liked)
        Comment.objects.filter(pk=comment.pk).update(likes_count=len(chosen))
    Topic.objects.filter(pk=topic.pk).update(
        date=start,
        last_active=comments[-1].date,
        reindex_at=start,
        comment_count=len(comments),
        view_count=rng.randint(6, 30) * len(comments) + rng.randint(0, 40),
    )
    seed_notifications(topic, comments, spec.get("participants", []), users)


def seed_notifications(topic: Topic, comments: list[Comment], invited: list[str], users: dict) -> None:
    """What Spirit keeps per participant: the topic's latest comment, unread when someone else wrote it
    in the last days (as `TopicNotification.notify_new_comment` leaves it)."""
    last = comments[-1]
    people = [c.user for c in comments] + [users[name] for name in invited]
    seen = set()
    for user in people:
        if user.pk in seen:
            continue
        seen.add(user.pk)
        unread = user.pk != last.user_id and last.date >= UNREAD_SINCE
        TopicNotification.objects.create(
            user=user,
            topic=topic,
            comment=last,
            date=last.date,
            action=TopicNotification.COMMENT,
            is_read=not unread,
            is_active=True,
        )


def seed_private(spec: dict, users: dict, rng: random.Random, markdown: Markdown) -> None:
    private = Category.objects.get(pk=settings.ST_TOPIC_PRIVATE_CATEGORY_PK)
    seed_topic(spec, private, users, rng, markdown)
    topic = Topic.objects.get(category=private, title=spec["title"])
    for name in [spec["user"], *spec["participants"]]:
        TopicPrivate.objects.create(user=users[name], topic=topic, date=at(spec["date"]))


def main(path: str) -> None:
    data = json.loads(open(path, encoding="utf-8").read())
    rng = random.Random(SEED)
    markdown = Markdown()
    with transaction.atomic():
        form = BasicConfigForm(
            data={
                "site_name": data["forum_name"],
                "site_description": "A forum for people who run servers at home",
                "template_footer": "",
                "comments_per_page": 20,
                "topics_per_page": 20,
            }
        )
        if not form.is_valid():
            raise SystemExit(f"forum config rejected: {form.errors}")
        form.save()
        # djconfig stamps its settings with the time of saving; the server reloads them when it changes.
        Config.objects.filter(key="_updated_at").update(value=str(at("2026-01-06T09:00:00+00:00")))
        users = seed_users(data["users"])
        categories = seed_categories(data["categories"])
        # Topic ids follow their dates, public and private alike, as on a forum that grew over time.
        threads = [(t, False) for t in data["topics"]] + [(t, True) for t in data["private_topics"]]
        for spec, is_private in sorted(threads, key=lambda pair: at(pair[0]["date"])):
            if is_private:
                seed_private(spec, users, rng, markdown)
            else:
                seed_topic(spec, categories[spec["category"]], users, rng, markdown)


if __name__ == "__main__":
    main(sys.argv[1])
